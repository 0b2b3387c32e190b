package dijob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

// sync reconciles one job: lister read, deep copy, expectations, claim, act,
// one status write when it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	// The caches of every node and pod are started by a job the sync acts
	// on (Begin reads it the same way), and waited for before Begin's
	// snapshot.
	if c.placer != nil && !c.placer.filled.Load() {
		if _, ok, _ := common.ReadOwner(key, c.syncer.Get); ok {
			if err := c.placer.ready(ctx); err != nil {
				return err
			}
		}
	}
	ctx, s, err := c.syncer.Begin(ctx, key)
	if s == nil || err != nil {
		return err
	}
	job, satisfied, pods := s.Owner, s.Satisfied, s.Pods

	now := metav1.NewTime(c.now())
	status := job.Status.DeepCopy()
	var events []common.Event
	var actErr error
	// The replicas of the current spec, listed once per sync; none for a
	// job past the bounds.
	tooLarge := job.CheckReplicas()
	var wanted []replica
	if tooLarge == nil {
		wanted = replicasOf(job)
	}
	switch {
	case finished(status.Phase):
		// A job that asks no more holds no place in its namespace's queue.
		c.config.Admission.Forget(jobKind, key)
		if satisfied {
			actErr = c.children.DeletePods(ctx, key, job, common.PodsToClean(pods, string(job.Spec.CleanPodPolicy)), "the job finished")
		}
	case tooLarge != nil:
		c.config.Admission.Forget(jobKind, key)
		// The CRD refuses such a job; under another CRD (DI-orchestrator's
		// has no bounds) building its replicas would exhaust the
		// GlobalManager's memory. It waits for a spec edit.
		events = setPhase(status, div2.JobPending, "TooManyReplicas", tooLarge.Error(), now, corev1.EventTypeWarning)
	default:
		// Every replica of every task is one gang, unless the job's
		// annotation asks for fewer.
		plan := c.config.Gangs.Plan(job, jobKind, true)
		events, actErr = c.reconcile(ctx, key, job, wanted, status, pods, plan, len(s.Services) > 0, satisfied, now)
		// The pods it made count as the next sync will count them from the
		// cache, so the status written now need not be written again.
		pods = append(pods, s.PodsMade()...)
		if !finished(status.Phase) {
			events = append(events, setScheduled(status, plan.Status(wantedPods(wanted, pods), len(wanted)), now)...)
		}
	}
	c.count(job, wanted, status, pods)
	job.Status = *status
	return s.End(ctx, actErr, events, "phase", status.Phase, "replicas", status.Replicas, "ready", status.ReadyReplicas, "restarts", status.Restarts)
}

// allocationRetry is how soon a job that found no room is placed again.
const allocationRetry = 5 * time.Second

func finished(p div2.Phase) bool {
	return p == div2.JobSucceeded || p == div2.JobFailed
}

