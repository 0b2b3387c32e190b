package allocator

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// gpuNode is a Ready node with gpus GPUs allocatable (none listed when
// gpus is negative), changed by opts.
func gpuNode(name string, gpus int, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	n.Status.Allocatable = resources("cpu", "64", "pods", "110")
	if gpus >= 0 {
		n.Status.Allocatable[ResourceGPU] = *resourceOf(gpus)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, opt := range opts {
		opt(n)
	}
	return n
}

func asEdge(n *corev1.Node)   { n.Labels[EdgeNodeLabel] = "" }
func asCordon(n *corev1.Node) { n.Spec.Unschedulable = true }
func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func gpuTaint(n *corev1.Node) {
	n.Spec.Taints = []corev1.Taint{{Key: string(ResourceGPU), Effect: corev1.TaintEffectNoSchedule}}
}
func labelled(k, v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[k] = v } }

// gpuPod is a pod requesting gpus GPUs, bound to node, in phase.
func gpuPod(name, node string, gpus int, phase corev1.PodPhase) *corev1.Pod {
	list := corev1.ResourceList{ResourceGPU: *resourceOf(gpus)}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{
			{Name: "c", Resources: corev1.ResourceRequirements{Requests: list, Limits: list}},
		}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

// pinnedGPUPod is a pod not yet bound, pinned to node as DDP learners are.
func pinnedGPUPod(name, node string, gpus int) *corev1.Pod {
	pod := gpuPod(name, "", gpus, corev1.PodPending)
	pod.Spec.Affinity = common.Pin(nil, node)
	return pod
}

func resourceOf(n int) *resource.Quantity { return resource.NewQuantity(int64(n), resource.DecimalSI) }

// gpuPlacer is a GPUPlacer over caches holding nodes and pods, and the
// indexer of its pods; a nil clk is a fake clock that stands still.
func gpuPlacer(t *testing.T, clk *testingclock.FakePassiveClock, nodes []*corev1.Node, pods []*corev1.Pod) (*GPUPlacer, cache.Indexer) {
	t.Helper()
	nodeIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	podIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		mustAdd(t, nodeIndex, SlimNode(n))
	}
	for _, p := range pods {
		mustAddPod(t, podIndex, p)
	}
	if clk == nil {
		clk = testingclock.NewFakePassiveClock(time.Unix(1_000_000, 0))
	}
	p := &GPUPlacer{Nodes: corelisters.NewNodeLister(nodeIndex), Pods: corelisters.NewPodLister(podIndex), Clock: clk}
	return p, podIndex
}

func mustAdd(t *testing.T, index cache.Indexer, obj any) {
	t.Helper()
	if err := index.Add(obj); err != nil {
		t.Fatal(err)
	}
}

// mustAddPod adds pod as the allocator's cache holds it (slimmed).
func mustAddPod(t *testing.T, index cache.Indexer, pod *corev1.Pod) {
	t.Helper()
	slim, _ := SlimPod(pod)
	mustAdd(t, index, slim)
}

var tolerateGPU = &corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: string(ResourceGPU), Operator: corev1.TolerationOpExists}}}

