package view

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

// waitingConditions are the conditions that, False, say what a job lacks,
// in the order a job gets past them: the objects it names, room in its
// namespace's quotas, its gang placed, its edge nodes' links.
var waitingConditions = []string{
	common.ConditionReferencesResolved,
	admission.ConditionAdmitted,
	gang.ConditionScheduled,
	links.ConditionEdgeLinked,
}

// waiting says what an unfinished job lacks: the first of waitingConditions
// that is False ("<reason>: <message>"), else why its pods are not
// scheduled (their PodScheduled condition); "" when it lacks nothing.
func waiting(conds []Condition, pods []*corev1.Pod) string {
	for _, t := range waitingConditions {
		i := slices.IndexFunc(conds, func(c Condition) bool { return c.Type == t })
		if i < 0 || conds[i].Status != string(corev1.ConditionFalse) {
			continue
		}
		return strings.TrimPrefix(conds[i].Reason+": "+conds[i].Message, ": ")
	}
	return unscheduled(pods)
}

// unscheduled says why the first of pods (by name) the scheduler could not
// place is not placed, and how many others are not; "" when all are.
func unscheduled(pods []*corev1.Pod) string {
	var names []string
	why := map[string]string{}
	for _, p := range pods {
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				names = append(names, p.Name)
				why[p.Name] = strings.TrimPrefix(c.Reason+": "+c.Message, ": ")
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	s := fmt.Sprintf("pod %s %s", names[0], why[names[0]])
	if len(names) > 1 {
		s += fmt.Sprintf(" (and %d more pods unscheduled)", len(names)-1)
	}
	return s
}
