package learningcycle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

// Sync reconciles one job: lister read, deep copy, expectations, claim, move
// the cycle on the pods' phases, create and delete pods, one status write
// when it changed. Run's workers call it with a queue key.
func (c *Controller[J]) Sync(ctx context.Context, key string) error {
	ctx, s, err := c.syncer.Begin(ctx, key)
	if s == nil || err != nil {
		return err
	}
	job, satisfied, pods := s.Owner, s.Satisfied, s.Pods

	fields := c.kind.Fields(job)
	st := fields.read()
	m := &machine{job: job.GetName(), st: &st, now: metav1.NewTime(c.clock.Now()), config: &c.config}
	if st.Round == 0 {
		m.start()
	}
	var errs []error
	switch {
	case s.Adopted.Len() > 0:
		// The pods Sedna's GlobalManager left go before any of ours come.
		if satisfied {
			errs = append(errs, c.children.RemoveAdopted(ctx, key, job, s.Adopted))
		}
	default:
		if !st.Finished() {
			errs = append(errs, c.manageWorkers(ctx, key, job, m, pods, satisfied))
		} else {
			c.deps.Admission.Forget(c.gvk, key)
		}
		if satisfied {
			errs = append(errs, c.deleteStale(ctx, key, job, &st, pods))
		}
	}
	// A pod refused a place (its node, its taints, its size) is named on
	// the job, not only on the pod.
	var placed []common.Event
	st.JobConditions, placed = gang.SetPlacementCondition(job, st.JobConditions, c.deps.Gangs.Placement(pods), m.now)
	m.events = append(m.events, placed...)
	st.Active, st.Succeeded, st.Failed = countPods(pods)
	st.ObservedGeneration = job.GetGeneration()
	fields.write(st)
	return s.End(ctx, errors.Join(errs...), m.events, "round", st.Round, "stage", st.Stage, "state", st.State, "attempt", st.Attempt)
}

// manageWorkers runs the cycle's workers for a job that is not finished: the
// controller's own deploy, the current try's stage pod, the inference worker.
func (c *Controller[J]) manageWorkers(ctx context.Context, key string, job J, m *machine, pods []*corev1.Pod, satisfied bool) error {
	spec := c.kind.Spec(job)
	refs, missing, err := c.resolve(job, spec)
	if err != nil {
		return fmt.Errorf("resolving references of %s: %w", key, err)
	}
	// Said once, when something goes missing, as the other kinds say it: a
	// condition in status.jobConditions, and a warning event at the change.
	var events []common.Event
	m.st.JobConditions, events = common.SetReferencesResolved(job, m.st.JobConditions, missing, m.now)
	m.events = append(m.events, events...)
	if len(missing) > 0 {
		// A job that asks no more holds no place in its namespace's queue.
		c.deps.Admission.Forget(c.gvk, key)
		return nil
	}
	// A Dataset its node cannot read holds the train trigger: said on the job.
	m.st.JobConditions, events = common.SetDatasetsReadable(job, m.st.JobConditions, []*sednav1.Dataset{refs.Dataset}, m.now)
	m.events = append(m.events, events...)
	st := m.st
	if st.Stage == sednav1.StageDeploy && st.State == sednav1.StageReady && c.kind.Deployment(job) == DeployByController {
		m.deployed(false)
	}
	stageErr := c.manageStage(ctx, key, job, spec, refs, m, pods, satisfied)
	if !satisfied || st.Finished() {
		return stageErr
	}
	name := st.InferenceWorker
	if name == "" {
		name = InferenceWorkerName(job.GetName(), st.DeployedRound)
	}
	// The inference worker is kept; only one deleted by hand is created again.
	if findPod(pods, name) != nil {
		st.InferenceWorker = name
		return stageErr
	}
	pod, err := c.workerPod(job, spec, refs, st, RoleInference, name)
	if err != nil {
		return errors.Join(stageErr, err)
	}
	// The status names the pod once it is asked for, never one a quota
	// still holds back.
	asked, err := c.createAdmitted(ctx, key, job, m, pod)
	if asked {
		st.InferenceWorker = name
	}
	return errors.Join(stageErr, err)
}

// createAdmitted makes a worker's pod once the namespace's quotas admit
// it, the job's Admitted condition saying so, and says whether it asked
// the API server for it (a pod that exists already counts, as CreatePods
// counts it): false while it waits, or when a refusal for quota removed it.
func (c *Controller[J]) createAdmitted(ctx context.Context, key string, job J, m *machine, pod *corev1.Pod) (bool, error) {
	req := admission.Request{Kind: c.gvk, Key: key, Owner: job, PriorityClassName: pod.Spec.PriorityClassName,
		Charge: admission.Charge{Pods: []*corev1.Pod{pod}}}
	d, err := c.deps.Admission.Admit(ctx, req)
	if err != nil {
		return false, err
	}
	var events []common.Event
	m.st.JobConditions, events = admission.SetJobCondition(job, m.st.JobConditions, d, m.now)
	m.events = append(m.events, events...)
	if !d.Admitted {
		return false, nil
	}
	_, undone, err := c.deps.Admission.CreatePods(ctx, c.children, req)
	m.events = append(m.events, undone...)
	return undone == nil, err
}

