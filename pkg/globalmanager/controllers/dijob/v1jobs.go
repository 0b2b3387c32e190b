package dijob

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// isV1Job says whether the job of key is a v1alpha1 job (its conversion
// marks it so in v2alpha1), which syncV1 runs.
func (c *Controller) isV1Job(key string) bool {
	job, ok, _ := common.ReadOwner(key, c.syncer.Get)
	return ok && conversion.IsV1(job)
}

// v1SyncCtx is what one sync of a v1 job read, decided and did: the v1
// operator's counterpart of syncCtx.
type v1SyncCtx struct {
	key string
	// job is Begin's copy of the cached job, which owns the children and
	// hears the events; v1 is its v1alpha1 view (conversion.ToV1), status
	// the v1 status the sync writes (as job's v2 status).
	job    *div2.DIJob
	v1     *div1.DIJob
	status *div1.DIJobStatus
	now    metav1.Time
	// pods and services are the job's children as the cache has them;
	// satisfied says the cache holds what earlier syncs did, and only
	// then does a sync create or delete pods.
	pods      []*corev1.Pod
	services  []*corev1.Service
	satisfied bool

	// What the sync did: the pods it made and the ones it deleted, by
	// name, and the events to record once the status is written.
	made    []*corev1.Pod
	deleted map[string]bool
	events  []common.Event
	// failedCreate says why a pod the sync meant to make was not made
	// (setReplicasCreated), "" when none failed.
	failedCreate string
}

// syncV1 reconciles a v1alpha1 job as DI-orchestrator v0.2 did: the
// coordinator's pod, a Service for every pod, failed workers replaced,
// phases from the coordinator, cleanup at the end (docs/dijob-v1alpha1.md,
// "The operator"). The v1 status is written once, as the job's v2 status
// (conversion.V1StatusToV2), with the EdgeLinked condition of a v2 job
// (setEdgeLinked) and a Scheduled condition once a pod of it cannot be
// placed (setPlacement). Gangs, quotas and the allocator hold nothing of
// a v1 job: DI-orchestrator v0.2 had none.
func (c *Controller) syncV1(ctx context.Context, key string) error {
	ctx, s, err := c.syncer.Begin(ctx, key)
	if s == nil || err != nil {
		return err
	}
	c.deps.Admission.Forget(jobKind, key)
	c.placer.forget(key)
	v1, err := conversion.ToV1(s.Owner)
	if err != nil {
		return fmt.Errorf("reading %s as v1alpha1: %w", key, err)
	}
	sc := &v1SyncCtx{
		key: key, job: s.Owner, v1: v1, status: v1.Status.DeepCopy(), now: metav1.NewTime(c.clock.Now()),
		pods: s.Pods, services: s.Services, satisfied: s.Satisfied, deleted: map[string]bool{},
	}
	var actErr error
	switch why := invalidV1(v1); {
	case v1Finished(sc.status.Phase):
		actErr = c.finishV1(ctx, sc)
	case why != "":
		sc.setPhase(div1.JobFailed, reasonInvalidV1Job, why)
	default:
		actErr = c.runV1(ctx, sc)
	}
	s.Owner.Status = conversion.V1StatusToV2(sc.status)
	setV1Progress(&s.Owner.Status, sc.live(), sc.deleted)
	if !v1Finished(sc.status.Phase) {
		// Its collectors may run on edge nodes (coordinated.Place): it says
		// which links are down as a v2 job does, in the v2 status, where
		// v1alpha1 shows EdgeLinked too.
		pods := sc.live()
		links := c.readLinks(ctx, pods, sc.now.Time)
		sc.events = append(sc.events, setEdgeLinked(&s.Owner.Status, links, sc.now)...)
		sc.events = append(sc.events, setPlacement(&s.Owner.Status, c.deps.Gangs.Placement(pods), sc.now)...)
	}
	return s.End(ctx, actErr, sc.events, "phase", sc.status.Phase)
}

// reasonInvalidV1Job is the reason of the Failed condition, and of its
// event, of a v1 job that cannot run.
const reasonInvalidV1Job = "InvalidDIJob"

// invalidV1 says why a v1 job cannot run, "" when it can: a name longer
// than coordinated.MaxJobNameLength (its pods' Services, named after the
// pods, would be refused), or no coordinator.
func invalidV1(job *div1.DIJob) string {
	if n := len(job.Name); n > coordinated.MaxJobNameLength {
		return fmt.Sprintf("metadata.name %q is %d characters, longer than %d: every pod of a v1alpha1 DIJob gets a Service named after it (<name>-ddp-learner-xxxxx at the longest), and a Service's name is a DNS label of at most 63",
			job.Name, n, coordinated.MaxJobNameLength)
	}
	if job.Spec.Coordinator == nil {
		return "spec.coordinator is missing: a v1alpha1 DIJob is driven by its coordinator"
	}
	return ""
}

// v1Finished says whether a v1 job has ended.
func v1Finished(p div1.Phase) bool {
	return p == div1.JobSucceeded || p == div1.JobFailed
}

