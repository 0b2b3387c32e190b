package placement

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
)

// unschedulablePod is a pod the scheduler gave up on, saying says.
func unschedulablePod(name string, says string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: says}}}}
}

func TestUnplacedNamesThePodItsNodeAndTheSchedulersReason(t *testing.T) {
	kube := kubefake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-0"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}}})
	r := NewNodes(kube, clock.RealClock{})
	says := "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2 node(s) didn't match Pod's node affinity/selector."
	selected := unschedulablePod("job-train-0", says)
	selected.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "edge-0"}
	boundToMissing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-agg"}, Spec: corev1.PodSpec{NodeName: "edge-9"},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-a"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	running := unschedulablePod("job-0", says)
	running.Status.Phase = corev1.PodRunning
	for name, tc := range map[string]struct {
		pods []*corev1.Pod
		want string
	}{
		"pinned by selector to a tainted node": {[]*corev1.Pod{selected},
			"pod job-train-0 is pinned to node edge-0, whose taint k=v:NoSchedule it does not tolerate; the scheduler says: " + says},
		"unpinned": {[]*corev1.Pod{unschedulablePod("job-b", "0/3 nodes are available: 3 Insufficient cpu.")},
			"pod job-b cannot be placed; the scheduler says: 0/3 nodes are available: 3 Insufficient cpu."},
		"bound to a node that does not exist, first by name, others counted": {[]*corev1.Pod{selected, boundToMissing},
			"pod job-agg is pinned to node edge-9, which does not exist (and 1 more pods cannot be placed)"},
		"waiting its turn": {[]*corev1.Pod{waiting}, ""},
		"running":          {[]*corev1.Pod{running}, ""},
		"the scheduler's words are bounded": {[]*corev1.Pod{unschedulablePod("job-c", strings.Repeat("x", 5000))},
			"pod job-c cannot be placed; the scheduler says: " + strings.Repeat("x", 1024-len("…(truncated)")) + "…(truncated)"},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.Unplaced(t.Context(), tc.pods)); diff != "" {
				t.Errorf("(-want,+got)\n%s", diff)
			}
		})
	}
}

func TestPinnedNodeReadsEveryWayATemplateNamesANode(t *testing.T) {
	hostAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n3"}}}}}}}}
	for name, tc := range map[string]struct {
		spec corev1.PodSpec
		ann  map[string]string
		want string
	}{
		"nodeName":          {spec: corev1.PodSpec{NodeName: "n1"}, want: "n1"},
		"annotation":        {ann: map[string]string{AnnotationPinnedNode: "n2"}, want: "n2"},
		"hostname selector": {spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelHostname: "n4"}}, want: "n4"},
		"hostname affinity": {spec: corev1.PodSpec{Affinity: hostAffinity}, want: "n3"},
		"none":              {spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "a"}}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.ann}, Spec: tc.spec}
			if got := PinnedNode(pod); got != tc.want {
				t.Errorf("PinnedNode = %q, want %q", got, tc.want)
			}
		})
	}
}
