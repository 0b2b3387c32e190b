package jointinference

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// Condition types of a JointInferenceService, one entry each.
const (
	// condReferencesResolved: every Model the service names exists.
	// condWorkersCreated: the last attempt to make the children match the
	// spec succeeded; False carries the API server's refusal (a quota, say).
	condWorkersCreated = "WorkersCreated"
	// condReady: both Deployments have rolled out the current spec and have
	// every replica available.
	condReady = "Ready"
	// condFailed: a Deployment reports it cannot reach its spec. It appears
	// only once that has happened, and turns False when it clears.
	condFailed = "Failed"
	// Scheduled (gang.ConditionScheduled, set in placement.go): False while
	// a worker pod cannot be placed; it appears only once one could not.
)

func workersCreated(ji *sednav1.JointInferenceService, actErr error) sednav1.JobCondition {
	if actErr != nil {
		return common.JobConditionFor(ji, condWorkersCreated, false, "CreateFailed",
			fmt.Sprintf("the workers do not match the spec yet; retrying with backoff: %v", actErr))
	}
	return common.JobConditionFor(ji, condWorkersCreated, true, "AllCreated",
		"the edge and cloud Deployments, the cloud Service and the autoscalers asked for exist and match the spec")
}

// replacingAdopted is WorkersCreated while the children Sedna's GlobalManager
// left are being deleted; the service's own come once they are all gone.
func replacingAdopted(ji *sednav1.JointInferenceService, a common.Adopted, actErr error) sednav1.JobCondition {
	msg := fmt.Sprintf("waiting for %d Deployments, %d Services and %d autoscalers left by Sedna's GlobalManager to be deleted before creating the workers of the spec",
		len(a.Deployments), len(a.Services), len(a.HPAs))
	if actErr != nil {
		msg += fmt.Sprintf("; retrying with backoff: %v", actErr)
	}
	return common.JobConditionFor(ji, condWorkersCreated, false, "ReplacingSednaWorkers", msg)
}

// setStatusFromDeployments derives the counts and the Ready and Failed
// conditions from the Deployments' status, which the deployment controller
// keeps; the worker pods themselves are the Deployments' business. The
// counts mean:
//
//   - active: the available replicas of both Deployments, that is the worker
//     pods ready to serve (during a rollout, old-template pods included);
//   - failed: for each Deployment the deployment controller reports as failed
//     (its rollout passed the progress deadline, or it cannot create pods),
//     the replicas it asks for that are not available. A Deployment still
//     progressing counts none: pods being scheduled, pulled or restarted are
//     not failures yet, and a pod that crashes is restarted in place;
//   - edgeReady and cloudReady: each Deployment's available replicas of
//     those it asks for, "1/1" (while it does not exist, 0 of those it will
//     be made with).
//
// It returns the events of the transitions, to record after the write.
func (c *Controller) setStatusFromDeployments(ji *sednav1.JointInferenceService, status *sednav1.JointInferenceServiceStatus, deployments map[string]*appsv1.Deployment, now metav1.Time) []common.Event {
	var active, failed int32
	ready := true
	var readiness, failures []string
	failReason := ""
	readyOf := map[string]*string{roleEdge: &status.EdgeReady, roleCloud: &status.CloudReady}
	hpaOf := map[string]*sednav1.HPA{roleEdge: ji.Spec.EdgeWorker.HPA, roleCloud: ji.Spec.CloudWorker.HPA}
	for _, role := range []string{roleEdge, roleCloud} {
		name := workerName(ji, role)
		d, ok := deployments[name]
		if !ok || d.DeletionTimestamp != nil {
			ready = false
			readiness = append(readiness, fmt.Sprintf("%s worker: Deployment %s does not exist", role, name))
			*readyOf[role] = fmt.Sprintf("0/%d", initialReplicas(hpaOf[role]))
			continue
		}
		want := common.DeploymentReplicas(d)
		*readyOf[role] = fmt.Sprintf("%d/%d", d.Status.AvailableReplicas, want)
		active += d.Status.AvailableReplicas
		if !common.DeploymentAvailable(d) {
			ready = false
		}
		readiness = append(readiness, fmt.Sprintf("%s worker: %d of %d replicas available", role, d.Status.AvailableReplicas, want))
		if reason, msg, ok := common.DeploymentFailure(d); ok {
			failed += max(0, want-d.Status.AvailableReplicas)
			if failReason == "" {
				failReason = reason
			}
			failures = append(failures, fmt.Sprintf("Deployment %s: %s", name, msg))
		}
	}
	status.Active, status.Failed = active, failed

	var events []common.Event
	wasReady := common.IsJobConditionTrue(status.Conditions, condReady)
	readyMsg := strings.Join(readiness, "; ")
	if ready {
		status.Conditions = common.SetJobCondition(status.Conditions, common.AllWellUnlessLinkDown(ji, status.Conditions, condReady, "Available", readyMsg), now)
		if !wasReady {
			events = append(events, common.Event{Type: corev1.EventTypeNormal, Reason: "Ready", Message: "the edge and cloud workers are available: " + readyMsg})
		}
	} else {
		status.Conditions = common.SetJobCondition(status.Conditions, common.JobConditionFor(ji, condReady, false, "Unavailable", readyMsg), now)
	}

	wasFailed := common.IsJobConditionTrue(status.Conditions, condFailed)
	switch {
	case len(failures) > 0:
		msg := strings.Join(failures, "; ")
		status.Conditions = common.SetJobCondition(status.Conditions, common.JobConditionFor(ji, condFailed, true, failReason, msg), now)
		if !wasFailed {
			events = append(events, common.Event{Type: corev1.EventTypeWarning, Reason: "Failed", Message: msg})
		}
	case common.FindJobCondition(status.Conditions, condFailed) != nil:
		status.Conditions = common.SetJobCondition(status.Conditions,
			common.JobConditionFor(ji, condFailed, false, "Recovered", "no worker Deployment reports a failure"), now)
	}
	return events
}
