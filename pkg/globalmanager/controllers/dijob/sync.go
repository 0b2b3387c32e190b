package dijob

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

// cachesReady starts caches a DIJob needs when key is a job the sync acts
// on (Begin reads it the same way), and waits for them to be filled before
// Begin's snapshot.
func (c *Controller) cachesReady(ctx context.Context, key string, caches *lazyCaches) error {
	if caches.isFilled() {
		return nil
	}
	if job, ok, _ := common.ReadOwner(key, c.syncer.Get); !ok || !common.RunByNereid(job) {
		return nil
	}
	return caches.ready(ctx)
}

// sync reconciles one job: lister read, deep copy, expectations, claim, act,
// one status write when it changed. A job written as v1alpha1 is syncV1's.
func (c *Controller) sync(ctx context.Context, key string) error {
	if err := c.cachesReady(ctx, key, c.linkLeases); err != nil {
		return err
	}
	if c.isV1Job(key) {
		return c.syncV1(ctx, key)
	}
	if c.placer != nil {
		if err := c.cachesReady(ctx, key, c.placer.caches); err != nil {
			return err
		}
	}
	ctx, s, err := c.syncer.Begin(ctx, key)
	if s == nil || err != nil {
		return err
	}
	job, pods := s.Owner, s.Pods
	sc := &syncCtx{
		key: key, job: job, status: job.Status.DeepCopy(), now: metav1.NewTime(c.clock.Now()),
		pods: pods, satisfied: s.Satisfied, haveService: len(s.Services) > 0,
	}
	var events []common.Event
	var actErr error
	// The replicas of the current spec, listed once per sync; none for a
	// job past the bounds.
	tooLarge := job.CheckReplicas()
	if tooLarge == nil {
		sc.wanted = replicasOf(job)
	}
	switch {
	case finished(sc.status.Phase):
		// A job that asks no more holds no place in its namespace's queue.
		c.deps.Admission.Forget(jobKind, key)
		if sc.satisfied {
			actErr = c.children.DeletePods(ctx, key, job, common.PodsToClean(pods, string(job.Spec.CleanPodPolicy)), "the job finished")
		}
	case tooLarge != nil:
		c.deps.Admission.Forget(jobKind, key)
		// The CRD refuses such a job; under another CRD (DI-orchestrator's
		// has no bounds) building its replicas would exhaust the
		// GlobalManager's memory. It waits for a spec edit.
		events = setPhase(sc.status, div2.JobPending, "TooManyReplicas", tooLarge.Error(), sc.now, corev1.EventTypeWarning)
	default:
		// Every replica of every task is one gang, unless the job's
		// annotation asks for fewer.
		sc.plan = c.deps.Gangs.Plan(job, jobKind, true)
		events, actErr = c.reconcile(ctx, sc)
		// The pods it made count as the next sync will count them from the
		// cache, so the status written now need not be written again.
		pods = append(pods, s.PodsMade()...)
		if !finished(sc.status.Phase) {
			events = append(events, setScheduled(sc.status, sc.plan.Status(wantedPods(sc.wanted, pods), len(sc.wanted)), sc.now)...)
			events = append(events, sc.setEdgeLinked()...)
		}
	}
	c.count(job, sc.wanted, sc.status, pods)
	job.Status = *sc.status
	return s.End(ctx, actErr, events, "phase", sc.status.Phase, "replicas", sc.status.Replicas, "ready", sc.status.ReadyReplicas, "restarts", sc.status.Restarts)
}

// allocationRetry is how soon a job that found no room is placed again.
const allocationRetry = 5 * time.Second

func finished(p div2.Phase) bool {
	return p == div2.JobSucceeded || p == div2.JobFailed
}

// syncCtx is what one sync of an unfinished job read, decided and did, as
// the upstream Job controller's syncJobCtx: reconcile's steps fill it in
// turn, and each step reads only what the steps before it filled, so each
// can be tested alone on a syncCtx built by hand.
type syncCtx struct {
	key string
	// job is the cached job, read only; status is the copy of its status
	// that the sync writes.
	job    *div2.DIJob
	status *div2.DIJobStatus
	now    metav1.Time
	// wanted are the replicas of the job's current spec, pods every pod the
	// job owns as the cache has them, plan its gang.
	wanted []replica
	pods   []*corev1.Pod
	plan   *gang.Plan
	// satisfied says the cache holds what earlier syncs did (their
	// expectations are met): only then does a sync create or delete.
	// haveService says the job's headless Service exists.
	satisfied   bool
	haveService bool

	// What observe read of the pods.
	hashes  map[string]string    // each task's template hash
	live    []*corev1.Pod        // the pods not being deleted
	failed  *corev1.Pod          // the first live pod that failed, not held
	holding []held               // live pods an edge link holds as running
	links   map[string]linkState // the link of each node a live pod is on
	isHeld  map[string]bool      // their names

	// What decide read of a move: the number a live pod is marked with.
	moveN      int32
	moveMarked bool

	// What decide sorted the replicas into.
	current []*corev1.Pod // pods of wanted replicas, of their task's template
	stale   []*corev1.Pod // pods of wanted replicas, of an older template
	extra   []*corev1.Pod // live pods no replica wants (scaled down, task removed)
	missing []replica     // wanted replicas without a pod

	// What the act steps did, or why they did not.
	toCreate    []*corev1.Pod     // the pods of the missing replicas
	noRoom      string            // why the allocator found no room for them
	gangErr     error             // why the gang's objects are not in step
	request     admission.Request // what the quotas admitted
	waiting     string            // why the quotas hold the new pods
	quotaEvents []common.Event    // what the quotas' admission calls for
	actErr      error             // what failed of the creations and deletions
}

