package federatedlearning

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

// Condition types of a FederatedLearningJob. Training, Complete and Failed are
// Sedna's; the other two make waiting and partial failures visible.
const (
	condWorkersCreated = "WorkersCreated"
	condTraining       = "Training"
	condComplete       = "Complete"
	condFailed         = "Failed"
)

// sync reconciles one job: lister read, deep copy, expectations, claim, act,
// one status write when it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	ctx, s, err := c.syncer.Begin(ctx, key)
	if s == nil || err != nil {
		return err
	}
	job, satisfied := s.Owner, s.Satisfied
	// Children Sedna's GlobalManager left are replaced before any of ours come.
	pods, adopted := s.Pods, s.Adopted

	now := metav1.NewTime(c.clock.Now())
	status := &job.Status
	if status.StartTime == nil {
		status.StartTime = &now
	}
	var events []common.Event
	var actErr error
	finished := common.IsJobConditionTrue(status.Conditions, condComplete) || common.IsJobConditionTrue(status.Conditions, condFailed)

	var current []*corev1.Pod // pods of the current spec
	if finished {
		// A job that asks no more holds no place in its namespace's queue.
		c.deps.Admission.Forget(jobKind, key)
		if satisfied {
			actErr = c.cleanPods(ctx, key, job, append(pods, adopted.Pods...))
		}
		current = pods
	} else {
		refs, missing, err := c.resolve(job)
		if err != nil {
			return fmt.Errorf("resolving references of %s: %w", key, err)
		}
		var missingEvents []common.Event
		status.Conditions, missingEvents = common.SetReferencesResolved(job, status.Conditions, missing, now)
		events = append(events, missingEvents...)
		if len(missing) > 0 {
			// The workers already made run on (their pods hold what they
			// were given); only new ones wait. The phase and counts say
			// what those pods do, not Pending over running pods.
			current = pods
			if len(pods) == 0 || status.Phase == "" {
				status.Phase = sednav1.FLJobPending
			}
			c.deps.Admission.Forget(jobKind, key)
		} else {
			var readEvents []common.Event
			status.Conditions, readEvents = common.SetDatasetsReadable(job, status.Conditions, refs.datasets, now)
			events = append(events, readEvents...)
			workers, err := c.desiredWorkers(job, refs)
			if err != nil {
				return fmt.Errorf("building workers of %s: %w", key, err)
			}
			// A federated round needs every participant: the gang is all
			// of the workers.
			plan := c.deps.Gangs.Plan(job, jobKind, false)
			var missingWorkers int
			if adopted.Len() > 0 {
				missingWorkers = len(workers)
				if satisfied {
					actErr = c.children.RemoveAdopted(ctx, key, job, adopted)
				}
			} else {
				var admitted *admission.Decision
				var admitEvents []common.Event
				current, missingWorkers, admitted, admitEvents, actErr = c.manageWorkers(ctx, key, job, workers, pods, s.Services, plan, satisfied)
				events = append(events, admitEvents...)
				if admitted != nil {
					status.Conditions, admitEvents = admission.SetJobCondition(job, status.Conditions, *admitted, now)
					events = append(events, admitEvents...)
				}
			}
			c.setWorkersCreated(job, status, len(workers), missingWorkers, actErr, now)
			events = append(events, setOnDatasetNodes(job, status, trainerNodes(job, refs), now)...)
			var gangEvents []common.Event
			status.Conditions, gangEvents = gang.SetJobCondition(job, status.Conditions, plan.Status(current, len(workers)), now)
			events = append(events, gangEvents...)
			events = append(events, c.setPhase(job, status, workers, current, missingWorkers, now)...)
		}
	}
	count(job, current)

	return s.End(ctx, actErr, events, "phase", status.Phase, "active", status.Active, "succeeded", status.Succeeded, "failed", status.Failed)
}

// manageWorkers makes the pods match the workers: old-spec pods are deleted,
// missing ones created, all of them once the namespace's quotas admit them.
// It returns the pods of the current spec, those it made included, how many
// workers have no pod yet, and the admission decision when it asked for
// one, with the events of a refusal.
func (c *Controller) manageWorkers(ctx context.Context, key string, job *sednav1.FederatedLearningJob, workers []common.Worker, pods []*corev1.Pod, services []*corev1.Service, plan *gang.Plan, satisfied bool) ([]*corev1.Pod, int, *admission.Decision, []common.Event, error) {
	byName := common.ByName(pods)
	var current, stale []*corev1.Pod
	var toCreate []*corev1.Pod
	wanted := map[string]bool{}
	for _, w := range workers {
		wanted[w.Name] = true
		if p, ok := byName[w.Name]; ok && !common.PodTerminating(p) {
			current = append(current, p)
			continue
		}
		toCreate = append(toCreate, common.NewWorkerPod(job, jobKind, w))
	}
	for _, p := range pods {
		if !wanted[p.Name] && !common.PodTerminating(p) {
			stale = append(stale, p)
		}
	}
	if !satisfied {
		// Our own creates and deletes are not all in the cache yet; acting now
		// could do them twice. Their events requeue the job.
		return current, len(toCreate), nil, nil, nil
	}
	var members gang.Members
	for _, w := range workers {
		members.Add(&w.Template.Spec, 1)
	}
	// The gang's objects are in step with the workers before a pod of it is
	// made; a job whose annotations ask for what cannot be makes none.
	missing := len(toCreate)
	gangErr := plan.Ensure(ctx, c.children, members, current)
	if gangErr != nil || plan.Problem != nil {
		toCreate = nil
	}
	for _, p := range toCreate {
		plan.Decorate(p, members)
	}
	// What is missing of the job (its Service included) is made only when
	// the quotas hold all of it.
	var decision *admission.Decision
	if missing == 0 {
		decision = &admission.Made
	}
	needService := len(services) == 0
	req := admission.Request{Kind: jobKind, Key: key, Owner: job, PriorityClassName: members.PriorityClassName, Charge: admission.Charge{Pods: toCreate}}
	if len(toCreate) > 0 {
		if needService {
			req.Charge.Objects = append(req.Charge.Objects, admission.Service)
		}
		d, err := c.deps.Admission.Admit(ctx, req)
		if err != nil {
			return current, missing, nil, nil, err
		}
		decision = &d
		if !d.Admitted {
			req.Charge.Pods, needService = nil, false
		}
	}
	// The Service, the deletions and the creations do not depend on each other.
	errs := make([]error, 4)
	errs[3] = gangErr
	var wg sync.WaitGroup
	if needService {
		wg.Go(func() { errs[0] = c.children.CreateService(ctx, job, c.aggregationService(job)) })
	}
	wg.Go(func() { errs[1] = c.children.DeletePods(ctx, key, job, stale, "the job's spec changed") })
	var made []*corev1.Pod
	var undone []common.Event
	wg.Go(func() { made, undone, errs[2] = c.deps.Admission.CreatePods(ctx, c.children, req) })
	wg.Wait()
	// The pods just made count as the next sync will count them from the
	// cache, so the status this sync writes need not be written again.
	return append(current, made...), missing - len(made), decision, undone, errors.Join(errs...)
}

