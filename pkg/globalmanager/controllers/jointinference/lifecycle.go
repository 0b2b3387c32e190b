package jointinference

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// lifecycle is what the lifecycle policies (common.Lifecycle) need of a
// service: it can be suspended and run by another controller; it never
// finishes, so it has no deadline and no TTL.
func lifecycle() *common.Lifecycle[*sednav1.JointInferenceService] {
	return &common.Lifecycle[*sednav1.JointInferenceService]{
		Spec: func(ji *sednav1.JointInferenceService) common.LifecycleSpec {
			return common.SednaServiceLifecycle(&ji.Spec.ServiceLifecycle)
		},
		Conditions: func(ji *sednav1.JointInferenceService) common.Conditions {
			return common.SednaConditions(ji, &ji.Status.Conditions)
		},
		// Its Deployments go while it is suspended: none of its workers
		// is available.
		Suspended: func(ji *sednav1.JointInferenceService, _ []*corev1.Pod, now metav1.Time) {
			status := &ji.Status
			status.Active, status.Failed = 0, 0
			status.EdgeReady, status.CloudReady = "0/0", "0/0"
			status.Conditions = common.SetJobCondition(status.Conditions, common.JobConditionFor(ji, condReady, false, common.ReasonSuspended, "the service is suspended"), now)
			status.ObservedGeneration = ji.Generation
		},
	}
}