var gpuPlacements = map[string]struct {
	nodes     []*corev1.Node
	pods      []*corev1.Pod
	learner   *corev1.PodSpec
	worldSize int
	want      []GPUSlot
	wantErr   string
}{
	"one node holds all: the tightest": {
		nodes: []*corev1.Node{gpuNode("a", 8), gpuNode("b", 4), gpuNode("c", 6)}, worldSize: 4,
		want: []GPUSlot{{Node: "b", GPUs: 4}},
	},
	"one node holds all: the largest when only it does": {
		nodes: []*corev1.Node{gpuNode("a", 8), gpuNode("b", 4)}, worldSize: 8,
		want: []GPUSlot{{Node: "a", GPUs: 8}},
	},
	"spread over the most free first, the rest on the tightest": {
		nodes: []*corev1.Node{gpuNode("a", 2), gpuNode("b", 4), gpuNode("c", 3), gpuNode("d", 1)}, worldSize: 8,
		want: []GPUSlot{{Node: "b", GPUs: 4}, {Node: "c", GPUs: 3}, {Node: "d", GPUs: 1}},
	},
	"equal nodes: by name": {
		nodes: []*corev1.Node{gpuNode("z", 4), gpuNode("m", 4), gpuNode("a", 4)}, worldSize: 6,
		want: []GPUSlot{{Node: "a", GPUs: 4}, {Node: "m", GPUs: 2}},
	},
	"every free GPU of the cluster": {
		nodes: []*corev1.Node{gpuNode("a", 2), gpuNode("b", 1), gpuNode("cpu-only", -1)}, worldSize: 3,
		want: []GPUSlot{{Node: "a", GPUs: 2}, {Node: "b", GPUs: 1}},
	},
	"not enough: says how many are free, where": {
		nodes: []*corev1.Node{gpuNode("node-a", 2), gpuNode("node-b", 1), gpuNode("cpu-only", -1)}, worldSize: 8,
		wantErr: "8 GPUs asked, the cloud nodes a learner may use have 3 free: node-a 2, node-b 1",
	},
	"not enough: names a few nodes only": {
		nodes:     []*corev1.Node{gpuNode("n1", 1), gpuNode("n2", 1), gpuNode("n3", 1), gpuNode("n4", 2), gpuNode("n5", 1), gpuNode("n6", 1)},
		worldSize: 8,
		wantErr:   "8 GPUs asked, the cloud nodes a learner may use have 7 free: n4 2, n1 1, n2 1, n3 1 and 2 more nodes",
	},
	"edge nodes ignored": {
		nodes: []*corev1.Node{gpuNode("edge", 8, asEdge), gpuNode("cloud", 2)}, worldSize: 4,
		wantErr: "have 2 free: cloud 2 (nodes not considered: 1 edge)",
	},
	"cordoned and NotReady nodes ignored": {
		nodes: []*corev1.Node{gpuNode("c", 8, asCordon), gpuNode("n", 8, notReady), gpuNode("ok", 1)}, worldSize: 2,
		wantErr: "have 1 free: ok 1 (nodes not considered: 2 not Ready or cordoned)",
	},
	"tainted nodes ignored for a learner that does not tolerate them": {
		nodes: []*corev1.Node{gpuNode("t", 8, gpuTaint)}, worldSize: 2,
		wantErr: "have 0 free (nodes not considered: 1 tainted)",
	},
	"tainted nodes used by a learner that tolerates them": {
		nodes: []*corev1.Node{gpuNode("t", 8, gpuTaint)}, learner: tolerateGPU, worldSize: 2,
		want: []GPUSlot{{Node: "t", GPUs: 2}},
	},
	"the learner's nodeSelector": {
		nodes:   []*corev1.Node{gpuNode("a", 8), gpuNode("b", 2, labelled("gpu", "a100")), gpuNode("c", 2, labelled("gpu", "a100"))},
		learner: &corev1.PodSpec{NodeSelector: map[string]string{"gpu": "a100"}}, worldSize: 4,
		want: []GPUSlot{{Node: "b", GPUs: 2}, {Node: "c", GPUs: 2}},
	},
	"pods' requests subtracted, bound or pinned": {
		nodes: []*corev1.Node{gpuNode("a", 8), gpuNode("b", 8)},
		pods:  []*corev1.Pod{gpuPod("p1", "a", 6, corev1.PodRunning), pinnedGPUPod("p2", "b", 3)}, worldSize: 7,
		want: []GPUSlot{{Node: "b", GPUs: 5}, {Node: "a", GPUs: 2}},
	},
	"finished pods not counted": {
		nodes: []*corev1.Node{gpuNode("a", 8)},
		pods:  []*corev1.Pod{gpuPod("done", "a", 8, corev1.PodSucceeded), gpuPod("failed", "a", 8, corev1.PodFailed)}, worldSize: 8,
		want: []GPUSlot{{Node: "a", GPUs: 8}},
	},
	"an overcommitted node has none free": {
		nodes: []*corev1.Node{gpuNode("a", 2), gpuNode("b", 1)},
		pods:  []*corev1.Pod{gpuPod("p", "a", 4, corev1.PodRunning)}, worldSize: 2,
		wantErr: "have 1 free: b 1",
	},
	"a learner affinity that cannot be read": {
		nodes: []*corev1.Node{gpuNode("a", 8)}, worldSize: 2,
		learner: &corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: "Bad"}}},
			}},
		}}},
		wantErr: "required node affinity",
	},
	"no GPU asked":           {nodes: []*corev1.Node{gpuNode("a", 8)}, worldSize: 0, wantErr: "0 GPUs asked: between 1 and 1024"},
	"more than MaxWorldSize": {nodes: []*corev1.Node{gpuNode("a", 8)}, worldSize: 1025, wantErr: "1025 GPUs asked: between 1 and 1024"},
}

