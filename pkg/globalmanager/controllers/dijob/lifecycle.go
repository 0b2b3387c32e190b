package dijob

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// lifecycle is what the lifecycle policies (common.Lifecycle) need of a
// DIJob, v1alpha1 and v2alpha1 alike: both are stored as v2alpha1, and a
// v1 job's status is its v2 status seen through v1alpha1.
func (c *Controller) lifecycle() *common.Lifecycle[*div2.DIJob] {
	return &common.Lifecycle[*div2.DIJob]{
		Spec: func(job *div2.DIJob) common.LifecycleSpec {
			l := &job.Spec.JobLifecycle
			out := common.LifecycleSpec{ActiveDeadlineSeconds: l.ActiveDeadlineSeconds, TTLSecondsAfterFinished: l.TTLSecondsAfterFinished}
			if l.Suspend != nil {
				out.Suspend = *l.Suspend
			}
			if l.ManagedBy != nil {
				out.ManagedBy = *l.ManagedBy
			}
			return out
		},
		Conditions: func(job *div2.DIJob) common.Conditions { return conditions{&job.Status} },
		Finished: func(job *div2.DIJob) *metav1.Time {
			if !finished(job.Status.Phase) {
				return nil
			}
			if t := job.Status.CompletionTimestamp; t != nil {
				return t
			}
			_, _, since := conditions{&job.Status}.Get(string(job.Status.Phase))
			return &since
		},
		Fail: func(job *div2.DIJob, reason, msg string, now metav1.Time) {
			job.Status.CompletionTimestamp = &now
			setPhase(&job.Status, div2.JobFailed, reason, msg, now, corev1.EventTypeWarning)
		},
		Suspended: func(job *div2.DIJob, pods []*corev1.Pod, now metav1.Time) {
			setPhase(&job.Status, div2.JobPending, common.ReasonSuspended, "the job is suspended: its pods are stopped", now, corev1.EventTypeNormal)
			var wanted []replica
			if job.CheckReplicas() == nil {
				wanted = replicasOf(job)
			}
			c.count(job, wanted, &job.Status, pods)
		},
	}
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
