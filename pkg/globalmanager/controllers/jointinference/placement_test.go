package jointinference

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

// The scheduler's words on a pod pinned to a node that does not exist.
const schedulerSays = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."

// settledWithEdgeReplicaSet is a fixture whose service's children exist,
// its edge Deployment (with a UID, as the API server gives it) controlling
// a ReplicaSet, which it returns.
func settledWithEdgeReplicaSet(t *testing.T) (*fixture, *appsv1.ReplicaSet) {
	t.Helper()
	ji, models := exampleObjects(t)
	f := newFixture(t, append(models, ji)...)
	f.settle(t)
	d, err := f.kube.AppsV1().Deployments(ns).Get(t.Context(), edgeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.UID = "edge-deployment-uid"
	if d, err = f.kube.AppsV1().Deployments(ns).Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cache(t, d)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: edgeName + "-5d8f", Namespace: ns, UID: "edge-rs-uid",
		Labels:          d.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}}}
	f.cache(t, rs)
	return f, rs
}

// podOf is a pod rs makes, pinned by a hostname node selector to node: one
// the scheduler could not place when refused, else running there.
func podOf(rs *appsv1.ReplicaSet, name, node string, refused bool) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid"), Labels: rs.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec:   corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: node}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if refused {
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: schedulerSays}}}
	} else {
		pod.Spec.NodeName = node
	}
	return pod
}

// scheduled is the service's Scheduled condition as the fake API server
// holds it, without its times; nil when it has none.
func scheduled(t *testing.T, f *fixture) *sednav1.JobCondition {
	t.Helper()
	c := common.FindJobCondition(f.storedService(t).Status.Conditions, gang.ConditionScheduled)
	if c == nil {
		return nil
	}
	c = c.DeepCopy()
	c.LastHeartbeatTime, c.LastTransitionTime = metav1.Time{}, metav1.Time{}
	return c
}

func TestAJointInferenceWorkerThatCannotBePlacedIsNamedOnTheService(t *testing.T) {
	refusedMsg := "pod " + edgeName + "-5d8f-x2k, pinned to node gone, cannot be placed; the scheduler says: " + schedulerSays
	for name, tc := range map[string]struct {
		pods       func(rs *appsv1.ReplicaSet) []*corev1.Pod
		want       *sednav1.JobCondition
		wantEvents []string
	}{
		"a refused worker pod": {
			pods: func(rs *appsv1.ReplicaSet) []*corev1.Pod {
				return []*corev1.Pod{podOf(rs, edgeName+"-5d8f-x2k", "gone", true), podOf(rs, edgeName+"-5d8f-a1b", "edge-0", false)}
			},
			want: &sednav1.JobCondition{Type: gang.ConditionScheduled, Status: corev1.ConditionFalse, Reason: placement.ReasonUnschedulable,
				Message: refusedMsg, ObservedGeneration: 1},
			wantEvents: []string{"Warning Unschedulable " + refusedMsg},
		},
		"every worker pod placed": {
			pods: func(rs *appsv1.ReplicaSet) []*corev1.Pod {
				return []*corev1.Pod{podOf(rs, edgeName+"-5d8f-a1b", "edge-0", false)}
			},
		},
		// The owner-uid label only finds the service: a pod whose
		// controllers do not lead to it says nothing of it.
		"a refused pod labelled as the service's, of another ReplicaSet": {
			pods: func(rs *appsv1.ReplicaSet) []*corev1.Pod {
				other := rs.DeepCopy()
				other.UID = "not-cached"
				return []*corev1.Pod{podOf(other, "copied", "gone", true)}
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f, rs := settledWithEdgeReplicaSet(t)
			for _, p := range tc.pods(rs) {
				f.cache(t, p)
			}
			// Said once, however often the service syncs while it waits.
			for range 2 {
				if err := f.c.sync(t.Context(), key); err != nil {
					t.Fatal(err)
				}
				f.cache(t, f.storedService(t))
			}
			if diff := cmp.Diff(tc.want, scheduled(t, f)); diff != "" {
				t.Errorf("Scheduled condition (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, f.drainEvents()); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestAJointInferenceServiceWhoseWorkerIsPlacedAtLastSaysPlaced(t *testing.T) {
	f, rs := settledWithEdgeReplicaSet(t)
	pod := podOf(rs, edgeName+"-5d8f-x2k", "edge-0", true)
	f.cache(t, pod)
	f.settle(t)
	if c := scheduled(t, f); c == nil || c.Reason != placement.ReasonUnschedulable {
		t.Fatalf("Scheduled condition %+v, want Unschedulable", c)
	}
	f.cache(t, podOf(rs, pod.Name, "edge-0", false))
	f.settle(t)
	want := &sednav1.JobCondition{Type: gang.ConditionScheduled, Status: corev1.ConditionTrue, Reason: gang.ReasonPlaced,
		Message: "no pod of it is refused a place", ObservedGeneration: 1}
	if diff := cmp.Diff(want, scheduled(t, f)); diff != "" {
		t.Errorf("Scheduled condition (-want,+got):\n%s", diff)
	}
	for _, e := range f.drainEvents() {
		if strings.HasPrefix(e, "Warning") {
			t.Errorf("a warning once placed: %s", e)
		}
	}
}