// manageStage moves the stage on its pod's phase and creates the pod of the
// current try when it has none.
func (c *Controller[J]) manageStage(ctx context.Context, key string, job J, spec Spec, refs Refs, m *machine, pods []*corev1.Pod, satisfied bool) error {
	// A failed try asks at once for the next try's pod, hence a second pass.
	for range 2 {
		name, role := wantedStagePod(job.GetName(), m.st)
		if name == "" {
			return nil
		}
		pod := findPod(pods, name)
		switch {
		case pod == nil:
			if !satisfied {
				return nil // our own creates and deletes are not all in the cache yet
			}
			p, err := c.workerPod(job, spec, refs, m.st, role, name)
			if err != nil {
				return err
			}
			if asked, err := c.createAdmitted(ctx, key, job, m, p); err != nil || !asked {
				return err
			}
			m.starting(name)
		case common.PodTerminating(pod):
			// Deleted by hand and still going: its replacement comes once it is gone.
		case pod.Status.Phase == corev1.PodFailed:
			m.failTry(podFailure(pod))
			continue
		case pod.Status.Phase == corev1.PodRunning:
			m.starting(name)
			m.running("pod " + name + " is running")
		case pod.Status.Phase == corev1.PodPending:
			m.starting(name)
		case pod.Status.Phase == corev1.PodSucceeded:
			// The worker's completed report travels through the
			// LocalController's outbox; it, not the phase, moves the
			// stage. One that does not come within the grace fails
			// the try (reportGraceLeft).
			if left := m.reportGraceLeft(name); left > 0 {
				c.queue.AddAfter(key, left)
				return nil
			}
			m.failTry(fmt.Sprintf("pod %s ended without its worker reporting completed", name))
			continue
		}
		return nil
	}
	return nil
}

func podFailure(p *corev1.Pod) string {
	msg := "pod " + p.Name + " failed"
	if p.Status.Reason != "" {
		msg += ": " + p.Status.Reason
	}
	if p.Status.Message != "" {
		msg += ": " + p.Status.Message
	}
	return msg
}

// deleteStale deletes the pods the cycle no longer wants: a stage try's pod
// still running when a later try replaced it or the job failed, stage pods of
// rounds before the previous one, and inference workers replaced by a newer
// one. The pod of a try that reported completed is left to exit by itself,
// so its logs stay until its round is long over.
func (c *Controller[J]) deleteStale(ctx context.Context, key string, job J, st *Status, pods []*corev1.Pod) error {
	wanted, _ := wantedStagePod(job.GetName(), st)
	byWhy := map[string][]*corev1.Pod{}
	add := func(why string, p *corev1.Pod) { byWhy[why] = append(byWhy[why], p) }
	for _, p := range pods {
		if common.PodTerminating(p) || p.Name == wanted {
			continue
		}
		role := Role(p.Labels[common.LabelWorkerRole])
		switch role {
		case RoleTrain, RoleEval:
			r, err := strconv.Atoi(p.Labels[LabelRound])
			round := int32(r)
			switch {
			case err != nil:
			case round < st.Round-1:
				add(fmt.Sprintf("round %d is over", round), p)
			case common.PodFinished(p):
			case st.Finished():
				add("the job failed", p)
			case round == st.Round && role == roleOf(st.Stage):
				add("a later try replaced it", p)
			}
		case RoleInference:
			if st.InferenceWorker != "" && p.Name != st.InferenceWorker {
				add("replaced by "+st.InferenceWorker, p)
			}
		}
	}
	whys := make([]string, 0, len(byWhy))
	for why := range byWhy {
		whys = append(whys, why)
	}
	sort.Strings(whys)
	var errs []error
	for _, why := range whys {
		errs = append(errs, c.children.DeletePods(ctx, key, job, byWhy[why], why))
	}
	return errors.Join(errs...)
}

// resolve reads the Dataset and Models job names; missing lists those that
// do not exist.
func (c *Controller[J]) resolve(job J, spec Spec) (refs Refs, missing []string, err error) {
	r := common.NewReferences(job.GetNamespace(), c.models, c.datasets)
	refs.Dataset = r.Dataset(spec.Dataset)
	refs.Models = map[string]*sednav1.Model{}
	for _, name := range spec.Models {
		refs.Models[name] = r.Model(name)
	}
	return refs, r.Missing(), r.Err()
}

func findPod(pods []*corev1.Pod, name string) *corev1.Pod {
	for _, p := range pods {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// countPods counts the pods by phase, those on their way out aside.
func countPods(pods []*corev1.Pod) (active, succeeded, failed int32) {
	for _, p := range pods {
		if common.PodTerminating(p) {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			succeeded++
		case corev1.PodFailed:
			failed++
		default:
			active++
		}
	}
	return active, succeeded, failed
}
