package dijob

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

// lifecycle is what the lifecycle policies (common.Lifecycle) need of a
// DIJob, v1alpha1 and v2alpha1 alike: both are stored as v2alpha1, and a
// v1 job's status is its v2 status seen through v1alpha1.
func (c *Controller) lifecycle() *common.Lifecycle[*div2.DIJob] {
	return &common.Lifecycle[*div2.DIJob]{
		Spec: func(job *div2.DIJob) common.LifecycleSpec {
			l := &job.Spec.JobLifecycle
			return common.LifecycleSpec{Suspend: ptr.Deref(l.Suspend, false), ActiveDeadlineSeconds: l.ActiveDeadlineSeconds, TTLSecondsAfterFinished: l.TTLSecondsAfterFinished}
		},
		Conditions: func(job *div2.DIJob) common.Conditions { return conditions{&job.Status} },
		// A v1 job has no gang (DI-orchestrator v0.2 had none).
		Release: func(ctx context.Context, job *div2.DIJob) error {
			if conversion.IsV1(job) {
				return nil
			}
			return c.deps.Gangs.Plan(job, jobKind, true).Release(ctx, c.children)
		},
		Finished: func(job *div2.DIJob) *metav1.Time {
			if !finished(job.Status.Phase) {
				return nil
			}
			if t := job.Status.CompletionTimestamp; t != nil {
				return t
			}
			if found, _, since := (conditions{&job.Status}).Get(string(job.Status.Phase)); found {
				return &since
			}
			return &metav1.Time{} // when is not known
		},
		Fail: func(job *div2.DIJob, reason, msg string, now metav1.Time) {
			job.Status.CompletionTimestamp = &now
			if conversion.IsV1(job) {
				changeV1Status(job, now, func(sc *v1SyncCtx) { sc.setPhase(div1.JobFailed, reason, msg) })
				return
			}
			setPhase(&job.Status, div2.JobFailed, reason, msg, now, corev1.EventTypeWarning)
		},
		Suspended: func(job *div2.DIJob, pods []*corev1.Pod, now metav1.Time) {
			if conversion.IsV1(job) {
				// v1alpha1 has no phase for it: the Suspended condition
				// says it, and its phase and counts stay those it ran
				// with until syncV1 counts its pods again on resume.
				return
			}
			setPhase(&job.Status, div2.JobPending, common.ReasonSuspended, "the job is suspended: its pods are stopped", now, corev1.EventTypeNormal)
			var wanted []replica
			if job.CheckReplicas() == nil {
				wanted = replicasOf(job)
			}
			c.count(job, wanted, &job.Status, pods)
		},
	}
}

// changeV1Status changes a v1 job's status as v1alpha1 has it, as syncV1
// does, and stores it back in the v2 status.
func changeV1Status(job *div2.DIJob, now metav1.Time, change func(sc *v1SyncCtx)) {
	v1 := conversion.V1StatusOf(&job.Status)
	change(&v1SyncCtx{job: job, status: &v1, now: now})
	completion := job.Status.CompletionTimestamp
	job.Status = conversion.V1StatusToV2(&v1)
	job.Status.CompletionTimestamp = completion
}

// conditions is a DIJob's status.conditions as common.Conditions.
type conditions struct{ status *div2.DIJobStatus }

func (c conditions) Get(condType string) (bool, bool, metav1.Time) {
	for _, cond := range c.status.Conditions {
		if string(cond.Type) == condType {
			return true, cond.Status == corev1.ConditionTrue, cond.LastTransitionTime
		}
	}
	return false, false, metav1.Time{}
}

func (c conditions) Set(condType string, isTrue bool, reason, message string, now metav1.Time) {
	setCondition(c.status, div2.ConditionType(condType), isTrue, reason, message, now, func(bool, bool, string) []common.Event { return nil })
}
