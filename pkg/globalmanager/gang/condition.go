package gang

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

// ConditionScheduled is the type of a job's condition that says whether its
// pods are placed: False while its gang waits (reason WaitingForGang) or
// while a pod cannot be placed (placement.ReasonUnschedulable: without a
// gang, when the scheduler gave up on it; in a gang, when its pinned node
// refuses it until a person acts); True once placed.
const ConditionScheduled = "Scheduled"

// Events are what to record when a job's Scheduled condition goes from
// (was, wasReason; had says it existed) to st: a warning when its
// annotations stop it or a pod of it cannot be placed (a person must act:
// the node, its taints, the template), a normal event when it starts
// waiting for its gang (every gang does, for a moment, when it is made)
// and when its gang is placed. A job without a gang hears nothing: its
// condition says so once.
func Events(had, was bool, wasReason string, st Status) []common.Event {
	if had && was == st.Scheduled && wasReason == st.Reason {
		return nil
	}
	switch st.Reason {
	case ReasonInvalidGangAnnotation, ReasonGangSchedulerUnavailable, placement.ReasonUnschedulable:
		return []common.Event{{Type: corev1.EventTypeWarning, Reason: st.Reason, Message: st.Message}}
	case ReasonWaitingForGang:
		return []common.Event{{Type: corev1.EventTypeNormal, Reason: st.Reason, Message: st.Message}}
	case ReasonGangScheduled:
		if !had || !was {
			return []common.Event{{Type: corev1.EventTypeNormal, Reason: st.Reason, Message: st.Message}}
		}
	}
	return nil
}

// SetJobCondition sets the Scheduled condition of a sedna.io job to st and
// returns the events its change calls for.
func SetJobCondition(owner metav1.Object, conds []sednav1.JobCondition, st Status, now metav1.Time) ([]sednav1.JobCondition, []common.Event) {
	old := common.FindJobCondition(conds, ConditionScheduled)
	var events []common.Event
	if old == nil {
		events = Events(false, false, "", st)
	} else {
		events = Events(true, old.Status == corev1.ConditionTrue, old.Reason, st)
	}
	return common.SetJobCondition(conds, common.JobConditionFor(owner, ConditionScheduled, st.Scheduled, st.Reason, st.Message), now), events
}

// ReasonPlaced is the reason of the Scheduled condition of a job whose
// pods are placed one by one, never as a gang (a learning cycle's stage
// and inference pods, a joint inference service's workers), once no pod
// of it is refused a place any more.
const ReasonPlaced = "Placed"

// Placement is the Scheduled condition of a job whose pods are placed one
// by one, never as a gang: Unschedulable, naming the pod, its node and
// why, while one of pods cannot be placed. A nil Manager reads no nodes.
func (m *Manager) Placement(pods []*corev1.Pod) Status {
	var nodes *placement.Nodes
	ctx := context.Background()
	if m != nil {
		nodes, ctx = m.nodes, m.context()
	}
	if says := nodes.Unplaced(ctx, pods); says != "" {
		return Status{Reason: placement.ReasonUnschedulable, Message: says}
	}
	return Status{Scheduled: true, Reason: ReasonPlaced, Message: "no pod of it is refused a place"}
}

// SetPlacementCondition sets the Scheduled condition of a sedna.io job
// whose pods are placed one by one (or of a JointInferenceService, whose
// conditions are JobConditions too) to st (Placement's) and returns the
// events its change calls for. A job none of whose pods was ever refused
// a place has no such condition: it would say nothing on every job.
func SetPlacementCondition(owner metav1.Object, conds []sednav1.JobCondition, st Status, now metav1.Time) ([]sednav1.JobCondition, []common.Event) {
	if !PlacementWorthSaying(st, common.FindJobCondition(conds, ConditionScheduled) != nil) {
		return conds, nil
	}
	return SetJobCondition(owner, conds, st, now)
}

// PlacementWorthSaying says whether the Scheduled condition of a job whose
// pods are placed one by one is set to st (Placement's), had telling
// whether the job has one: always once it has, else only when a pod is
// refused a place. A job none of whose pods was ever refused has none: it
// would say nothing on every job.
func PlacementWorthSaying(st Status, had bool) bool {
	return had || !st.Scheduled
}