// cleanPods applies the clean-pod policy to a finished job.
func (c *Controller) cleanPods(ctx context.Context, key string, job *sednav1.FederatedLearningJob, pods []*corev1.Pod) error {
	return c.children.DeletePods(ctx, key, job, common.PodsToClean(pods, string(job.Spec.CleanPodPolicy)), "the job finished")
}

func (c *Controller) setWorkersCreated(job *sednav1.FederatedLearningJob, status *sednav1.FederatedLearningJobStatus, want, missing int, actErr error, now metav1.Time) {
	var cond sednav1.JobCondition
	switch {
	case actErr != nil:
		cond = common.JobConditionFor(job, condWorkersCreated, false, "CreateFailed",
			fmt.Sprintf("%d of %d workers have no pod; retrying with backoff: %v", missing, want, actErr))
	case missing > 0:
		cond = common.JobConditionFor(job, condWorkersCreated, false, "Creating", fmt.Sprintf("%d of %d workers have no pod yet", missing, want))
	default:
		cond = common.JobConditionFor(job, condWorkersCreated, true, "AllCreated", fmt.Sprintf("all %d workers have a pod", want))
	}
	status.Conditions = common.SetJobCondition(status.Conditions, cond, now)
}

// setPhase moves the phase: Succeeded when the aggregation worker succeeded,
// Failed when any worker failed, Running only when every worker has a running
// pod, Pending otherwise.
func (c *Controller) setPhase(job *sednav1.FederatedLearningJob, status *sednav1.FederatedLearningJobStatus, workers []common.Worker, current []*corev1.Pod, missing int, now metav1.Time) []common.Event {
	var aggregator *corev1.Pod
	var failed *corev1.Pod
	running := 0
	for _, p := range current {
		if p.Name == workers[0].Name {
			aggregator = p
		}
		switch p.Status.Phase {
		case corev1.PodFailed:
			failed = p
		case corev1.PodRunning, corev1.PodSucceeded:
			running++
		}
	}
	old := status.Phase
	switch {
	case aggregator != nil && aggregator.Status.Phase == corev1.PodSucceeded:
		status.Phase = sednav1.FLJobSucceeded
		status.CompletionTime = &now
		status.Conditions = common.SetJobCondition(status.Conditions, common.JobConditionFor(job, condComplete, true, "AggregationSucceeded", "the aggregation worker finished"), now)
		status.Conditions = common.SetJobCondition(status.Conditions, common.JobConditionFor(job, condTraining, false, "Completed", "the job finished"), now)
	case failed != nil:
		fail(job, "WorkerFailed", fmt.Sprintf("worker pod %s failed: %s", failed.Name, failed.Status.Message), now)
	case missing == 0 && running == len(workers):
		status.Phase = sednav1.FLJobRunning
		// A worker behind a link that is down is running as far as the
		// cloud last heard: Training does not say all is well meanwhile.
		status.Conditions = common.SetJobCondition(status.Conditions, common.AllWellUnlessLinkDown(job, status.Conditions,
			condTraining, "AllWorkersRunning", fmt.Sprintf("all %d workers are running", len(workers))), now)
	default:
		status.Phase = sednav1.FLJobPending
	}
	if status.Phase == old {
		return nil
	}
	switch status.Phase {
	case sednav1.FLJobRunning:
		return []common.Event{{Type: corev1.EventTypeNormal, Reason: "Running", Message: "all workers are running"}}
	case sednav1.FLJobSucceeded:
		return []common.Event{{Type: corev1.EventTypeNormal, Reason: "Completed", Message: "the aggregation worker finished; the job succeeded"}}
	case sednav1.FLJobFailed:
		return []common.Event{{Type: corev1.EventTypeWarning, Reason: "Failed", Message: fmt.Sprintf("worker pod %s failed", failed.Name)}}
	}
	return nil
}
