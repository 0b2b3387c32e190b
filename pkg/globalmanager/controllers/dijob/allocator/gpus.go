package allocator

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// ResourceGPU is the resource a GPUPlacer places.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// MaxWorldSize is the most GPUs one Place call places.
const MaxWorldSize = 1024

// GPUSlot is GPUs on Node: the share of one DDP learner pod.
type GPUSlot struct {
	Node string
	GPUs int
}

// How long what Place chose is held, so that requests placed back to back
// do not count the same free GPUs twice: the slots of a placement until
// Hold is given its pods, or for slotsTTL; a pod given to Hold until the
// cache has it, or for podsTTL.
const (
	slotsTTL = 30 * time.Second
	podsTTL  = time.Minute
	// maxHolds bounds the placements and pods held: Place refuses to place
	// while that many are held, as for as many placements in slotsTTL
	// nobody made pods of.
	maxHolds = 1024
)

// GPUPlacer chooses the nodes of a learner's DDP pods, from the caches of
// every node and pod of the cluster (those of the allocator: informers
// transformed by Slim). A node's free GPUs are its allocatable
// nvidia.com/gpu less what the pods counted on it request, as Nodes counts
// them: pods not finished, bound to it or pinned to it by common.Pin. The
// nodes considered are those the allocator would give a learner of the
// template: Ready, not cordoned, not edge nodes (learners run in the
// cloud), selected by the template's nodeSelector and required node
// affinity, with their NoSchedule and NoExecute taints tolerated.
//
// Two requests placed from the same cache before the first one's pods are
// in it would take the same GPUs: so what Place chooses is held (counted
// as taken) until Hold is given the pods made of it, and those pods until
// the cache has them (see slotsTTL, podsTTL). Only this placer's holds
// count: the DIJob controller's allocator holds its own placements.
// Only GPUs are placed: the pods' cpu and memory are left to the scheduler.
//
// Set Nodes, Pods and Clock; a GPUPlacer must not be copied after its first use.
// It is safe for concurrent use.
type GPUPlacer struct {
	Nodes corelisters.NodeLister
	Pods  corelisters.PodLister
	// Synced, when set, say whether the caches behind Nodes and Pods are
	// filled: Place refuses to place from caches that are not, which would
	// show a cluster without GPUs.
	Synced []cache.InformerSynced
	// Clock times the holds. It is required: a placer that read the wall
	// clock behind its caller's back would hold placements a test cannot
	// expire.
	Clock clock.PassiveClock

	mu    sync.Mutex
	slots []heldSlots
	pods  map[string]heldPod // by namespace/name
}

type heldSlots struct {
	slots   []GPUSlot
	expires time.Time
}

type heldPod struct {
	pod     *corev1.Pod
	expires time.Time
}

