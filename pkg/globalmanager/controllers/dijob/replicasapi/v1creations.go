package replicasapi

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// v1Note puts rep, the answer to a request for replicas (POST
// /v1alpha1/replicas, or the making of replacements for
// /replicas/failed), on the job as well: one refused for want of what
// makes them (a template, room, the AggregatorConfig, GPUs, or the API
// server's consent to a pod) is otherwise heard only by the coordinator.
// The job gets a Warning FailedCreate event saying why and its condition
// ReplicasCreated False (FailedCreate, the same words); once replicas are
// made again, ReplicasCreated True (SuccessfulCreate). Answers that a
// retry mends (429, 503) are not put on it.
func (s *Server) v1Note(ctx context.Context, job *div2alpha1.DIJob, rep *reply) *reply {
	switch {
	case rep == nil || rep.status == http.StatusTooManyRequests || rep.status == http.StatusServiceUnavailable:
	case rep.status == http.StatusOK:
		if c := replicasCreated(job); c != nil && c.Status != corev1.ConditionTrue {
			s.v1SetReplicasCreated(ctx, job, true, common.ReasonSuccessfulCreate, "replicas made again at the coordinator's request")
		}
	default:
		message := fmt.Sprintf("replicas the coordinator asked for were not made (%d): %s", rep.status, rep.message)
		if s.cfg.Recorder != nil {
			s.cfg.Recorder.Event(job, corev1.EventTypeWarning, common.ReasonFailedCreate, message)
		}
		s.v1SetReplicasCreated(ctx, job, false, common.ReasonFailedCreate, message)
	}
	return rep
}

// replicasCreated is job's ReplicasCreated condition, nil without one.
func replicasCreated(job *div2alpha1.DIJob) *div2alpha1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == div2alpha1.ConditionReplicasCreated {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// v1SetReplicasCreated writes job's ReplicasCreated condition (status
// created, reason, message), retrying on conflicts with the controller's
// writes; a failure is logged: the coordinator has its answer already.
func (s *Server) v1SetReplicasCreated(ctx context.Context, job *div2alpha1.DIJob, created bool, reason, message string) {
	now := metav1.NewTime(s.cfg.Clock.Now())
	want := div2alpha1.JobCondition{Type: div2alpha1.ConditionReplicasCreated, Status: corev1.ConditionFalse, Reason: reason, Message: message,
		LastUpdateTime: now, LastTransitionTime: now}
	if created {
		want.Status = corev1.ConditionTrue
	}
	attempt := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := s.latest(ctx, job, attempt)
		attempt++
		if err != nil || cur.UID != job.UID {
			return err
		}
		update := cur.DeepCopy()
		if c := replicasCreated(update); c != nil {
			if c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message {
				return nil
			}
			if c.Status == want.Status {
				want.LastTransitionTime = c.LastTransitionTime
			}
			*c = want
		} else {
			update.Status.Conditions = append(update.Status.Conditions, want)
		}
		_, err = s.cfg.DI.DiengineV2alpha1().DIJobs(cur.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot write the ReplicasCreated condition of a v1 DIJob", "dijob", klog.KObj(job), "message", message)
	}
}
