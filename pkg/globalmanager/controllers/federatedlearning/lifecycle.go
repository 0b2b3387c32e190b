package federatedlearning

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// lifecycle is what the lifecycle policies (common.Lifecycle) need of a
// federated job.
func (c *Controller) lifecycle() *common.Lifecycle[*sednav1.FederatedLearningJob] {
	return &common.Lifecycle[*sednav1.FederatedLearningJob]{
		Release: func(ctx context.Context, j *sednav1.FederatedLearningJob) error {
			return c.deps.Gangs.Plan(j, jobKind, false).Release(ctx, c.children)
		},
		Spec: func(j *sednav1.FederatedLearningJob) common.LifecycleSpec {
			return common.SednaJobLifecycle(&j.Spec.JobLifecycle)
		},
		Conditions: func(j *sednav1.FederatedLearningJob) common.Conditions {
			return common.SednaConditions(j, &j.Status.Conditions)
		},
		Finished: func(j *sednav1.FederatedLearningJob) *metav1.Time {
			return common.FinishedAt(j.Status.Conditions, j.Status.CompletionTime, condComplete, condFailed)
		},
		Started: func(j *sednav1.FederatedLearningJob) *metav1.Time { return j.Status.StartTime },
		Fail:    fail,
		Suspended: func(j *sednav1.FederatedLearningJob, pods []*corev1.Pod, now metav1.Time) {
			status := &j.Status
			status.Phase = sednav1.FLJobPending
			status.Conditions = common.SetJobCondition(status.Conditions, common.JobConditionFor(j, condTraining, false, common.ReasonSuspended, "the job is suspended"), now)
			count(j, pods)
		},
	}
}

// fail fails the job with reason and message, as a failed worker does.
func fail(j *sednav1.FederatedLearningJob, reason, msg string, now metav1.Time) {
	status := &j.Status
	status.Phase = sednav1.FLJobFailed
	status.CompletionTime = &now
	status.Conditions = common.SetJobCondition(status.Conditions, common.JobConditionFor(j, condFailed, true, reason, msg), now)
	status.Conditions = common.SetJobCondition(status.Conditions, common.JobConditionFor(j, condTraining, false, "Failed", msg), now)
}

// count writes the job's pod counts of pods, and the generation they
// describe.
func count(j *sednav1.FederatedLearningJob, pods []*corev1.Pod) {
	status := &j.Status
	status.Active = podPhaseIs(pods, corev1.PodRunning) + podPhaseIs(pods, corev1.PodPending)
	status.Succeeded = podPhaseIs(pods, corev1.PodSucceeded)
	status.Failed = podPhaseIs(pods, corev1.PodFailed)
	status.ObservedGeneration = j.Generation
}
