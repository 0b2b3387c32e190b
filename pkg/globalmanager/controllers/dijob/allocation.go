package dijob

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

// Allocation is what the controller needs to place replicas itself: the
// policy, and every node and every pod of the cluster (what is in use). Nil
// leaves placement to the Kubernetes scheduler.
type Allocation struct {
	Policy allocator.Policy
	Nodes  corelisters.NodeLister
	// Pods lists every pod of the cluster, not only Nereid's children.
	Pods corelisters.PodLister
	// Start starts the caches behind Nodes and Pods (nil: they are started
	// elsewhere); Synced says when they are filled. The controller starts
	// them when it first syncs a DIJob and waits for them before it syncs
	// one: a GlobalManager that runs no DIJob keeps no copy of the cluster's
	// pods.
	Start  func()
	Synced []cache.InformerSynced
	// Period is how often preemptible jobs are considered again (Optimize).
	Period time.Duration
}

// reservationTTL is how long a placement made holds its room before the pods
// it created must be in the cache of every pod (then they count instead).
const reservationTTL = time.Minute

// placer places jobs one at a time: two jobs synced together must not be
// given the same room before either's pods are in the cache, so the room a
// placement takes is reserved until its pods are seen.
type placer struct {
	Allocation
	mu       sync.Mutex
	reserved map[string]reservation // by pod namespace/name
	// moves are the placements optimize chose, by job key, until the job's
	// sync has recreated its pods.
	moves map[string]allocator.Placement
	// planned are the placements of jobs being moved, for plannedTTL after
	// the move's pods were deleted: a pod of the job made again meanwhile (one
	// of the new pods deleted by someone else as it starts) goes there too,
	// not where a fresh allocation of that pod alone would put it.
	planned map[string]plannedPlacement
	clock   clock.PassiveClock
	// linkGrace is how long pods on edge nodes tolerate a lost link.
	linkGrace time.Duration

	// caches are Nodes' and Pods', started by the first DIJob synced.
	caches *lazyCaches
}

type reservation struct {
	pod     *corev1.Pod
	expires time.Time
}

type plannedPlacement struct {
	placement allocator.Placement
	expires   time.Time
}

// plannedTTL is how long a move's placement holds for the job's pods made
// again after the move deleted them.
const plannedTTL = 2 * time.Minute

func newPlacer(a *Allocation, linkGrace time.Duration, clk clock.PassiveClock) *placer {
	if a == nil {
		return nil
	}
	return &placer{linkGrace: linkGrace, Allocation: *a, reserved: map[string]reservation{}, moves: map[string]allocator.Placement{},
		planned: map[string]plannedPlacement{}, clock: clk,
		caches: newLazyCaches("the caches of the cluster's nodes and pods, which the allocator places DIJobs by", a.Start, a.Synced)}
}

// place pins each of pods (replicas of job that have no pod yet; wanted is
// every replica of job) to a node, all or none: on success each pod carries
// the node in a required node affinity and in its diengine/node annotation;
// a *allocator.NotFitError says what is missing.
func (p *placer) place(job *div2.DIJob, wanted []replica, pods []*corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	nodes, err := p.Nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	all, err := p.Pods.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	all = p.withReservations(all)

	// The replicas to place, in rank order, as the allocator sees them.
	byName := common.ByName(pods)
	whole := allocator.JobOf(job)
	part := whole
	part.Replicas = nil
	byRank := map[int]*corev1.Pod{}
	for _, r := range wanted {
		if pod, ok := byName[r.name]; ok {
			part.Replicas = append(part.Replicas, whole.Replicas[r.index])
			byRank[r.index] = pod
		}
	}
	key := whole.Key
	var placement allocator.Placement
	if planned, ok := p.planned[key]; ok && len(planned.placement) == len(whole.Replicas) && p.clock.Now().Before(planned.expires) {
		// A job being moved goes where optimize chose.
		for _, r := range part.Replicas {
			placement = append(placement, planned.placement[r.Rank])
		}
	} else {
		delete(p.planned, key)
		if placement, err = p.Policy.Allocate(part, allocator.Nodes(nodes, all, nil)); err != nil {
			return err
		}
	}
	edge := map[string]bool{}
	for _, n := range nodes {
		if _, ok := n.Labels[allocator.EdgeNodeLabel]; ok {
			edge[n.Name] = true
		}
	}
	for i, r := range part.Replicas {
		pod := byRank[r.Rank]
		if edge[placement[i]] {
			allocator.TolerateLinkLoss(&pod.Spec, p.linkGrace)
		}
		pod.Spec.Affinity = common.Pin(pod.Spec.Affinity, placement[i])
		pod.Annotations[AnnotationNode] = placement[i]
		p.reserved[pod.Namespace+"/"+pod.Name] = reservation{pod: pod, expires: p.clock.Now().Add(reservationTTL)}
	}
	return nil
}

