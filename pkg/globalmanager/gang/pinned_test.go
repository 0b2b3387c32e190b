package gang

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
)

func TestAPinnedPodsNodeSaysWhyItIsNotPlaced(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	kube := kubefake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tainted"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint,
			{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cordoned"}, Spec: corev1.NodeSpec{Unschedulable: true}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "free"}},
	)
	r := &nodeReads{kube: kube, clock: clock.RealClock{}}
	pod := func(node string, tolerations ...corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Annotations: map[string]string{AnnotationPinnedNode: node}},
			Spec: corev1.PodSpec{Tolerations: tolerations}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{pod("gone"), "pod w is pinned to node gone, which does not exist"},
		{pod("cordoned"), "pod w is pinned to node cordoned, which is cordoned (unschedulable)"},
		{pod("tainted"), "pod w is pinned to node tainted, whose taint dedicated=gpu:NoSchedule it does not tolerate"},
		{pod("tainted", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}), ""},
		{pod("free"), ""},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unpinned"}}, ""},
	} {
		if got := r.pinnedSays(t.Context(), tc.pod); got != tc.want {
			t.Errorf("pinned to %q: %q, want %q", tc.pod.Annotations[AnnotationPinnedNode], got, tc.want)
		}
	}
	// Read once per node within the TTL, however often a job syncs.
	gets := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "get" && strings.Contains(a.GetResource().Resource, "nodes") {
			gets++
		}
	}
	r.pinnedSays(t.Context(), pod("gone"))
	if after := len(kube.Actions()); gets != 4 || after != 4 {
		t.Errorf("%d node reads for 4 nodes, %d after asking again; want each read once", gets, after)
	}
}