// reconcile acts on an unfinished job and moves its phase. It returns the
// events to record once the status is written.
func (c *Controller) reconcile(ctx context.Context, key string, job *div2.DIJob, wanted []replica, status *div2.DIJobStatus, pods []*corev1.Pod, plan *gang.Plan, haveService, satisfied bool, now metav1.Time) ([]common.Event, error) {
	hashes, err := taskHashes(job)
	if err != nil {
		return nil, fmt.Errorf("building pods of %s: %w", key, err)
	}
	var live []*corev1.Pod
	var failed *corev1.Pod
	var holding []held
	isHeld := map[string]bool{}
	links := map[string]linkState{} // each node's link read once per sync
	for _, p := range pods {
		if common.PodTerminating(p) {
			continue
		}
		live = append(live, p)
		// A running pod that is not ready counts as running anyway; only a
		// failed or unknown one may be an edge link's doing.
		if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodUnknown {
			continue
		}
		if h, ok := c.heldByLink(ctx, key, p, now.Time, links); ok {
			holding = append(holding, h)
			isHeld[p.Name] = true
			continue
		}
		if p.Status.Phase == corev1.PodFailed && failed == nil {
			failed = p
		}
	}

	// The allocator found a better placement for this preemptible job: every
	// pod is made again there, the move counted first (AnnotationMove).
	// While the cache is behind a move under way (its mark or its deletions
	// not seen yet), the pods it lists are the old ones: the phase waits.
	if !satisfied && status.Phase == div2.JobRescheduling {
		return nil, nil
	}
	if n, marked := moveOf(live); marked || (satisfied && c.placer.startMove(key)) {
		return c.move(ctx, key, job, status, live, n, marked, satisfied, now)
	}
	byName := common.ByName(pods)
	var missingReplicas []replica
	var stale, current []*corev1.Pod
	want := map[string]bool{}
	for _, r := range wanted {
		want[r.name] = true
		p, ok := byName[r.name]
		switch {
		case !ok:
			missingReplicas = append(missingReplicas, r)
		case common.PodTerminating(p):
			// Made again once it is gone; its delete event syncs the job.
		case p.Labels[common.LabelTemplateHash] != hashes[r.taskName]:
			stale = append(stale, p)
		default:
			current = append(current, p)
		}
	}
	// A failed pod restarts the whole job: DI-engine's workers form one mesh
	// that does not take a member back. A job whose deciding tasks are done
	// has succeeded, whatever its other pods do meanwhile.
	if failed != nil && !c.done(job, wanted, current) {
		return c.restart(ctx, key, job, status, live, failed, satisfied, now)
	}
	var toCreate []*corev1.Pod
	if satisfied && len(missingReplicas) > 0 {
		// Each new replica's rank and DI_NODES agree with every pod's (ranks.go).
		table, held, err := c.currentTable(ctx, job, pods)
		if err != nil {
			return nil, err
		}
		ranks := table.assign(missingReplicas, func(r replica) string { return c.fqdn(job, r) }, held)
		if len(table.nodes) > div2.MaxJobReplicas {
			return c.renumber(ctx, key, job, status, live, len(table.nodes), now)
		}
		shared := c.nodesEnv(table)
		for i, r := range missingReplicas {
			toCreate = append(toCreate, c.newPod(job, r, ranks[i], len(table.nodes), shared, hashes[r.taskName]))
		}
	}
	// Pods no replica wants any more (scaled down, task removed) go, and
	// the highest ranks are the ones scaling down removes.
	var extra []*corev1.Pod
	for _, p := range live {
		if !want[p.Name] {
			extra = append(extra, p)
		}
	}
	// Placed by the allocator, all of the missing replicas or none; a job
	// that finds no room tries again after allocationRetry.
	var noRoom string
	if satisfied && len(toCreate) > 0 && c.placer != nil {
		if err := c.placer.place(job, wanted, toCreate); err != nil {
			if noRoom = notFit(err); noRoom == "" {
				return nil, fmt.Errorf("placing the replicas of %s: %w", key, err)
			}
			toCreate = nil
			c.queue.AddAfter(key, allocationRetry)
		}
	}
	// The gang's objects are in step with the replicas before a pod of it
	// is made; a job whose annotations ask for what cannot be makes none.
	var gangErr error
	if satisfied {
		members := membersOf(job)
		gangErr = plan.Ensure(ctx, c.children, members, current)
		if (gangErr != nil || plan.Problem != nil) && len(toCreate) > 0 {
			c.placer.release(toCreate)
			toCreate = nil
		}
		for _, p := range toCreate {
			plan.Decorate(p, members)
		}
	}
	// What is missing of the job (a scale-up's new replicas, its Service)
	// is made only when the quotas hold all of it.
	var quotaEvents []common.Event
	var waiting string
	req := admission.Request{Kind: jobKind, Key: key, Owner: job, Charge: admission.Charge{Pods: toCreate}}
	if satisfied && len(toCreate) == 0 && len(missingReplicas) == 0 {
		quotaEvents = setAdmitted(status, admission.Made, now)
	}
	if satisfied && len(toCreate) > 0 {
		req.PriorityClassName = toCreate[0].Spec.PriorityClassName
		if !haveService {
			req.Charge.Objects = append(req.Charge.Objects, admission.Service)
		}
		d, err := c.config.Admission.Admit(ctx, req)
		if err != nil {
			c.placer.release(toCreate)
			return nil, err
		}
		quotaEvents = setAdmitted(status, d, now)
		if !d.Admitted {
			c.placer.release(toCreate)
			req.Charge.Pods, haveService, waiting = nil, true, d.Message
		}
	}
	var actErr error
	if satisfied {
		errs := make([]error, 5)
		errs[4] = gangErr
		var wg sync.WaitGroup
		if !haveService {
			wg.Go(func() { errs[0] = c.children.CreateService(ctx, job, headlessService(job)) })
		}
		wg.Go(func() { errs[1] = c.children.DeletePods(ctx, key, job, extra, "the job has fewer replicas") })
		wg.Go(func() { errs[2] = c.children.DeletePods(ctx, key, job, stale, "the task's template changed") })
		var made []*corev1.Pod
		var undone []common.Event
		wg.Go(func() {
			if made, undone, errs[3] = c.config.Admission.CreatePods(ctx, c.children, req); errs[3] != nil {
				// The room of pods that were not made is free again (those
				// that were are counted from the cache soon).
				c.placer.release(req.Charge.Pods)
			}
		})
		wg.Wait()
		quotaEvents = append(quotaEvents, undone...)
		actErr = errors.Join(errs...)
		// The pods just made count as the next sync will count them.
		current = append(current, made...)
	}
	missing := len(wanted) - len(current)
	if waiting != "" {
		msg := fmt.Sprintf("%d of %d pods wait for quota: %s", missing, len(wanted), waiting)
		return append(quotaEvents, setPhase(status, div2.JobPending, admission.ReasonWaitingForQuota, msg, now, corev1.EventTypeNormal)...), actErr
	}
	if noRoom != "" {
		msg := fmt.Sprintf("%d of %d pods wait for room: %s", missing, len(wanted), noRoom)
		events := setPhase(status, div2.JobPending, "InsufficientResources", msg, now, corev1.EventTypeWarning)
		if len(events) == 0 && conditionMessage(&job.Status, div2.JobPending) != msg {
			events = []common.Event{{Type: corev1.EventTypeWarning, Reason: "InsufficientResources", Message: msg}}
		}
		return events, actErr
	}
	return append(quotaEvents, c.advance(job, status, wanted, current, missing, isHeld, holding, actErr, now)...), actErr
}

