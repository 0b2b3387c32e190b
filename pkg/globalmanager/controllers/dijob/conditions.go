package dijob

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

// setPhase sets the job's phase and, as DI-orchestrator does, its
// conditions: one per phase, the current one True and every other False.
// Times move only when something changed, so a sync that changes nothing
// writes nothing. It returns the event to record when the phase changed.
func setPhase(status *div2.DIJobStatus, phase div2.Phase, reason, message string, now metav1.Time, eventType string) []common.Event {
	old := status.Phase
	status.Phase, status.Reason = phase, reason
	found := false
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if !isPhase(c.Type) {
			continue // not a phase
		}
		if c.Type == div2.ConditionType(phase) {
			found = true
			if c.Status != corev1.ConditionTrue {
				c.LastTransitionTime = now
			}
			if c.Status != corev1.ConditionTrue || c.Reason != reason || c.Message != message {
				c.Status, c.Reason, c.Message, c.LastUpdateTime = corev1.ConditionTrue, reason, message, now
			}
			continue
		}
		if c.Status == corev1.ConditionTrue {
			// What it said held in that phase, not now ("all 3 pods are
			// running" on a failed job would mislead): kept, as what it said.
			c.Status, c.LastTransitionTime, c.LastUpdateTime = corev1.ConditionFalse, now, now
			c.Message = "the job left this phase for " + string(phase) + "; it said: " + c.Message
		}
	}
	if !found {
		status.Conditions = append(status.Conditions, div2.JobCondition{
			Type: div2.ConditionType(phase), Status: corev1.ConditionTrue, Reason: reason, Message: message,
			LastUpdateTime: now, LastTransitionTime: now,
		})
	}
	if old == phase {
		return nil
	}
	return []common.Event{{Type: eventType, Reason: string(phase), Message: message}}
}

// isPhase says whether a condition of type t is a phase's, rather than
// Scheduled, Admitted, EdgeLinked or Suspended, which setPhase leaves as
// they are.
func isPhase(t div2.ConditionType) bool {
	return t != div2.ConditionScheduled && t != div2.ConditionAdmitted && t != div2.ConditionEdgeLinked && t != div2.ConditionSuspended
}

// conditionMessage is the message of the condition of a phase, "" without one.
func conditionMessage(status *div2.DIJobStatus, phase div2.Phase) string {
	for _, c := range status.Conditions {
		if c.Type == div2.ConditionType(phase) {
			return c.Message
		}
	}
	return ""
}

// setScheduled sets the job's Scheduled condition to what its gang says,
// and returns the events its change calls for.
func setScheduled(status *div2.DIJobStatus, st gang.Status, now metav1.Time) []common.Event {
	return setCondition(status, div2.ConditionScheduled, st.Scheduled, st.Reason, st.Message, now, func(had, was bool, wasReason string) []common.Event {
		return gang.Events(had, was, wasReason, st)
	})
}

// setPlacement sets the Scheduled condition of a job whose pods are placed
// one by one (a v1 job's) to st (gang.Manager.Placement's) and returns the
// events its change calls for. A job none of whose pods was ever refused
// a place has no such condition (gang.PlacementWorthSaying).
func setPlacement(status *div2.DIJobStatus, st gang.Status, now metav1.Time) []common.Event {
	had := slices.ContainsFunc(status.Conditions, func(c div2.JobCondition) bool { return c.Type == div2.ConditionScheduled })
	if !gang.PlacementWorthSaying(st, had) {
		return nil
	}
	return setScheduled(status, st, now)
}

// setAdmitted sets the job's Admitted condition to what the quotas' admission
// says, and returns the events its change calls for.
func setAdmitted(status *div2.DIJobStatus, d admission.Decision, now metav1.Time) []common.Event {
	had := slices.ContainsFunc(status.Conditions, func(c div2.JobCondition) bool { return c.Type == div2.ConditionAdmitted })
	admitted, reason, message, ok := d.Condition(had)
	if !ok {
		return nil
	}
	return setCondition(status, div2.ConditionAdmitted, admitted, reason, message, now, func(had, was bool, _ string) []common.Event {
		return admission.Events(had, was, admitted, reason, message)
	})
}

// setCondition sets a condition that is not a phase to (ok, reason,
// message) and returns the events events says its change calls for, given
// whether it existed, was True, and with which reason.
func setCondition(status *div2.DIJobStatus, t div2.ConditionType, ok bool, reason, message string, now metav1.Time, events func(had, was bool, wasReason string) []common.Event) []common.Event {
	cond := div2.JobCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: message,
		LastUpdateTime: now, LastTransitionTime: now}
	if ok {
		cond.Status = corev1.ConditionTrue
	}
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != t {
			continue
		}
		ev := events(true, c.Status == corev1.ConditionTrue, c.Reason)
		if c.Status == cond.Status && c.Reason == cond.Reason && c.Message == cond.Message {
			return ev
		}
		if c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
		*c = cond
		return ev
	}
	status.Conditions = append(status.Conditions, cond)
	return events(false, false, "")
}