// reconcile acts on an unfinished job and moves its phase, in steps:
// observe (sort the pods), decide (a move, a restart, or which replicas to
// make and which pods to delete), make the new pods (or renumber), place
// them, bring the gang in step, admit them against the quotas, act, and
// set the phase. It returns the events to record once the status is
// written.
func (c *Controller) reconcile(ctx context.Context, sc *syncCtx) ([]common.Event, error) {
	if err := c.observe(ctx, sc); err != nil {
		return nil, err
	}
	switch sc.decide(func() bool { return c.placer.startMove(sc.key) }) {
	case decideWait:
		return nil, nil
	case decideMove:
		return c.moveJob(ctx, sc)
	case decideRestart:
		return c.restartJob(ctx, sc)
	}
	// What the cache does not show yet is not done again: an unsatisfied
	// sync only says where the pods it sees are.
	if sc.satisfied {
		names, err := c.makePods(ctx, sc)
		if err != nil {
			return nil, err
		}
		if names > div2.MaxJobReplicas {
			return c.renumber(ctx, sc, names)
		}
		if err := c.place(sc); err != nil {
			return nil, err
		}
		c.ensureGang(ctx, sc)
		if err := c.admit(ctx, sc); err != nil {
			return nil, err
		}
		c.act(ctx, sc)
	}
	return sc.phase(), sc.actErr
}

// observe reads the job's pods: each task's template hash, the link of
// each node they are on, then the pods sorted by sortPods.
func (c *Controller) observe(ctx context.Context, sc *syncCtx) error {
	hashes, err := taskHashes(sc.job)
	if err != nil {
		return fmt.Errorf("building pods of %s: %w", sc.key, err)
	}
	sc.hashes = hashes
	sc.links = c.readLinks(ctx, sc.pods, sc.now.Time)
	sc.sortPods(func(p *corev1.Pod) (held, bool) { return c.heldByLink(ctx, sc.key, p, sc.now.Time, sc.links) })
	return nil
}

// sortPods sorts the job's pods into the live ones, those of them that an
// edge link holds (hold says which), and the first that failed otherwise.
func (sc *syncCtx) sortPods(hold func(*corev1.Pod) (held, bool)) {
	sc.isHeld = map[string]bool{}
	for _, p := range sc.pods {
		if common.PodTerminating(p) {
			continue
		}
		sc.live = append(sc.live, p)
		// A running pod that is not ready counts as running anyway; only a
		// failed or unknown one may be an edge link's doing.
		if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodUnknown {
			continue
		}
		if h, ok := hold(p); ok {
			sc.holding = append(sc.holding, h)
			sc.isHeld[p.Name] = true
			continue
		}
		if p.Status.Phase == corev1.PodFailed && sc.failed == nil {
			sc.failed = p
		}
	}
}

// verdict is what decide chose for a sync.
type verdict int

const (
	// decideWait: a move under way is not all in the cache yet; the sync
	// does nothing.
	decideWait verdict = iota
	// decideMove: every pod is made again on the placement the allocator
	// chose (moveJob).
	decideMove
	// decideRestart: a pod failed; every pod is made again (restartJob).
	decideRestart
	// decideRun: the missing replicas are made, the stale and extra pods
	// deleted.
	decideRun
)

