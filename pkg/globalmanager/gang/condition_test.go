package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

func TestEventsOnlyOnTransitions(t *testing.T) {
	waiting := Status{Reason: ReasonWaitingForGang, Message: "0 of 3 pods are placed"}
	placed := Status{Scheduled: true, Reason: ReasonGangScheduled, Message: "all 3 pods are placed"}
	invalid := Status{Reason: ReasonInvalidGangAnnotation, Message: "annotation nereid.io/gang-scheduler: ..."}
	unavailable := Status{Reason: ReasonGangSchedulerUnavailable, Message: "annotation nereid.io/gang-scheduler asks for volcano"}
	noGang := Status{Scheduled: true, Reason: ReasonNoGangScheduler, Message: "the cluster serves no gang scheduling API"}
	off := Status{Reason: ReasonGangSchedulingOff, Message: "--gang-scheduler=none"}
	unplaceable := Status{Reason: placement.ReasonUnschedulable, Message: "pod w-0 is pinned to node edge-9, which does not exist"}
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
		"a pod without a gang cannot be placed":             {had: true, was: true, wasReason: ReasonGangSchedulingOff, st: unplaceable, want: warning(unplaceable)},
		"it still cannot, another message":                  {had: true, wasReason: placement.ReasonUnschedulable, st: Status{Reason: placement.ReasonUnschedulable, Message: "pod w-0 cannot be placed; the scheduler says: 0/4"}},
		"placed at last":                                    {had: true, wasReason: placement.ReasonUnschedulable, st: Status{Scheduled: true, Reason: ReasonGangSchedulingOff}},
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

// TestPlacementConditionAppearsOnlyOnceAPodIsRefused: a job whose pods are
// placed one by one has no Scheduled condition until a pod of it cannot be
// placed; then it warns once, and says Placed when the pod is.
func TestPlacementConditionAppearsOnlyOnceAPodIsRefused(t *testing.T) {
	job := newJob(nil, nil)
	now := metav1.NewTime(time.Unix(1000, 0))
	refused := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-train-0"}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available"}}}}
	placedPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "j-train-0"}, Spec: corev1.PodSpec{NodeName: "edge-0"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	var m *Manager // reads no nodes: what the scheduler wrote is enough here
	conds, events := SetPlacementCondition(job, nil, m.Placement([]*corev1.Pod{placedPod}), now)
	if len(conds) != 0 || len(events) != 0 {
		t.Fatalf("placed at once: conditions %+v, events %+v; want none", conds, events)
	}
	conds, events = SetPlacementCondition(job, conds, m.Placement([]*corev1.Pod{refused}), now)
	c := common.FindJobCondition(conds, ConditionScheduled)
	want := "pod j-train-0 cannot be placed; the scheduler says: 0/3 nodes are available"
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != placement.ReasonUnschedulable || c.Message != want || len(events) != 1 || events[0].Type != corev1.EventTypeWarning {
		t.Fatalf("refused: condition %+v, events %+v; want Unschedulable %q and one warning", c, events, want)
	}
	if _, events = SetPlacementCondition(job, conds, m.Placement([]*corev1.Pod{refused}), now); len(events) != 0 {
		t.Errorf("still refused: events %+v, want none", events)
	}
	conds, _ = SetPlacementCondition(job, conds, m.Placement([]*corev1.Pod{placedPod}), now)
	if c := common.FindJobCondition(conds, ConditionScheduled); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonPlaced {
		t.Errorf("placed: condition %+v, want True %s", c, ReasonPlaced)
	}
}
