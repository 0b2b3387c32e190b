package conversion

import (
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

// statusToV2 is how v2alpha1 shows a v1 job's status; the status itself
// travels in AnnotationV1.
func statusToV2(in *div1.DIJobStatus) div2.DIJobStatus {
	out := div2.DIJobStatus{Phase: toV2Phase(in.Phase)}
	for _, c := range in.Conditions {
		out.Conditions = append(out.Conditions, div2.JobCondition{
			Type: div2.ConditionType(toV2Phase(c.Type)), Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastUpdateTime: c.LastUpdateTime, LastTransitionTime: c.LastTransitionTime,
		})
	}
	return out
}

// statusToV1 is how v1alpha1 shows a v2 job's status: its phase and the
// conditions about phases; the status itself travels in AnnotationV2.
func statusToV1(in *div2.DIJobStatus) div1.DIJobStatus {
	out := div1.DIJobStatus{Phase: toV1Phase(in.Phase)}
	for _, c := range in.Conditions {
		p, ok := phaseToV1[div2.Phase(c.Type)]
		if !ok || p == "" {
			continue // Scheduled, Admitted: v1 has none
		}
		out.Conditions = append(out.Conditions, div1.DIJobCondition{
			Type: p, Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastUpdateTime: c.LastUpdateTime, LastTransitionTime: c.LastTransitionTime,
		})
	}
	return out
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

// isZeroStatus says whether a v1 status says nothing.
func isZeroStatus(s *div1.DIJobStatus) bool {
	return s.Phase == "" && len(s.Conditions) == 0 && len(s.ReplicaStatus) == 0
}
