package dijob

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// phase sets the phase of a job that runs (reconcile's last step) from what
// the sync saw and did, and returns the events to record: Pending while
// the quotas hold its new pods or the allocator finds no room for them,
// else as advance says.
func (sc *syncCtx) phase() []common.Event {
	missing := len(sc.wanted) - len(sc.current)
	if sc.waiting != "" {
		msg := fmt.Sprintf("%d of %d pods wait for quota: %s", missing, len(sc.wanted), sc.waiting)
		return append(sc.quotaEvents, setPhase(sc.status, div2.JobPending, admission.ReasonWaitingForQuota, msg, sc.now, corev1.EventTypeNormal)...)
	}
	if sc.noRoom != "" {
		msg := fmt.Sprintf("%d of %d pods wait for room: %s", missing, len(sc.wanted), sc.noRoom)
		events := setPhase(sc.status, div2.JobPending, "InsufficientResources", msg, sc.now, corev1.EventTypeWarning)
		// What is missing changed while the job stayed Pending: told too.
		if len(events) == 0 && conditionMessage(&sc.job.Status, div2.JobPending) != msg {
			events = []common.Event{{Type: corev1.EventTypeWarning, Reason: "InsufficientResources", Message: msg}}
		}
		return events
	}
	return append(sc.quotaEvents, sc.advance(missing)...)
}

// advance moves the phase of a job whose pods are current: Succeeded when
// its deciding tasks are done (done); Pending while pods are missing
// (Restarting, after a restart; Rescheduling, after a move); Starting
// while some are not running; Running. A pod an edge link holds counts as
// running.
func (sc *syncCtx) advance(missing int) []common.Event {
	status, now := sc.status, sc.now
	up := 0
	for _, p := range sc.current {
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || sc.isHeld[p.Name] {
			up++
		}
	}
	linkNote := ""
	if len(sc.holding) > 0 {
		linkNote = "; counted as running while their edge link is down: " + heldList(sc.holding)
	}
	switch {
	case done(sc.job, sc.wanted, sc.current):
		status.CompletionTimestamp = &now
		return setPhase(status, div2.JobSucceeded, "Succeeded", fmt.Sprintf("every pod of %s succeeded", deciders(sc.job)), now, corev1.EventTypeNormal)
	case missing > 0 && status.Phase == div2.JobRestarting:
		return setPhase(status, div2.JobRestarting, "PodFailed", conditionMessage(status, div2.JobRestarting), now, corev1.EventTypeWarning)
	case missing > 0 && status.Phase == div2.JobRescheduling:
		return setPhase(status, div2.JobRescheduling, "Moved", conditionMessage(status, div2.JobRescheduling), now, corev1.EventTypeNormal)
	case missing > 0:
		msg := fmt.Sprintf("%d of %d pods are not made yet", missing, len(sc.wanted))
		if sc.actErr != nil {
			msg += fmt.Sprintf("; retrying with backoff: %v", sc.actErr)
		}
		return setPhase(status, div2.JobPending, "CreatingPods", msg, now, corev1.EventTypeNormal)
	case up < len(sc.wanted):
		return setPhase(status, div2.JobStarting, "PodsStarting", fmt.Sprintf("%d of %d pods are running%s", up, len(sc.wanted), linkNote), now, corev1.EventTypeNormal)
	default:
		return setPhase(status, div2.JobRunning, "AllPodsRunning", fmt.Sprintf("all %d pods are running%s", len(sc.wanted), linkNote), now, corev1.EventTypeNormal)
	}
}

// decidingTasks are the tasks whose end is the job's: its learners and
// evaluators (collectors produce data for as long as the learner trains and
// are stopped, not finished), or every task of a job that has neither.
func decidingTasks(job *div2.DIJob) map[string]bool {
	deciding := map[string]bool{}
	for i := range job.Spec.Tasks {
		t := &job.Spec.Tasks[i]
		if t.Type == div2.TaskTypeLearner || t.Type == div2.TaskTypeEvaluator {
			deciding[t.TaskName()] = true
		}
	}
	if len(deciding) == 0 {
		for i := range job.Spec.Tasks {
			deciding[job.Spec.Tasks[i].TaskName()] = true
		}
	}
	return deciding
}

// done says whether every replica of the deciding tasks has a pod that succeeded.
func done(job *div2.DIJob, wanted []replica, current []*corev1.Pod) bool {
	deciding := decidingTasks(job)
	succeeded := map[string]bool{}
	for _, p := range current {
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded[p.Name] = true
		}
	}
	for _, r := range wanted {
		if deciding[r.taskName] && !succeeded[r.name] {
			return false
		}
	}
	return true
}

// deciders names the tasks that decide completion, for a message.
func deciders(job *div2.DIJob) string {
	var names []string
	for n := range decidingTasks(job) {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 1 {
		return "task " + names[0]
	}
	return fmt.Sprintf("tasks %v", names)
}