func TestGPUPlacerPlacesOnTheFewestNodesOrSaysWhyNot(t *testing.T) {
	for name, tc := range gpuPlacements {
		t.Run(name, func(t *testing.T) {
			p, _ := gpuPlacer(t, nil, tc.nodes, tc.pods)
			got, err := p.Place(tc.worldSize, tc.learner)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Place(%d) = %v, %v; want an error saying %q", tc.worldSize, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Place(%d): %v", tc.worldSize, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Place(%d) (-want,+got):\n%s", tc.worldSize, diff)
			}
		})
	}
}

// mustPlace places worldSize GPUs for a learner that asks nothing else.
func mustPlace(t *testing.T, p *GPUPlacer, worldSize int) []GPUSlot {
	t.Helper()
	slots, err := p.Place(worldSize, nil)
	if err != nil {
		t.Fatalf("Place(%d): %v", worldSize, err)
	}
	return slots
}

// mustRefuse checks that Place refuses worldSize GPUs.
func mustRefuse(t *testing.T, p *GPUPlacer, worldSize int, why string) {
	t.Helper()
	if slots, err := p.Place(worldSize, nil); err == nil {
		t.Fatalf("Place(%d) = %v while %s; want an error", worldSize, slots, why)
	}
}

func TestGPUPlacerHoldsWhatItPlacedUntilItsPodsAreCounted(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1_000_000, 0))
	p, pods := gpuPlacer(t, clk, []*corev1.Node{gpuNode("a", 8)}, nil)

	first := mustPlace(t, p, 4)
	mustRefuse(t, p, 5, "4 of the 8 GPUs are held for the first placement")
	// Its pods are made and given to Hold; they are not in the cache yet.
	made := []*corev1.Pod{pinnedGPUPod("ddp-0", "a", 4)}
	p.Hold(first, made)
	mustRefuse(t, p, 5, "the first placement's pod is held")
	// The cache has the pod now: it counts once, not twice.
	mustAddPod(t, pods, made[0])
	second := mustPlace(t, p, 4)
	mustRefuse(t, p, 1, "the first's pod and the second's slots take all 8 GPUs")
	// Released slots are free again.
	p.Release(second)
	mustPlace(t, p, 4)
	mustRefuse(t, p, 1, "the third placement holds the last 4 GPUs")
	// Slots nobody made pods of are held slotsTTL, no longer.
	clk.SetTime(clk.Now().Add(slotsTTL))
	mustPlace(t, p, 4)
}

func TestGPUPlacerHoldsPodsMissingFromTheCacheForPodsTTL(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1_000_000, 0))
	p, _ := gpuPlacer(t, clk, []*corev1.Node{gpuNode("a", 8)}, nil)
	slots := mustPlace(t, p, 8)
	p.Hold(slots, []*corev1.Pod{pinnedGPUPod("ddp-0", "a", 8)})
	clk.SetTime(clk.Now().Add(podsTTL - time.Second))
	mustRefuse(t, p, 1, "the pod is held")
	clk.SetTime(clk.Now().Add(time.Second))
	mustPlace(t, p, 8)
}

func TestGPUPlacerBoundsTheHoldsInFlight(t *testing.T) {
	p, _ := gpuPlacer(t, nil, []*corev1.Node{gpuNode("a", 2*maxHolds)}, nil)
	mustPlace(t, p, 1)
	// As if maxHolds-1 more placements had been made within slotsTTL.
	for range maxHolds - 1 {
		p.slots = append(p.slots, p.slots[0])
	}
	if _, err := p.Place(1, nil); err == nil || !strings.Contains(err.Error(), "not yet in the cache are held") {
		t.Fatalf("Place with %d placements held: %v; want a refusal", maxHolds, err)
	}
}

func TestGPUPlacerRefusesToPlaceFromCachesNotFilled(t *testing.T) {
	p, _ := gpuPlacer(t, nil, []*corev1.Node{gpuNode("a", 8)}, nil)
	filled := false
	p.Synced = []cache.InformerSynced{func() bool { return true }, func() bool { return filled }}
	if _, err := p.Place(2, nil); err == nil || !strings.Contains(err.Error(), "not filled yet") {
		t.Fatalf("Place from a cache not filled: %v; want a refusal", err)
	}
	filled = true
	mustPlace(t, p, 2)
}
