package federatedlearning

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// TestTrainerRunsOnItsDatasetsNode: a training worker whose template names
// no node runs on its Dataset's node, and says so; one whose template names
// another node keeps it, with a warning.
func TestTrainerRunsOnItsDatasetsNode(t *testing.T) {
	tests := map[string]struct {
		spec                  corev1.PodSpec
		wantNode, wantPinned  string
		wantStatus            corev1.ConditionStatus
		wantReason, wantEvent string
	}{
		"no node": {
			wantNode: "edge-1", wantStatus: corev1.ConditionTrue, wantReason: "PlacedOnDatasetNode",
			wantEvent: "Normal PlacedOnDatasetNode trainingWorkers[1] runs on node edge-1, its Dataset edge1-surface-defect-detection-dataset's: its template names no node",
		},
		"a selector, no node": {
			spec:       corev1.PodSpec{NodeSelector: map[string]string{"accelerator": "npu"}},
			wantPinned: "edge-1", wantStatus: corev1.ConditionTrue, wantReason: "PlacedOnDatasetNode",
			wantEvent: "Normal PlacedOnDatasetNode trainingWorkers[1] runs on node edge-1",
		},
		"the Dataset's node": {
			spec:     corev1.PodSpec{NodeName: "edge-1"},
			wantNode: "edge-1", wantStatus: corev1.ConditionTrue, wantReason: "OnDatasetNodes",
		},
		"another node": {
			spec:     corev1.PodSpec{NodeName: "edge-0"},
			wantNode: "edge-0", wantStatus: corev1.ConditionFalse, wantReason: "NodeDiffersFromDataset",
			wantEvent: "Warning NodeDiffersFromDataset trainingWorkers[1]'s template names node edge-0, but its Dataset edge1-surface-defect-detection-dataset is on node edge-1",
		},
		"another node by hostname": {
			spec:       corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: "edge-0"}},
			wantStatus: corev1.ConditionFalse, wantReason: "NodeDiffersFromDataset",
			wantEvent: "Warning NodeDiffersFromDataset trainingWorkers[1]'s template names node edge-0",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := exampleJob(t)
			tmpl := &job.Spec.TrainingWorkers[1].Template
			tmpl.Spec.NodeName, tmpl.Spec.NodeSelector = tc.spec.NodeName, tc.spec.NodeSelector
			f := newFixture(t, append(referencedObjects(), job)...)
			f.sync(t, job)
			var train1 *corev1.Pod
			var seen []runtime.Object
			for _, p := range f.createdPods() {
				if strings.Contains(p.Name, "-training-1-") {
					train1 = p
				}
				p.Status.Phase = corev1.PodPending
				seen = append(seen, p)
			}
			if train1 == nil {
				t.Fatalf("no training-1 pod: %v", f.kubeWrites())
			}
			if train1.Spec.NodeName != tc.wantNode || common.PinnedNode(train1) != tc.wantNode+tc.wantPinned {
				t.Errorf("training-1 has nodeName %q, pinned to %q; want nodeName %q, pinned to %q",
					train1.Spec.NodeName, common.PinnedNode(train1), tc.wantNode, tc.wantNode+tc.wantPinned)
			}
			if tc.wantPinned != "" && train1.Spec.NodeSelector["accelerator"] != "npu" {
				t.Errorf("the template's node selector is gone: %v", train1.Spec.NodeSelector)
			}
			events := drain(f.c.deps.Recorder.(*record.FakeRecorder))
			var got string
			for _, e := range events {
				if strings.Contains(e, "DatasetNode") || strings.Contains(e, "FromDataset") {
					got = e
				}
			}
			if (tc.wantEvent == "") != (got == "") || !strings.HasPrefix(got, tc.wantEvent) {
				t.Errorf("event %q, want one starting %q; all: %q", got, tc.wantEvent, events)
			}
			// The condition stays once the pods are seen, and the event is not said again.
			for _, a := range f.sedna.Actions() {
				if u, ok := a.(clienttesting.UpdateAction); ok && u.GetSubresource() == "status" {
					job.Status = u.GetObject().(*sednav1.FederatedLearningJob).Status
				}
			}
			f = newFixture(t, append(append(referencedObjects(), job), seen...)...)
			f.sync(t, job)
			c := common.FindJobCondition(f.status(t, job.Name).Conditions, condOnDatasetNodes)
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Errorf("%s condition %+v, want %s %s", condOnDatasetNodes, c, tc.wantStatus, tc.wantReason)
			}
			if again := drain(f.c.deps.Recorder.(*record.FakeRecorder)); strings.Contains(strings.Join(again, "\n"), "DatasetNode") {
				t.Errorf("the placement said again: %q", again)
			}
		})
	}
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
