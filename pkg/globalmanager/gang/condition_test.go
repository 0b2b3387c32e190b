package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

func TestEventsOnlyOnTransitions(t *testing.T) {
	waiting := Status{Reason: ReasonWaitingForGang, Message: "0 of 3 pods are placed"}
	placed := Status{Scheduled: true, Reason: ReasonGangScheduled, Message: "all 3 pods are placed"}
	invalid := Status{Reason: ReasonInvalidGangAnnotation, Message: "annotation nereid.io/gang-scheduler: ..."}
	unavailable := Status{Reason: ReasonGangSchedulerUnavailable, Message: "annotation nereid.io/gang-scheduler asks for volcano"}
	noGang := Status{Scheduled: true, Reason: ReasonNoGangScheduler, Message: "the cluster serves no gang scheduling API"}
	off := Status{Reason: ReasonGangSchedulingOff, Message: "--gang-scheduler=none"}
	warning := func(st Status) []common.Event {
		return []common.Event{{Type: corev1.EventTypeWarning, Reason: st.Reason, Message: st.Message}}
	}
	normal := func(st Status) []common.Event {
		return []common.Event{{Type: corev1.EventTypeNormal, Reason: st.Reason, Message: st.Message}}
	}
	for name, tc := range map[string]struct {
		had, was  bool
		wasReason string
		st        Status
		want      []common.Event
	}{
		"starts waiting":                 {st: waiting, want: normal(waiting)},
		"still waiting, another message": {had: true, wasReason: ReasonWaitingForGang, st: Status{Reason: ReasonWaitingForGang, Message: "1 of 3"}},
		"placed":                         {had: true, wasReason: ReasonWaitingForGang, st: placed, want: normal(placed)},
		"placed at once":                 {st: placed, want: normal(placed)},
		"still placed":                   {had: true, was: true, wasReason: ReasonGangScheduled, st: placed},
		"a gang where pods were already placed without one": {had: true, was: true, wasReason: ReasonNoGangScheduler, st: placed},
		"waits again after being placed":                    {had: true, was: true, wasReason: ReasonGangScheduled, st: waiting, want: normal(waiting)},
		"an invalid annotation":                             {had: true, was: true, wasReason: ReasonGangScheduled, st: invalid, want: warning(invalid)},
		"the invalid annotation stays":                      {had: true, wasReason: ReasonInvalidGangAnnotation, st: invalid},
		"an unserved scheduler":                             {st: unavailable, want: warning(unavailable)},
		"from an invalid annotation to waiting":             {had: true, wasReason: ReasonInvalidGangAnnotation, st: waiting, want: normal(waiting)},
		"no gang scheduler is said only by the condition":   {st: noGang},
		"gang scheduling off":                               {had: true, wasReason: ReasonWaitingForGang, st: off},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Events(tc.had, tc.was, tc.wasReason, tc.st)); diff != "" {
				t.Errorf("Events (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSetJobConditionWaitsThenSchedules walks a job's Scheduled condition
// through a gang's life: a normal event once when it starts waiting, nothing
// while it waits, the normal event once when it is placed.
func TestSetJobConditionWaitsThenSchedules(t *testing.T) {
	job := newJob(nil, nil)
	other := sednav1.JobCondition{Type: "Training", Status: corev1.ConditionFalse, Reason: "Pending"}
	conds := []sednav1.JobCondition{other}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

	steps := []struct {
		name       string
		st         Status
		wantStatus corev1.ConditionStatus
		wantEvent  string // "Type Reason", "" for none
		// wantTransition is when the condition last changed status.
		wantTransition metav1.Time
	}{
		{name: "waiting", st: Status{Reason: ReasonWaitingForGang, Message: "0 of 3 pods are placed"},
			wantStatus: corev1.ConditionFalse, wantEvent: "Normal WaitingForGang", wantTransition: at(0)},
		{name: "same again", st: Status{Reason: ReasonWaitingForGang, Message: "0 of 3 pods are placed"},
			wantStatus: corev1.ConditionFalse, wantTransition: at(0)},
		{name: "one placed", st: Status{Reason: ReasonWaitingForGang, Message: "1 of 3 pods are placed"},
			wantStatus: corev1.ConditionFalse, wantTransition: at(0)},
		{name: "placed", st: Status{Scheduled: true, Reason: ReasonGangScheduled, Message: "all 3 pods are placed"},
			wantStatus: corev1.ConditionTrue, wantEvent: "Normal GangScheduled", wantTransition: at(3 * time.Minute)},
		{name: "still placed", st: Status{Scheduled: true, Reason: ReasonGangScheduled, Message: "all 3 pods are placed"},
			wantStatus: corev1.ConditionTrue, wantTransition: at(3 * time.Minute)},
	}
	for i, step := range steps {
		var events []common.Event
		conds, events = SetJobCondition(job, conds, step.st, at(time.Duration(i)*time.Minute))
		c := common.FindJobCondition(conds, ConditionScheduled)
		if c == nil {
			t.Fatalf("%s: no %s condition in %+v", step.name, ConditionScheduled, conds)
		}
		want := sednav1.JobCondition{
			Type: ConditionScheduled, Status: step.wantStatus, Reason: step.st.Reason, Message: step.st.Message,
			ObservedGeneration: job.Generation, LastTransitionTime: step.wantTransition,
		}
		if diff := cmp.Diff(want, *c, cmpIgnoreHeartbeat); diff != "" {
			t.Errorf("%s: condition (-want,+got):\n%s", step.name, diff)
		}
		var got string
		if len(events) > 1 {
			t.Errorf("%s: events %+v, want at most one", step.name, events)
		}
		if len(events) == 1 {
			got = events[0].Type + " " + events[0].Reason
			if events[0].Message != step.st.Message {
				t.Errorf("%s: event message %q, want the condition's %q", step.name, events[0].Message, step.st.Message)
			}
		}
		if got != step.wantEvent {
			t.Errorf("%s: event %q, want %q", step.name, got, step.wantEvent)
		}
		if len(conds) != 2 || conds[0] != other {
			t.Errorf("%s: conditions %+v, want the other condition kept and one %s", step.name, conds, ConditionScheduled)
		}
	}
}

func TestSetJobConditionWithoutAGangSaysSoOnce(t *testing.T) {
	job := newJob(nil, nil)
	st := Status{Scheduled: true, Reason: ReasonNoGangScheduler, Message: "the cluster serves no gang scheduling API"}
	conds, events := SetJobCondition(job, nil, st, metav1.Now())
	if len(events) != 0 {
		t.Errorf("events %+v, want none: the condition says it", events)
	}
	if c := common.FindJobCondition(conds, ConditionScheduled); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonNoGangScheduler {
		t.Errorf("condition %+v, want True with reason %s", c, ReasonNoGangScheduler)
	}
}

var cmpIgnoreHeartbeat = cmp.Transformer("noHeartbeat", func(c sednav1.JobCondition) sednav1.JobCondition {
	c.LastHeartbeatTime = metav1.Time{}
	return c
})