// AnnotationRestart, on a failed pod, is the number of the restart its
// failure causes. It is written on the pod before the count reaches the
// job's status and the pods are deleted only once the status has it, so a
// status write that is lost (it conflicted with a newer job) or a
// GlobalManager that stops in between never loses a restart nor counts
// one twice.
const AnnotationRestart = "nereid.io/restart"

// spentBackoff is the message of a job that fails because of why after
// restarts restarts, its backoffLimit limit.
func spentBackoff(why string, restarts, limit int32) string {
	if limit == 0 {
		return why + "; its backoffLimit is 0: the job does not restart"
	}
	return fmt.Sprintf("%s; the job restarted %d times, as many as its backoffLimit (%d) allows", why, restarts, limit)
}

// restart makes every pod of the job again after one failed, counting it in
// status.restarts, or fails the job when its backoff limit is spent. In
// three steps, each its own sync: the failure is marked with its restart
// number (AnnotationRestart), the count is written, then the pods go.
func (c *Controller) restart(ctx context.Context, key string, job *div2.DIJob, status *div2.DIJobStatus, live []*corev1.Pod, failed *corev1.Pod, satisfied bool, now metav1.Time) ([]common.Event, error) {
	why := fmt.Sprintf("pod %s failed", failed.Name)
	if m := podFailure(failed); m != "" {
		why += ": " + m
	}
	limit := backoffLimit(job)
	n, counted := restartOf(failed)
	if !counted && !satisfied {
		// An earlier restart's deletions, or the mark this failure was
		// given, are not all seen yet: it must not be counted again, nor
		// fail the job on a count that already holds it.
		return nil, nil
	}
	if !counted {
		if status.Restarts >= limit {
			msg := spentBackoff(why, status.Restarts, limit)
			status.CompletionTimestamp = &now
			err := c.children.DeletePods(ctx, key, job, common.PodsToClean(live, string(job.Spec.CleanPodPolicy)), "the job failed")
			return setPhase(status, div2.JobFailed, "BackoffLimitExceeded", msg, now, corev1.EventTypeWarning), err
		}
		// Restarts after the first wait, doubling, as the Job controller's
		// do: a job that fails at once must not recreate its pods back to
		// back.
		if wait := restartDelay(status.Restarts) - now.Sub(lastRestart(status)); status.Restarts > 0 && wait > 0 {
			c.queue.AddAfter(key, wait)
			msg := fmt.Sprintf("%s; restarting in %s (backoff after %d restarts)", why, wait.Round(time.Second), status.Restarts)
			return setPhase(status, div2.JobRestarting, "BackOff", msg, now, corev1.EventTypeWarning), nil
		}
		n = status.Restarts + 1
		if err := c.mark(ctx, key, failed, AnnotationRestart, n); err != nil {
			return nil, err
		}
	}
	msg := fmt.Sprintf("%s; every pod is made again (restart %d of %d)", why, n, limit)
	if status.Restarts < n {
		// The count first: the pods go once the status holds it.
		status.Restarts = n
		return setPhase(status, div2.JobRestarting, "PodFailed", msg, now, corev1.EventTypeWarning), nil
	}
	if !satisfied {
		return nil, nil
	}
	if err := c.children.DeletePods(ctx, key, job, live, "restarting the job: "+why); err != nil {
		return nil, err
	}
	return setPhase(status, div2.JobRestarting, "PodFailed", msg, now, corev1.EventTypeWarning), nil
}