// Place splits worldSize GPUs over the fewest nodes it can, of those the
// GPUPlacer considers for a pod of learner (nil: a template that selects
// nothing and tolerates nothing), and holds them: the node with the fewest
// free GPUs that has them all; else the node with the most free GPUs
// (ties to the first by name) for as many as it has, and so on for the
// rest. The slots are in that order, each of at least one GPU.
//
// It refuses, with an error saying why, a worldSize below 1 or above
// MaxWorldSize, a template whose node affinity cannot be read, caches not
// filled yet (Synced), too many placements held (maxHolds), and a
// worldSize the considered nodes do not have free (naming a few of them
// and their free GPUs).
func (p *GPUPlacer) Place(worldSize int, learner *corev1.PodSpec) ([]GPUSlot, error) {
	if worldSize < 1 || worldSize > MaxWorldSize {
		return nil, fmt.Errorf("%d GPUs asked: between 1 and %d may be", worldSize, MaxWorldSize)
	}
	cand, err := learnerCandidate(learner)
	if err != nil {
		return nil, err
	}
	for _, synced := range p.Synced {
		if !synced() {
			return nil, fmt.Errorf("%d GPUs asked: the caches of the cluster's nodes and pods are not filled yet, try again in a while", worldSize)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Clock.Now()
	p.prune(now)
	if held := len(p.slots) + len(p.pods); held >= maxHolds {
		return nil, fmt.Errorf("%d GPUs asked: %d placements and pods not yet in the cache are held, try again in a while", worldSize, held)
	}
	free, ruledOut, err := p.freeGPUs(cand)
	if err != nil {
		return nil, err
	}
	slots, ok := split(worldSize, free)
	if !ok {
		return nil, errors.New(notEnoughGPUs(worldSize, free, ruledOut))
	}
	p.slots = append(p.slots, heldSlots{slots: slots, expires: now.Add(slotsTTL)})
	return slots, nil
}

// Hold gives the placer the pods made of slots (as Place returned them):
// slots are no longer held, pods are, each until the cache has it or
// podsTTL passed. Pods not created (for an error) are left out.
func (p *GPUPlacer) Hold(slots []GPUSlot, pods []*corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.release(slots)
	if p.pods == nil {
		p.pods = map[string]heldPod{}
	}
	expires := p.Clock.Now().Add(podsTTL)
	for _, pod := range pods {
		p.pods[pod.Namespace+"/"+pod.Name] = heldPod{pod: pod, expires: expires}
	}
}

// Release gives back slots (as Place returned them) of which no pod will
// be made.
func (p *GPUPlacer) Release(slots []GPUSlot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.release(slots)
}

func (p *GPUPlacer) release(slots []GPUSlot) {
	if i := slices.IndexFunc(p.slots, func(h heldSlots) bool { return slices.Equal(h.slots, slots) }); i >= 0 {
		p.slots = slices.Delete(p.slots, i, i+1)
	}
}

// prune drops the holds that expired.
func (p *GPUPlacer) prune(now time.Time) {
	p.slots = slices.DeleteFunc(p.slots, func(h heldSlots) bool { return !now.Before(h.expires) })
	for key, h := range p.pods {
		if !now.Before(h.expires) {
			delete(p.pods, key)
		}
	}
}

// learnerCandidate is a pod of learner as the allocator's exclusions read
// it; a learner never asks for edge nodes.
func learnerCandidate(learner *corev1.PodSpec) (*candidate, error) {
	r := Replica{Task: "ddp-learner"}
	if learner != nil {
		r.NodeSelector, r.Affinity, r.Tolerations = learner.NodeSelector, learner.Affinity, learner.Tolerations
	}
	c := candidates(Job{Replicas: []Replica{r}})[0]
	if c.err != nil {
		return nil, c.err
	}
	c.edge = false
	return c, nil
}

// nodeGPUs is a node's free GPUs.
type nodeGPUs struct {
	node string
	gpus int
}

// freeGPUs returns the nodes cand may use that have a free GPU, the most
// free first (ties by name), and how many nodes were ruled out for each
// reason.
func (p *GPUPlacer) freeGPUs(cand *candidate) ([]nodeGPUs, map[Exclusion]int, error) {
	nodes, err := p.Nodes.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := p.Pods.List(labels.Everything())
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	c := newCluster(Nodes(nodes, p.withHolds(pods), nil))
	var free []nodeGPUs
	ruledOut := map[Exclusion]int{}
	for _, n := range c.nodes {
		if reason, _ := cand.exclusion(n); reason != "" {
			ruledOut[reason]++
			continue
		}
		if gpus := (n.capacity[ResourceGPU] - n.taken[ResourceGPU]) / 1000; gpus > 0 {
			free = append(free, nodeGPUs{node: n.name, gpus: int(min(gpus, MaxWorldSize))})
		}
	}
	slices.SortStableFunc(free, func(a, b nodeGPUs) int { return cmp.Compare(b.gpus, a.gpus) })
	return free, ruledOut, nil
}

// withHolds is pods with what is held: the held pods the cache does not
// have yet, and a pod bound to its node for each held slot.
func (p *GPUPlacer) withHolds(pods []*corev1.Pod) []*corev1.Pod {
	seen := make(map[string]bool, len(pods))
	for _, pod := range pods {
		seen[pod.Namespace+"/"+pod.Name] = true
	}
	out := slices.Clip(pods)
	for key, h := range p.pods {
		if seen[key] {
			// The cache counts it now.
			delete(p.pods, key)
			continue
		}
		out = append(out, h.pod)
	}
	for _, h := range p.slots {
		for _, s := range h.slots {
			out = append(out, slotPod(s))
		}
	}
	return out
}

// slotPod is a pod on s's node that requests its GPUs.
func slotPod(s GPUSlot) *corev1.Pod {
	gpus := corev1.ResourceList{ResourceGPU: *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)}
	return &corev1.Pod{Spec: corev1.PodSpec{
		NodeName:   s.Node,
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: gpus, Limits: gpus}}},
	}}
}

// split takes worldSize GPUs from free (the most first): while no node
// left has all that is left to take, all of the one with the most; then
// what is left from the node with the fewest that has it all. That is the
// fewest nodes (the first k with the most hold it, no k-1 do), and the
// last node taken from is the tightest fit. It returns false when free
// does not hold worldSize.
func split(worldSize int, free []nodeGPUs) ([]GPUSlot, bool) {
	var slots []GPUSlot
	left := worldSize
	for i := range free {
		if best := tightest(free[i:], left); best >= 0 {
			return append(slots, GPUSlot{Node: free[i+best].node, GPUs: left}), true
		}
		slots = append(slots, GPUSlot{Node: free[i].node, GPUs: free[i].gpus})
		left -= free[i].gpus
	}
	return nil, false
}

// tightest is the index of the node of free with the fewest GPUs that has
// at least gpus (the first of equals), or -1.
func tightest(free []nodeGPUs, gpus int) int {
	best := -1
	for i, n := range free {
		if n.gpus >= gpus && (best < 0 || n.gpus < free[best].gpus) {
			best = i
		}
	}
	return best
}

// maxNamedNodes bounds the nodes an error names.
const maxNamedNodes = 4

// notEnoughGPUs says that free does not hold worldSize GPUs: what the
// nodes have, naming the maxNamedNodes with the most, and why the other
// nodes were not considered.
func notEnoughGPUs(worldSize int, free []nodeGPUs, ruledOut map[Exclusion]int) string {
	total := 0
	for _, n := range free {
		total += n.gpus
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d GPUs asked, the cloud nodes a learner may use have %d free", worldSize, total)
	for i, n := range free[:min(len(free), maxNamedNodes)] {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s %d", sep, n.node, n.gpus)
	}
	if more := len(free) - maxNamedNodes; more > 0 {
		fmt.Fprintf(&b, " and %d more nodes", more)
	}
	var reasons []string
	for _, r := range []struct {
		reason Exclusion
		says   string
	}{{ExcludedNotReady, "not Ready or cordoned"}, {ExcludedEdge, "edge"}, {ExcludedSelector, "not selected by the learner"}, {ExcludedTaint, "tainted"}} {
		if n := ruledOut[r.reason]; n > 0 {
			reasons = append(reasons, fmt.Sprintf("%d %s", n, r.says))
		}
	}
	if len(reasons) > 0 {
		fmt.Fprintf(&b, " (nodes not considered: %s)", strings.Join(reasons, ", "))
	}
	return b.String()
}
