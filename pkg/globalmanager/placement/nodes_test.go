package placement

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
)

func cpu(s string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
}

func TestAPinnedPodsNodeSaysWhyItIsNotPlaced(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	kube := kubefake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tainted"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint,
			{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cordoned"}, Spec: corev1.NodeSpec{Unschedulable: true}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "free"}, Status: corev1.NodeStatus{Allocatable: cpu("4")}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "full"}, Status: corev1.NodeStatus{Allocatable: cpu("4")}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Status: corev1.NodeStatus{Allocatable: cpu("500m")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "there", Namespace: "other"}, Spec: corev1.PodSpec{NodeName: "full",
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: cpu("3500m")}}}}},
	)
	r := NewNodes(kube, clock.RealClock{})
	pod := func(node string, tolerations ...corev1.Toleration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Annotations: map[string]string{AnnotationPinnedNode: node}},
			Spec: corev1.PodSpec{Tolerations: tolerations,
				Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: cpu("1")}}}}}
	}
	bound := pod("")
	bound.Spec.NodeName = "gone"
	boundTainted := pod("")
	boundTainted.Spec.NodeName = "tainted"
	bySelector := pod("")
	bySelector.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "cordoned"}
	lasting := func(says string) Refusal { return Refusal{Says: says, Lasts: true} }
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want Refusal
	}{
		"missing":  {pod("gone"), lasting("pod w is pinned to node gone, which does not exist")},
		"cordoned": {pod("cordoned"), lasting("pod w is pinned to node cordoned, which is cordoned (unschedulable)")},
		"tainted":  {pod("tainted"), lasting("pod w is pinned to node tainted, whose taint dedicated=gpu:NoSchedule it does not tolerate")},
		"full, for now": {pod("full"), Refusal{Says: "pod w is pinned to node full, which has too little free: " +
			"cpu: it asks for 1, 500m of the node's 4 allocatable is free (3500m requested by the pods there)"}},
		"too small for ever": {pod("small"), lasting("pod w is pinned to node small, which has too little free: " +
			"cpu: it asks for 1, 500m of the node's 500m allocatable is free (0 requested by the pods there)")},
		"tolerated":             {pod("tainted", corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}), Refusal{}},
		"room":                  {pod("free"), Refusal{}},
		"unpinned":              {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unpinned"}}, Refusal{}},
		"bound to missing":      {bound, lasting("pod w is pinned to node gone, which does not exist")},
		"bound, taints ignored": {boundTainted, Refusal{}},
		"hostname selector":     {bySelector, lasting("pod w is pinned to node cordoned, which is cordoned (unschedulable)")},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.NodeSays(t.Context(), tc.pod)); diff != "" {
				t.Errorf("(-want,+got)\n%s", diff)
			}
		})
	}
	// Read once per node within the TTL, however often a job syncs.
	gets := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "get" && strings.Contains(a.GetResource().Resource, "nodes") {
			gets++
		}
	}
	r.NodeSays(t.Context(), pod("gone"))
	r.NodeSays(t.Context(), pod("full"))
	if after := len(kube.Actions()); gets != 6 || after != len(kube.Actions()) {
		t.Errorf("%d node reads for 6 nodes; want each read once", gets)
	}
}