// renumber makes every pod of the job again, with ranks afresh, when the
// names its pods know would pass the bound a job's DI_NODES keeps to (tasks
// renamed or replaced while older pods ran). Not a failure: it is not
// counted in status.restarts.
func (c *Controller) renumber(ctx context.Context, key string, job *div2.DIJob, status *div2.DIJobStatus, live []*corev1.Pod, names int, now metav1.Time) ([]common.Event, error) {
	msg := fmt.Sprintf("DI_NODES would list %d names, more than the %d a job's pods may carry; every pod is made again with ranks afresh",
		names, div2.MaxJobReplicas)
	if err := c.children.DeletePods(ctx, key, job, live, "renumbering the job's ranks"); err != nil {
		return nil, err
	}
	return setPhase(status, div2.JobRestarting, "Renumbered", msg, now, corev1.EventTypeNormal), nil
}

// AnnotationMove, on a pod of a preemptible job, is the number of the move
// (status.reschedules) that deletes it, written before the count and the
// deletions as AnnotationRestart is: a lost status write or a GlobalManager
// stopping in between neither loses a move nor counts one twice. (A
// GlobalManager that starts again finds the mark without the placement
// chosen, and places the job afresh.)
const AnnotationMove = "nereid.io/move"

// move carries out a move of the job in three steps, each its own sync: a
// live pod is marked with the move's number, the count is written, then
// every pod goes and is made again on the new placement.
func (c *Controller) move(ctx context.Context, key string, job *div2.DIJob, status *div2.DIJobStatus, live []*corev1.Pod, n int32, marked, satisfied bool, now metav1.Time) ([]common.Event, error) {
	if !marked {
		if len(live) == 0 {
			return nil, nil // nothing to move; the placement applies as pods are made
		}
		n = status.Reschedules + 1
		first := slices.MinFunc(live, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		if err := c.mark(ctx, key, first, AnnotationMove, n); err != nil {
			return nil, err
		}
	}
	msg := fmt.Sprintf("the allocator moves the job to a better placement (move %d); every pod is made again", n)
	if status.Reschedules < n {
		// The count first: the pods go once the status holds it.
		status.Reschedules = n
		return setPhase(status, div2.JobRescheduling, "Moved", msg, now, corev1.EventTypeNormal), nil
	}
	if !satisfied {
		return nil, nil
	}
	if err := c.children.DeletePods(ctx, key, job, live, "the allocator moves the job to a better placement"); err != nil {
		return nil, err
	}
	return setPhase(status, div2.JobRescheduling, "Moved", msg, now, corev1.EventTypeNormal), nil
}

// mark writes n under annotation on pod: the number of the restart or move
// that is to delete it, before the count and the deletions. Until the cache
// shows it the job's expectations are not satisfied.
func (c *Controller) mark(ctx context.Context, key string, pod *corev1.Pod, annotation string, n int32) error {
	return c.children.MarkPod(ctx, key, pod, annotation, strconv.Itoa(int(n)))
}

// moveOf is the move a live pod is marked for, when one is.
func moveOf(live []*corev1.Pod) (int32, bool) {
	for _, p := range live {
		if n, ok := markOf(p, AnnotationMove); ok {
			return n, true
		}
	}
	return 0, false
}

// restartOf is the restart a failed pod's failure causes, when it is marked.
func restartOf(pod *corev1.Pod) (int32, bool) {
	return markOf(pod, AnnotationRestart)
}

// markOf is the number mark wrote under annotation on pod, when it did.
func markOf(pod *corev1.Pod, annotation string) (int32, bool) {
	n, err := strconv.ParseInt(pod.Annotations[annotation], 10, 32)
	return int32(n), err == nil && n > 0
}

// The delay before restart n+1 after restart n: 10 s, doubling, at most 6 min.
const (
	restartBackoffBase = 10 * time.Second
	restartBackoffMax  = 6 * time.Minute
)

func restartDelay(restarts int32) time.Duration {
	d := restartBackoffBase
	for i := int32(1); i < restarts && d < restartBackoffMax; i++ {
		d *= 2
	}
	return min(d, restartBackoffMax)
}

// lastRestart is when the job's Restarting condition last changed: when it
// came back from its last restart (False), or when this failure was first
// seen (True, set by the wait itself, which then counts from there).
func lastRestart(status *div2.DIJobStatus) time.Time {
	for _, c := range status.Conditions {
		if c.Type == div2.ConditionType(div2.JobRestarting) {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func backoffLimit(job *div2.DIJob) int32 {
	if job.Spec.BackoffLimit == nil {
		return 3
	}
	return *job.Spec.BackoffLimit
}

// podFailure is what a failed pod says of its failure: its message or
// reason, else its first container's termination.
func podFailure(p *corev1.Pod) string {
	if p.Status.Message != "" {
		return p.Status.Message
	}
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("container %s exited with %d (%s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	return ""
}

// advance moves the phase of a job whose pods are current: Succeeded when
// its deciding tasks are done (done); Pending while pods are missing
// (Restarting, after a restart); Starting while some are not running;
// Running.
func (c *Controller) advance(job *div2.DIJob, status *div2.DIJobStatus, wanted []replica, current []*corev1.Pod, missing int, isHeld map[string]bool, holding []held, actErr error, now metav1.Time) []common.Event {
	up := 0
	for _, p := range current {
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || isHeld[p.Name] {
			up++
		}
	}
	linkNote := ""
	if len(holding) > 0 {
		linkNote = "; counted as running while their edge link is down: " + heldList(holding)
	}
	switch {
	case c.done(job, wanted, current):
		status.CompletionTimestamp = &now
		return setPhase(status, div2.JobSucceeded, "Succeeded", fmt.Sprintf("every pod of %s succeeded", deciders(job)), now, corev1.EventTypeNormal)
	case missing > 0 && status.Phase == div2.JobRestarting:
		return setPhase(status, div2.JobRestarting, "PodFailed", conditionMessage(status, div2.JobRestarting), now, corev1.EventTypeWarning)
	case missing > 0 && status.Phase == div2.JobRescheduling:
		return setPhase(status, div2.JobRescheduling, "Moved", conditionMessage(status, div2.JobRescheduling), now, corev1.EventTypeNormal)
	case missing > 0:
		msg := fmt.Sprintf("%d of %d pods are not made yet", missing, len(wanted))
		if actErr != nil {
			msg += fmt.Sprintf("; retrying with backoff: %v", actErr)
		}
		return setPhase(status, div2.JobPending, "CreatingPods", msg, now, corev1.EventTypeNormal)
	case up < len(wanted):
		return setPhase(status, div2.JobStarting, "PodsStarting", fmt.Sprintf("%d of %d pods are running%s", up, len(wanted), linkNote), now, corev1.EventTypeNormal)
	default:
		return setPhase(status, div2.JobRunning, "AllPodsRunning", fmt.Sprintf("all %d pods are running%s", len(wanted), linkNote), now, corev1.EventTypeNormal)
	}
}

// decidingTasks are the tasks whose end is the job's: its learners and
// evaluators (collectors produce data for as long as the learner trains and
// are stopped, not finished), or every task of a job that has neither.
func decidingTasks(job *div2.DIJob) map[string]bool {
	deciding := map[string]bool{}
	for i := range job.Spec.Tasks {
		t := &job.Spec.Tasks[i]
		if t.Type == div2.TaskTypeLearner || t.Type == div2.TaskTypeEvaluator {
			deciding[t.TaskName()] = true
		}
	}
	if len(deciding) == 0 {
		for i := range job.Spec.Tasks {
			deciding[job.Spec.Tasks[i].TaskName()] = true
		}
	}
	return deciding
}

// done says whether every replica of the deciding tasks has a pod that succeeded.
func (c *Controller) done(job *div2.DIJob, wanted []replica, current []*corev1.Pod) bool {
	deciding := decidingTasks(job)
	succeeded := map[string]bool{}
	for _, p := range current {
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded[p.Name] = true
		}
	}
	for _, r := range wanted {
		if deciding[r.taskName] && !succeeded[r.name] {
			return false
		}
	}
	return true
}

// deciders names the tasks that decide completion, for a message.
func deciders(job *div2.DIJob) string {
	var names []string
	for n := range decidingTasks(job) {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 1 {
		return "task " + names[0]
	}
	return fmt.Sprintf("tasks %v", names)
}

// count fills what status counts of the job's pods: replicas, ready
// replicas, pods per task and phase, the node of each replica, the
// selector of the scale subresource, and the generation observed.
func (c *Controller) count(job *div2.DIJob, wanted []replica, status *div2.DIJobStatus, pods []*corev1.Pod) {
	status.Replicas = int32(len(wanted))
	status.ReadyReplicas = 0
	status.TaskStatus = nil
	byName := map[string]*corev1.Pod{}
	for _, p := range pods {
		if common.PodTerminating(p) {
			continue
		}
		byName[p.Name] = p
		if p.Status.Phase == corev1.PodRunning && podReady(p) {
			status.ReadyReplicas++
		}
		task := p.Labels[LabelTaskName]
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
				node = allocator.PinnedNode(p)
			}
			status.Allocation = append(status.Allocation, node)
		}
	}
	status.Selector = common.OwnerSelector(job).String()
	status.ObservedGeneration = job.Generation
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