// runV1 acts on an unfinished v1 job, in steps: make the coordinator when
// the job has none, replace failed workers, give every pod its Service,
// count the replicas, say whether its pods could be made and move the
// phase.
func (c *Controller) runV1(ctx context.Context, sc *v1SyncCtx) error {
	coordinator, found := sc.coordinator()
	var errs []error
	if !found && sc.satisfied {
		errs = append(errs, c.deleteOrphanedReplicas(ctx, sc))
		made, err := c.makeCoordinator(ctx, sc)
		errs = append(errs, err)
		coordinator = made
	}
	errs = append(errs, c.replaceFailed(ctx, sc))
	pods := sc.live()
	errs = append(errs, c.syncV1Services(ctx, sc, pods))
	sc.status.ReplicaStatus = countReplicas(pods, sc.deleted)
	sc.setReplicasCreated()
	sc.advance(coordinator != nil)
	return errors.Join(errs...)
}

// live is the job's pods: those in the cache and those the sync made.
func (sc *v1SyncCtx) live() []*corev1.Pod {
	return append(append([]*corev1.Pod(nil), sc.pods...), sc.made...)
}

// coordinator is the job's coordinator pod in the cache (being deleted
// included: a new one is made once it is gone), found when there is one.
func (sc *v1SyncCtx) coordinator() (*corev1.Pod, bool) {
	name := coordinated.CoordinatorName(sc.v1.Name)
	for _, p := range sc.pods {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// makeCoordinator creates the job's coordinator pod (coordinated.Pod, then
// placed by coordinated.Place: never on an edge node) and returns it as
// made, nil when the create failed or found it made already.
func (c *Controller) makeCoordinator(ctx context.Context, sc *v1SyncCtx) (*corev1.Pod, error) {
	pod, _ := coordinated.Pod(coordinated.Replica{
		Job: sc.v1, Type: coordinated.Coordinator, Name: coordinated.CoordinatorName(sc.v1.Name),
		Template: &sc.v1.Spec.Coordinator.Template, ServerURL: c.config.V1ServerURL,
	})
	coordinated.Place(pod, c.config.EdgeLinkGrace)
	made, err := c.children.CreatePods(ctx, sc.key, sc.job, []*corev1.Pod{pod})
	sc.made = append(sc.made, made...)
	if err != nil {
		sc.failedCreate = fmt.Sprintf("the coordinator (from %s) was not made: %v", coordinated.TemplateField(coordinated.Coordinator), err)
	}
	if len(made) == 0 {
		return nil, err
	}
	return made[0], err
}

// deleteOrphanedReplicas deletes, when the job's coordinator is gone and
// another is about to be made, the replicas the gone one asked for: every
// pod of the job still running (the Normal event of their deletion names
// them and says why). A replica is made only when a coordinator asks the v1
// replicas server for it, and it serves the coordinator that connected to
// it first (DI-engine's slaves refuse another master while connected):
// a new coordinator can only ask for its own. DI-orchestrator v0.2 left
// them, and a remade coordinator of DI-orchestrator's mock, finding them in
// the server's list, converged and then never exited, its threads still
// waiting on them (test/e2e).
func (c *Controller) deleteOrphanedReplicas(ctx context.Context, sc *v1SyncCtx) error {
	// The pods still pending or running are those a cleanPodPolicy of
	// Running takes at a job's end.
	orphans := common.PodsToClean(sc.pods, string(div1.CleanPodPolicyRunning))
	for _, p := range orphans {
		sc.deleted[p.Name] = true
	}
	return c.children.DeletePods(ctx, sc.key, sc.job, orphans, "the coordinator that asked for them is gone, and a new one asks for its own")
}

// syncV1Services gives every live pod of pods its own Service
// (coordinated.Service) and, in a satisfied sync, deletes the Services
// whose pod is gone: DI-engine reaches each replica by its pod's name.
func (c *Controller) syncV1Services(ctx context.Context, sc *v1SyncCtx, pods []*corev1.Pod) error {
	have := common.ByName(sc.services)
	var errs []error
	for _, p := range pods {
		if _, ok := have[p.Name]; ok || common.PodTerminating(p) || sc.deleted[p.Name] {
			continue
		}
		errs = append(errs, c.children.CreateService(ctx, sc.job, coordinated.Service(p)))
	}
	if !sc.satisfied {
		return errors.Join(errs...)
	}
	byName := common.ByName(pods)
	for _, svc := range sc.services {
		if _, ok := byName[svc.Name]; ok || svc.DeletionTimestamp != nil {
			continue
		}
		errs = append(errs, c.children.DeleteService(ctx, sc.job, svc, "its pod is gone"))
	}
	return errors.Join(errs...)
}

// finishV1 cleans up after a v1 job ended, as DI-orchestrator did: the
// pods its cleanPodPolicy names (Running, the default: those still pending
// or running; All; None), but never the coordinator's once it ended, kept
// for its logs; and every Service of the job. A coordinator still running
// (the job failed past its activeDeadlineSeconds, not by its coordinator's
// end) goes with the workers, as they would. The status stays as the end
// left it.
func (c *Controller) finishV1(ctx context.Context, sc *v1SyncCtx) error {
	if !sc.satisfied {
		return nil
	}
	coordinator := coordinated.CoordinatorName(sc.v1.Name)
	var workers []*corev1.Pod
	for _, p := range sc.pods {
		if p.Name != coordinator || !common.PodFinished(p) {
			workers = append(workers, p)
		}
	}
	errs := []error{c.children.DeletePods(ctx, sc.key, sc.job, common.PodsToClean(workers, string(sc.v1.Spec.CleanPodPolicy)), "the job finished")}
	for _, svc := range sc.services {
		if svc.DeletionTimestamp == nil {
			errs = append(errs, c.children.DeleteService(ctx, sc.job, svc, "the job finished"))
		}
	}
	return errors.Join(errs...)
}
