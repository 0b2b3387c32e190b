package conversion

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// v1 phases as v2alpha1 shows them: Created (the coordinator exists) is
// Starting; the others have the same name. A phase of neither list shows
// as Unknown.
var phaseToV2 = map[div1.Phase]div2.Phase{
	"":                "",
	div1.JobCreated:   div2.JobStarting,
	div1.JobRunning:   div2.JobRunning,
	div1.JobSucceeded: div2.JobSucceeded,
	div1.JobFailed:    div2.JobFailed,
	div1.JobUnknown:   div2.JobUnknown,
}

// v2 phases as v1alpha1 shows them: those before or between runs are
// Created.
var phaseToV1 = map[div2.Phase]div1.Phase{
	"":                   "",
	div2.JobPending:      div1.JobCreated,
	div2.JobStarting:     div1.JobCreated,
	div2.JobRestarting:   div1.JobCreated,
	div2.JobRescheduling: div1.JobCreated,
	div2.JobRunning:      div1.JobRunning,
	div2.JobSucceeded:    div1.JobSucceeded,
	div2.JobFailed:       div1.JobFailed,
	div2.JobUnknown:      div1.JobUnknown,
}

// V1StatusToV2 is a v1 job's status as its v2alpha1 object holds it, and
// as the operator writes it through the status subresource: the phase and
// conditions as their v2 phases (one-to-one on v1's phases: Created is
// Starting; EdgeLinked, Scheduled and ReplicasCreated stay as they are), and each
// replicaStatus entry as the task status of the lower-case replica type ("collector"), its active pods as Running.
// V1StatusOf reads it back unchanged.
func V1StatusToV2(in *div1.DIJobStatus) div2.DIJobStatus {
	out := div2.DIJobStatus{Phase: toV2Phase(in.Phase)}
	for _, c := range in.Conditions {
		out.Conditions = append(out.Conditions, div2.JobCondition{
			Type: conditionToV2(c.Type), Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastUpdateTime: c.LastUpdateTime, LastTransitionTime: c.LastTransitionTime,
		})
	}
	for t, r := range in.ReplicaStatus {
		if out.TaskStatus == nil {
			out.TaskStatus = map[string]div2.TaskStatus{}
		}
		var counts div1.ReplicaStatus
		if r != nil {
			counts = *r
		}
		out.TaskStatus[TaskStatusKey(t)] = div2.TaskStatus{
			corev1.PodRunning: counts.Active, corev1.PodSucceeded: counts.Succeeded, corev1.PodFailed: counts.Failed,
		}
	}
	return out
}

// V1StatusOf is the v1 status of a v1 job, from its v2alpha1 status: the
// inverse of V1StatusToV2. Whatever else the v2 status holds (a v2 client
// wrote it) is not shown; ToV1 stashes it.
func V1StatusOf(in *div2.DIJobStatus) div1.DIJobStatus {
	out := statusToV1(in)
	for _, t := range replicaTypes {
		counts, ok := in.TaskStatus[TaskStatusKey(t)]
		if !ok {
			continue
		}
		if out.ReplicaStatus == nil {
			out.ReplicaStatus = map[div1.ReplicaType]*div1.ReplicaStatus{}
		}
		out.ReplicaStatus[t] = &div1.ReplicaStatus{
			Active: counts[corev1.PodRunning], Succeeded: counts[corev1.PodSucceeded], Failed: counts[corev1.PodFailed],
		}
	}
	return out
}

// replicaTypes are the keys of a v1 replicaStatus.
var replicaTypes = []div1.ReplicaType{
	div1.ReplicaTypeCoordinator, div1.ReplicaTypeCollector, div1.ReplicaTypeLearner, div1.ReplicaTypeAggregator,
}

// TaskStatusKey is the key of a v1 replica type's counts in a v1 job's
// status.taskStatus: the type in lower case, as the replica-type label
// spells it ("coordinator", "collector", "learner", "aggregator").
func TaskStatusKey(t div1.ReplicaType) string { return strings.ToLower(string(t)) }

// statusToV1 is how v1alpha1 shows a v2 job's status: its phase, the
// conditions about phases, EdgeLinked, Scheduled, ReplicasCreated and
// Suspended; the status itself
// travels in AnnotationV2.
func statusToV1(in *div2.DIJobStatus) div1.DIJobStatus {
	out := div1.DIJobStatus{Phase: toV1Phase(in.Phase)}
	for _, c := range in.Conditions {
		p, ok := V1ConditionType(c.Type)
		if !ok {
			continue // Admitted: v1 has none
		}
		out.Conditions = append(out.Conditions, div1.DIJobCondition{
			Type: p, Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastUpdateTime: c.LastUpdateTime, LastTransitionTime: c.LastTransitionTime,
		})
	}
	return out
}

// sameInV1 are the condition types that are no phase and v1alpha1 shows
// as they are.
var sameInV1 = map[div2.ConditionType]div1.Phase{
	div2.ConditionEdgeLinked:      div1.ConditionEdgeLinked,
	div2.ConditionScheduled:       div1.ConditionScheduled,
	div2.ConditionReplicasCreated: div1.ConditionReplicasCreated,
	div2.ConditionSuspended:       div1.ConditionSuspended,
}

// conditionToV2 is the v2 type of a v1 condition: its phase's, but
// EdgeLinked, Scheduled, ReplicasCreated and Suspended, which are no
// phase, as they are.
func conditionToV2(t div1.Phase) div2.ConditionType {
	for v2, v1 := range sameInV1 {
		if v1 == t {
			return v2
		}
	}
	return div2.ConditionType(toV2Phase(t))
}

// V1Phase is a v2 phase as v1alpha1 shows it (Starting is Created).
func V1Phase(p div2.Phase) div1.Phase { return toV1Phase(p) }

// V1ConditionType is the type v1alpha1 shows a v2 condition as (a phase's
// by its v1 name: Starting is Created; EdgeLinked, Scheduled,
// ReplicasCreated and Suspended as they are), and false for one v1alpha1 has not
// (Admitted).
func V1ConditionType(t div2.ConditionType) (div1.Phase, bool) {
	if same, ok := sameInV1[t]; ok {
		return same, true
	}
	p, ok := phaseToV1[div2.Phase(t)]
	return p, ok && p != ""
}

func toV2Phase(p div1.Phase) div2.Phase {
	if q, ok := phaseToV2[p]; ok {
		return q
	}
	return div2.JobUnknown
}

func toV1Phase(p div2.Phase) div1.Phase {
	if q, ok := phaseToV1[p]; ok {
		return q
	}
	return div1.JobUnknown
}
