package dijob

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

func scheduledCondition(t *testing.T, status *div2.DIJobStatus) div2.JobCondition {
	t.Helper()
	var found []div2.JobCondition
	for _, c := range status.Conditions {
		if c.Type == div2.ConditionScheduled {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d Scheduled conditions in %+v; want one", len(found), status.Conditions)
	}
	return found[0]
}

// The phase conditions and Scheduled are apart: a phase never turns
// Scheduled False, and Scheduled never changes the phase.
func TestSetPhaseLeavesScheduledAlone(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	var status div2.DIJobStatus
	setPhase(&status, div2.JobPending, "Created", "made", t0, corev1.EventTypeNormal)
	setScheduled(&status, gang.Status{Scheduled: true, Reason: gang.ReasonGangScheduled, Message: "all 3 pods are placed"}, t0)
	setPhase(&status, div2.JobRunning, "Running", "all run", t1, corev1.EventTypeNormal)

	if status.Phase != div2.JobRunning || status.Reason != "Running" {
		t.Errorf("phase %s reason %q, want Running with its condition's reason (kubectl get's REASON)", status.Phase, status.Reason)
	}
	c := scheduledCondition(t, &status)
	if c.Status != corev1.ConditionTrue || c.LastTransitionTime != t0 {
		t.Errorf("Scheduled after a phase change: %+v; want True since %v", c, t0)
	}
	for _, c := range status.Conditions {
		if c.Type == div2.ConditionType(div2.JobPending) && c.Status != corev1.ConditionFalse {
			t.Errorf("Pending after Running: %s, want False", c.Status)
		}
	}
}

func TestSetScheduledEventsOnChangesOnly(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	t2 := metav1.NewTime(t0.Add(2 * time.Minute))
	waiting := gang.Status{Reason: gang.ReasonWaitingForGang, Message: "0 of 3 pods are placed"}
	var status div2.DIJobStatus

	events := setScheduled(&status, waiting, t0)
	if len(events) != 1 || events[0].Type != corev1.EventTypeNormal || events[0].Reason != gang.ReasonWaitingForGang {
		t.Errorf("events when a job starts waiting: %+v; want one normal WaitingForGang event", events)
	}
	if c := scheduledCondition(t, &status); c.Status != corev1.ConditionFalse || c.Reason != gang.ReasonWaitingForGang || c.Message != waiting.Message {
		t.Errorf("condition while waiting: %+v", c)
	}

	if events := setScheduled(&status, waiting, t1); len(events) != 0 {
		t.Errorf("events when nothing changed: %+v; want none", events)
	}
	if c := scheduledCondition(t, &status); c.LastUpdateTime != t0 {
		t.Errorf("an unchanged condition was rewritten at %v", c.LastUpdateTime)
	}

	// Still waiting, with news: the message changes, the transition stays, no new event.
	more := gang.Status{Reason: gang.ReasonWaitingForGang, Message: "1 of 3 pods are placed"}
	if events := setScheduled(&status, more, t1); len(events) != 0 {
		t.Errorf("events when only the message changed: %+v; want none", events)
	}
	if c := scheduledCondition(t, &status); c.Message != more.Message || c.LastTransitionTime != t0 || c.LastUpdateTime != t1 {
		t.Errorf("condition after a new message: %+v; want the message, transition %v, update %v", c, t0, t1)
	}

	placed := gang.Status{Scheduled: true, Reason: gang.ReasonGangScheduled, Message: "all 3 pods are placed"}
	events = setScheduled(&status, placed, t2)
	if len(events) != 1 || events[0].Type != corev1.EventTypeNormal || events[0].Reason != gang.ReasonGangScheduled {
		t.Errorf("events when the gang is placed: %+v; want one GangScheduled", events)
	}
	if c := scheduledCondition(t, &status); c.Status != corev1.ConditionTrue || c.LastTransitionTime != t2 {
		t.Errorf("condition once placed: %+v; want True since %v", c, t2)
	}
}

// Without a gang scheduler the condition says so, and nothing else does.
func TestSetScheduledWithoutAGangSaysSoOnce(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	var status div2.DIJobStatus
	for i := range 3 {
		st := gang.Status{Scheduled: i > 0, Reason: gang.ReasonNoGangScheduler, Message: "the cluster serves no gang scheduling API"}
		if events := setScheduled(&status, st, now); len(events) != 0 {
			t.Errorf("sync %d: events %+v; want none", i, events)
		}
	}
	if c := scheduledCondition(t, &status); c.Reason != gang.ReasonNoGangScheduler || c.Status != corev1.ConditionTrue {
		t.Errorf("condition: %+v", c)
	}
}

func TestSpentBackoffSaysWhatTheLimitAllowed(t *testing.T) {
	for _, tc := range []struct {
		restarts, limit int32
		want            string
	}{
		{0, 0, "pod a failed; its backoffLimit is 0: the job does not restart"},
		{3, 3, "pod a failed; the job restarted 3 times, as many as its backoffLimit (3) allows"},
	} {
		if got := spentBackoff("pod a failed", tc.restarts, tc.limit); got != tc.want {
			t.Errorf("spentBackoff(%d, %d) = %q, want %q", tc.restarts, tc.limit, got, tc.want)
		}
	}
}

// TestAPhaseLeftNoLongerSaysWhatHeldInIt: a Failed job's Running condition
// does not still say its pods are running.
func TestAPhaseLeftNoLongerSaysWhatHeldInIt(t *testing.T) {
	now := metav1.Now()
	status := &div2.DIJobStatus{}
	setPhase(status, div2.JobRunning, "AllPodsRunning", "all 3 pods are running", now, corev1.EventTypeNormal)
	setPhase(status, div2.JobFailed, "BackoffLimitExceeded", "pod a failed", now, corev1.EventTypeWarning)
	for _, c := range status.Conditions {
		if c.Type == div2.ConditionType(div2.JobRunning) && (c.Status != corev1.ConditionFalse || c.Message != "the job left this phase for Failed; it said: all 3 pods are running") {
			t.Errorf("Running condition %+v, want False saying the job left it", c)
		}
	}
}
