package placement

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
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
	// Read once per node within the TTL, however often a job syncs; the
	// pods on a node only for a pod not bound there that asks for
	// something the node has (free, full, small).
	reads := func() (gets, lists int) {
		for _, a := range kube.Actions() {
			switch {
			case a.GetVerb() == "get" && a.GetResource().Resource == "nodes":
				gets++
			case a.GetVerb() == "list" && a.GetResource().Resource == "pods":
				lists++
			}
		}
		return gets, lists
	}
	gets, lists := reads()
	r.NodeSays(t.Context(), pod("gone"))
	r.NodeSays(t.Context(), pod("full"))
	if again, _ := reads(); gets != 6 || lists != 3 || again != gets {
		t.Errorf("%d node reads for 6 nodes and %d lists of their pods for 3 (then %d node reads); want each read once", gets, lists, again)
	}
}

func TestSyncsAskingTogetherReadANodeOnce(t *testing.T) {
	kube := kubefake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Allocatable: cpu("4")}})
	release := make(chan struct{})
	var gets, lists atomic.Int32
	kube.PrependReactor("get", "nodes", func(clienttesting.Action) (bool, kruntime.Object, error) {
		gets.Add(1)
		<-release
		return false, nil, nil
	})
	kube.PrependReactor("list", "pods", func(a clienttesting.Action) (bool, kruntime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	r := NewNodes(kube, clock.RealClock{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Annotations: map[string]string{AnnotationPinnedNode: "n"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: cpu("1")}}}}}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { r.NodeSays(t.Context(), pod) })
	}
	// Every sync but the reading one waits for its read.
	for gets.Load() == 0 {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if gets.Load() != 1 || lists.Load() != 1 {
		t.Errorf("20 syncs asking at once read the node %d times and listed its pods %d times; want once each", gets.Load(), lists.Load())
	}
}

func TestANodeReadIsNotKeptPastItsTTL(t *testing.T) {
	kube := kubefake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}})
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := NewNodes(kube, clk)
	bound := func(node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Spec: corev1.PodSpec{NodeName: node}}
	}
	r.NodeSays(t.Context(), bound("a"))
	clk.SetTime(clk.Now().Add(nodeTTL / 2))
	r.NodeSays(t.Context(), bound("b"))
	clk.SetTime(clk.Now().Add(nodeTTL / 2))
	// The sweep a read set off, nodeTTL later, with nobody asking again.
	r.nodes.sweep()
	if _, kept := r.nodes.reads["a"]; kept || len(r.nodes.reads) != 1 || !r.nodes.sweeping {
		t.Errorf("after its TTL node a's read is still kept (%d reads kept, another sweep due %t); want only b's, and a sweep due for it",
			len(r.nodes.reads), r.nodes.sweeping)
	}
	clk.SetTime(clk.Now().Add(nodeTTL / 2))
	r.nodes.sweep()
	if len(r.nodes.reads) != 0 || r.nodes.sweeping {
		t.Errorf("%d reads kept past their TTL (another sweep due %t); want none", len(r.nodes.reads), r.nodes.sweeping)
	}
}
