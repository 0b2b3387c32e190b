package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// ConditionAdmitted is the type of a job's condition that says whether the
// ResourceQuotas of its namespace hold it: False while it waits (reason
// WaitingForQuota, or QuotaTooSmall when it would not fit even the empty
// quotas), True once admitted. A job in a namespace without
// quotas has none.
const ConditionAdmitted = "Admitted"

// Reasons of the Admitted condition and events.
const (
	// ReasonWaitingForQuota: the job, or the part of it it lacks, does not
	// fit the quotas now (or waits behind one that does not); nothing of
	// it is made.
	ReasonWaitingForQuota = "WaitingForQuota"
	// ReasonQuotaTooSmall: the job would not fit even the namespace's
	// empty quotas; it waits for a person to raise the quota or shrink
	// the job.
	ReasonQuotaTooSmall = "QuotaTooSmall"
	// ReasonQuotaAdmitted: every quota holds the job.
	ReasonQuotaAdmitted = "QuotaAdmitted"
	// ReasonNoQuota: the namespace has no quota any more.
	ReasonNoQuota = "NoQuota"
	// ReasonQuotaExceeded: the API server refused a pod for quota although
	// the job was admitted (another writer took the room, or the API
	// server charged what admission did not count); the pods made of it
	// were removed and the job waits whole.
	ReasonQuotaExceeded = "QuotaExceeded"
)

// Condition is the Admitted condition d calls for; ok is false when the job
// should have none (no quota, and it had none).
func (d Decision) Condition(had bool) (admitted bool, reason, message string, ok bool) {
	switch {
	case d.made:
		return true, ReasonQuotaAdmitted, d.Message, had
	case d.Admitted && d.Quotas:
		return true, ReasonQuotaAdmitted, d.Message, true
	case d.Admitted:
		return true, ReasonNoQuota, "the namespace has no ResourceQuota", had
	}
	if d.never {
		return false, ReasonQuotaTooSmall, d.Message, true
	}
	return false, ReasonWaitingForQuota, d.Message, true
}

// Events are what to record when a job's Admitted condition goes from
// (was, had says it existed) to admitted: a normal event when it starts
// waiting, and when it is admitted after waiting.
func Events(had, was, admitted bool, reason, message string) []common.Event {
	switch {
	case !admitted && (!had || was):
		eventType := corev1.EventTypeNormal
		if reason == ReasonQuotaTooSmall {
			eventType = corev1.EventTypeWarning // no room that frees up will do
		}
		return []common.Event{{Type: eventType, Reason: reason, Message: message}}
	case admitted && had && !was && reason == ReasonQuotaAdmitted:
		return []common.Event{{Type: corev1.EventTypeNormal, Reason: reason, Message: message}}
	}
	return nil
}

// SetJobCondition sets the Admitted condition of a sedna.io job to what d
// says and returns the events its change calls for.
func SetJobCondition(owner metav1.Object, conds []sednav1.JobCondition, d Decision, now metav1.Time) ([]sednav1.JobCondition, []common.Event) {
	old := common.FindJobCondition(conds, ConditionAdmitted)
	admitted, reason, message, ok := d.Condition(old != nil)
	if !ok {
		return conds, nil
	}
	var events []common.Event
	if old == nil {
		events = Events(false, false, admitted, reason, message)
	} else {
		events = Events(true, old.Status == corev1.ConditionTrue, admitted, reason, message)
	}
	return common.SetJobCondition(conds, common.JobConditionFor(owner, ConditionAdmitted, admitted, reason, message), now), events
}

// IsQuotaRefusal says whether err is the API server refusing an object
// because a ResourceQuota cannot hold it.
func IsQuotaRefusal(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	return apierrors.IsForbidden(err) && strings.Contains(status.Status().Message, "exceeded quota")
}

// CreatePods creates the pods of req's charge for its job, admitted, and
// ends the admission (Done). When the API server refuses one for quota,
// the ones made go again (Undo): it then returns none made and the
// warning to record.
func (m *Manager) CreatePods(ctx context.Context, children *common.Children, req Request) ([]*corev1.Pod, []common.Event, error) {
	defer m.Done(req.Kind, req.Key)
	made, err := children.CreatePods(ctx, req.Key, req.Owner, req.Charge.Pods)
	undone, undoErr := m.Undo(ctx, children, req.Kind, req.Key, req.Owner, made, err)
	if undone != nil {
		return nil, undone, errors.Join(err, undoErr)
	}
	return made, nil, err
}

// Undo removes the pods made of a job whose creation the API server
// refused for quota (createErr), so no part of it holds the quota while
// it waits, and puts the job back in its queue, not admitted again before a
// backoff (doubling from 5 s to 5 min with each refusal): a refusal that
// repeats (a mutating webhook adding requests admission cannot see) must
// not make and remove pods in a loop. It returns the warning to record; a
// creation that failed otherwise is left to the controller's retries.
func (m *Manager) Undo(ctx context.Context, children *common.Children, kind schema.GroupVersionKind, key string, owner common.Owner, made []*corev1.Pod, createErr error) ([]common.Event, error) {
	if !IsQuotaRefusal(createErr) {
		return nil, nil
	}
	wait := m.refused(kind, key)
	msg := fmt.Sprintf("the API server refused a pod: %v", createErr)
	if len(made) > 0 {
		msg += fmt.Sprintf("; removing the %d pods made of this request", len(made))
	}
	msg += fmt.Sprintf("; the job waits whole and asks again in %s", wait)
	return []common.Event{{Type: corev1.EventTypeWarning, Reason: ReasonQuotaExceeded, Message: msg}},
		children.DeletePods(ctx, key, owner, made, "the quota refused part of the job")
}