// decide chooses what the sync does, from what observe read: a move when
// a live pod is marked for one or, in a satisfied sync, startMove says the
// allocator chose a new placement; else, with the replicas sorted
// (sortReplicas), a restart after a failed pod; else run. How many names
// the new pods' DI_NODES would list, which may call for a renumbering, is
// known only once makePods has read the pods' table.
func (sc *syncCtx) decide(startMove func() bool) verdict {
	// The allocator found a better placement for this preemptible job: every
	// pod is made again there, the move counted first (AnnotationMove).
	// While the cache is behind a move under way (its mark or its deletions
	// not seen yet), the pods it lists are the old ones: the phase waits.
	if !sc.satisfied && sc.status.Phase == div2.JobRescheduling {
		return decideWait
	}
	if sc.moveN, sc.moveMarked = moveOf(sc.live); sc.moveMarked || (sc.satisfied && startMove()) {
		return decideMove
	}
	sc.sortReplicas()
	// A failed pod restarts the whole job: DI-engine's workers form one mesh
	// that does not take a member back. A job whose deciding tasks are done
	// has succeeded, whatever its other pods do meanwhile.
	if sc.failed != nil && !done(sc.job, sc.wanted, sc.current) {
		return decideRestart
	}
	return decideRun
}

// sortReplicas sorts the wanted replicas by their pods into current, stale
// (of an older template: deleted, then made again) and missing (made), and
// the live pods no replica wants into extra (deleted). A replica whose pod
// is being deleted is none of these: it is made again once the pod is
// gone, whose delete event syncs the job.
func (sc *syncCtx) sortReplicas() {
	byName := common.ByName(sc.pods)
	want := make(map[string]bool, len(sc.wanted))
	for _, r := range sc.wanted {
		want[r.name] = true
		p, ok := byName[r.name]
		switch {
		case !ok:
			sc.missing = append(sc.missing, r)
		case common.PodTerminating(p):
		case p.Labels[common.LabelTemplateHash] != sc.hashes[r.taskName]:
			sc.stale = append(sc.stale, p)
		default:
			sc.current = append(sc.current, p)
		}
	}
	// Scaling down removes the highest ranks, whose names no replica wants
	// any more.
	for _, p := range sc.live {
		if !want[p.Name] {
			sc.extra = append(sc.extra, p)
		}
	}
}

// count fills what status counts of the job's pods: replicas, ready
// replicas, in all and per task, pods per task and phase, the node of each
// replica, the selector of the scale subresource, and the generation
// observed.
func (c *Controller) count(job *div2.DIJob, wanted []replica, status *div2.DIJobStatus, pods []*corev1.Pod) {
	status.Replicas = int32(len(wanted))
	status.ReadyReplicas = 0
	status.TaskStatus = nil
	readyByTask := map[string]int32{}
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		if common.PodTerminating(p) {
			continue
		}
		byName[p.Name] = p
		task := p.Labels[LabelTaskName]
		if p.Status.Phase == corev1.PodRunning && podReady(p) {
			status.ReadyReplicas++
			readyByTask[task]++
		}
		if status.TaskStatus == nil {
			status.TaskStatus = map[string]div2.TaskStatus{}
		}
		if status.TaskStatus[task] == nil {
			status.TaskStatus[task] = div2.TaskStatus{}
		}
		phase := p.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		status.TaskStatus[task][phase]++
	}
	// A finished job keeps the placement it ran on; cleanPodPolicy would
	// otherwise leave holes where its deleted pods were.
	if !finished(status.Phase) || status.Allocation == nil {
		status.Allocation = nil
		for _, r := range wanted {
			node := ""
			if p := byName[r.name]; p != nil {
				node = common.PinnedNode(p)
			}
			status.Allocation = append(status.Allocation, node)
		}
	}
	status.TasksReady = tasksReady(wanted, readyByTask)
	status.Selector = common.OwnerSelector(job).String()
	status.ObservedGeneration = job.Generation
}

// tasksReady is status.tasksReady: for each task of wanted, in spec order,
// its name and its ready replicas of those it asks for ("learner 1/1,
// collector 3/4"), as readyReplicas counts them: pods of the task's old
// template or past its replicas count until they are gone. A task the spec
// no longer has is not shown.
func tasksReady(wanted []replica, ready map[string]int32) string {
	var b strings.Builder
	for i := 0; i < len(wanted); {
		task := wanted[i].taskName
		n := 0
		for i < len(wanted) && wanted[i].taskName == task {
			i, n = i+1, n+1
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d/%d", task, ready[task], n)
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// membersOf is what the pods of the job's spec add up to, for its gang.
func membersOf(job *div2.DIJob) gang.Members {
	var m gang.Members
	for i := range job.Spec.Tasks {
		m.Add(&job.Spec.Tasks[i].Template.Spec, job.TaskReplicas(i))
	}
	return m
}

// wantedPods are the live pods of the replicas the spec wants.
func wantedPods(wanted []replica, pods []*corev1.Pod) []*corev1.Pod {
	want := make(map[string]bool, len(wanted))
	for _, r := range wanted {
		want[r.name] = true
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if want[p.Name] && !common.PodTerminating(p) {
			out = append(out, p)
		}
	}
	return out
}