// release drops the reservations of pods whose creation failed.
func (p *placer) release(pods []*corev1.Pod) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range pods {
		delete(p.reserved, pod.Namespace+"/"+pod.Name)
	}
}

// withReservations is all with the pods placed but not yet in it; the
// reservations of pods it has (or that expired) are dropped.
func (p *placer) withReservations(all []*corev1.Pod) []*corev1.Pod {
	seen := make(map[string]bool, len(all))
	for _, pod := range all {
		seen[pod.Namespace+"/"+pod.Name] = true
	}
	now := p.clock.Now()
	for key, r := range p.reserved {
		if seen[key] || now.After(r.expires) {
			delete(p.reserved, key)
			continue
		}
		all = append(all, r.pod)
	}
	return all
}

// notFit is the message of a placement that found no room, "" for any
// other outcome.
func notFit(err error) string {
	var nf *allocator.NotFitError
	if errors.As(err, &nf) {
		return nf.Error()
	}
	return ""
}

// optimizeLoop considers the preemptible jobs again every period until ctx
// is done, from when the first DIJob has started the caches.
func (c *Controller) optimizeLoop(ctx context.Context) {
	select {
	case <-c.placer.caches.started:
	case <-ctx.Done():
		return
	}
	for c.placer.caches.ready(ctx) != nil {
		if ctx.Err() != nil {
			return
		}
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := c.optimize(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Considering the preemptible DIJobs again failed; next period tries again")
		}
	}, c.placer.Period)
}

// optimize asks the policy whether running preemptible jobs should move; a
// job that should is given its new placement, which its next sync carries
// out (every pod made again on its new node, phase Rescheduling).
func (c *Controller) optimize(ctx context.Context) error {
	p := c.placer
	jobs, err := c.jobs.List(labels.Everything())
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var candidates []allocator.Job
	previous := map[string]allocator.Placement{}
	uids := map[types.UID]bool{}
	for _, job := range jobs {
		// A v1 job (syncV1) is never moved: its pods are not the allocator's.
		if conversion.IsV1(job) || !job.Spec.Preemptible || finished(job.Status.Phase) || job.DeletionTimestamp != nil || p.moves[cache.MetaObjectToName(job).String()] != nil || job.CheckReplicas() != nil {
			continue
		}
		placement, ok := c.placementOf(job)
		if !ok {
			continue // not placed whole yet
		}
		a := allocator.JobOf(job)
		candidates = append(candidates, a)
		previous[a.Key] = placement
		uids[job.UID] = true
	}
	if len(candidates) == 0 {
		return nil
	}
	nodes, err := p.Nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	all, err := p.Pods.List(labels.Everything())
	if err != nil {
		return err
	}
	all = p.withReservations(all)
	owned := func(pod *corev1.Pod) bool {
		ref := metav1.GetControllerOfNoCopy(pod)
		return ref != nil && uids[ref.UID]
	}
	moves, err := p.Policy.Optimize(candidates, allocator.Nodes(nodes, all, owned), previous)
	if err != nil {
		return err
	}
	for key, placement := range moves {
		klog.FromContext(ctx).Info("Moving a preemptible DIJob to a better placement", "dijob", key, "from", previous[key], "to", placement)
		p.moves[key] = placement
		c.queue.Add(key)
	}
	return nil
}

// placementOf is the node of each replica of job, from its pods; ok is
// false while some replica has no pinned pod.
func (c *Controller) placementOf(job *div2.DIJob) (allocator.Placement, bool) {
	pods, err := common.ListOwned[*corev1.Pod](c.syncer.Pods, job)
	if err != nil {
		return nil, false
	}
	byName := map[string]string{}
	for _, pod := range common.Claim(job, pods) {
		if !common.PodTerminating(pod) {
			byName[pod.Name] = common.PinnedNode(pod)
		}
	}
	var placement allocator.Placement
	for _, r := range replicasOf(job) {
		node := byName[r.name]
		if node == "" {
			return nil, false
		}
		placement = append(placement, node)
	}
	return placement, true
}

// startMove says whether optimize chose a new placement for key; if so the
// placement becomes the one the job's pods are made again with.
func (p *placer) startMove(key string) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.moves[key]
	if ok {
		p.planned[key] = plannedPlacement{placement: m, expires: p.clock.Now().Add(plannedTTL)}
		delete(p.moves, key)
	}
	return ok
}

// forget drops what the placer keeps for a job that is gone: a move chosen
// for it must not apply to a new job of the same name.
func (p *placer) forget(key string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.moves, key)
	delete(p.planned, key)
}
