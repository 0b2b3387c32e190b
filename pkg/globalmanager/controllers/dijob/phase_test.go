package dijob

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// phaseOutcome is what the phase step leaves in status, and the events it
// calls for ("<type> <reason>").
type phaseOutcome struct {
	Phase     div2.Phase
	Reason    string
	Message   string
	Completed bool
	Events    []string
}

// phaseCase is what a sync saw and did, and the phase it sets.
type phaseCase struct {
	current     []*corev1.Pod // the pods of wanted replicas, after act
	holding     []held        // pods an edge link holds
	was         div2.Phase    // the phase in status, with its condition
	wasMessage  string
	waiting     string // the quotas hold the new pods
	noRoom      string // the allocator found no room
	quotaEvents []common.Event
	actErr      error

	want phaseOutcome
}

func phaseCases(t *testing.T, job *div2.DIJob) map[string]phaseCase {
	in := func(phases map[string]corev1.PodPhase) []*corev1.Pod {
		var out []*corev1.Pod
		for _, name := range exampleReplicas {
			if phase, ok := phases[name]; ok {
				out = append(out, replicaPod(t, job, name, phase))
			}
		}
		return out
	}
	running := map[string]corev1.PodPhase{learner0: corev1.PodRunning, collector0: corev1.PodRunning, collector1: corev1.PodRunning, evaluator0: corev1.PodRunning}
	with := func(name string, phase corev1.PodPhase) map[string]corev1.PodPhase {
		out := map[string]corev1.PodPhase{}
		for k, v := range running {
			out[k] = v
		}
		if phase == "" {
			delete(out, name)
		} else {
			out[name] = phase
		}
		return out
	}
	until := time.Unix(1600, 0)
	restartMsg := "pod cartpole-dqn-collector-0 failed; every pod is made again (restart 1 of 3)"
	moveMsg := "the allocator moves the job to a better placement (move 1); every pod is made again"
	pendingMsg := "4 of 4 pods wait for room: replica 2 needs cpu 500m"
	return map[string]phaseCase{
		"every pod running": {
			current: in(running),
			want:    phaseOutcome{Phase: div2.JobRunning, Reason: "AllPodsRunning", Message: "all 4 pods are running", Events: []string{"Normal Running"}},
		},
		"a pod not running yet": {
			current: in(with(collector1, corev1.PodPending)),
			want:    phaseOutcome{Phase: div2.JobStarting, Reason: "PodsStarting", Message: "3 of 4 pods are running", Events: []string{"Normal Starting"}},
		},
		"a pod an edge link holds counts as running": {
			current: in(with(collector1, corev1.PodUnknown)),
			holding: []held{{pod: collector1, node: "edge-1", until: until}},
			want: phaseOutcome{Phase: div2.JobRunning, Reason: "AllPodsRunning",
				Message: "all 4 pods are running; counted as running while their edge link is down: " + collector1 + " on edge-1 (held until 1970-01-01T00:26:40Z)",
				Events:  []string{"Normal Running"}},
		},
		"a pod missing": {
			current: in(with(evaluator0, "")),
			want:    phaseOutcome{Phase: div2.JobPending, Reason: "CreatingPods", Message: "1 of 4 pods are not made yet", Events: []string{"Normal Pending"}},
		},
		"a pod missing after a failed creation": {
			current: in(with(evaluator0, "")), actErr: errors.New("the API server is away"),
			want: phaseOutcome{Phase: div2.JobPending, Reason: "CreatingPods", Message: "1 of 4 pods are not made yet; retrying with backoff: the API server is away", Events: []string{"Normal Pending"}},
		},
		"pods missing after a restart: Restarting, as it said": {
			current: in(with(collector0, "")), was: div2.JobRestarting, wasMessage: restartMsg,
			want: phaseOutcome{Phase: div2.JobRestarting, Reason: "PodFailed", Message: restartMsg},
		},
		"pods missing in a move: Rescheduling, as it said": {
			current: in(with(collector0, "")), was: div2.JobRescheduling, wasMessage: moveMsg,
			want: phaseOutcome{Phase: div2.JobRescheduling, Reason: "Moved", Message: moveMsg},
		},
		"the learner and the evaluator succeeded": {
			current: in(map[string]corev1.PodPhase{learner0: corev1.PodSucceeded, collector0: corev1.PodRunning, collector1: corev1.PodFailed, evaluator0: corev1.PodSucceeded}),
			want: phaseOutcome{Phase: div2.JobSucceeded, Reason: "Succeeded", Message: "every pod of tasks [evaluator learner] succeeded", Completed: true,
				Events: []string{"Normal Succeeded"}},
		},
		"the quotas hold the new pods": {
			waiting: "exceeded quota: compute", quotaEvents: []common.Event{{Type: corev1.EventTypeNormal, Reason: admission.ReasonWaitingForQuota}},
			want: phaseOutcome{Phase: div2.JobPending, Reason: admission.ReasonWaitingForQuota, Message: "4 of 4 pods wait for quota: exceeded quota: compute",
				Events: []string{"Normal " + admission.ReasonWaitingForQuota, "Normal Pending"}},
		},
		"no room for the new pods": {
			noRoom: "replica 2 needs cpu 500m",
			want:   phaseOutcome{Phase: div2.JobPending, Reason: "InsufficientResources", Message: pendingMsg, Events: []string{"Warning Pending"}},
		},
		"still no room, for another reason: told again": {
			noRoom: "replica 2 needs cpu 500m", was: div2.JobPending, wasMessage: "4 of 4 pods wait for room: replica 0 needs cpu 1",
			want: phaseOutcome{Phase: div2.JobPending, Reason: "InsufficientResources", Message: pendingMsg, Events: []string{"Warning InsufficientResources"}},
		},
		"still no room, as before: nothing to tell": {
			noRoom: "replica 2 needs cpu 500m", was: div2.JobPending, wasMessage: pendingMsg,
			want: phaseOutcome{Phase: div2.JobPending, Reason: "InsufficientResources", Message: pendingMsg},
		},
		"quota events come first": {
			current: in(running), quotaEvents: []common.Event{{Type: corev1.EventTypeNormal, Reason: "Admitted"}},
			want: phaseOutcome{Phase: div2.JobRunning, Reason: "AllPodsRunning", Message: "all 4 pods are running", Events: []string{"Normal Admitted", "Normal Running"}},
		},
	}
}

func TestPhase(t *testing.T) {
	job := exampleJob(t)
	cases := phaseCases(t, job)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := job.DeepCopy()
			if tc.was != "" {
				job.Status.Phase = tc.was
				job.Status.Conditions = []div2.JobCondition{{Type: div2.ConditionType(tc.was), Status: corev1.ConditionTrue, Message: tc.wasMessage}}
			}
			sc := observed(t, job, nil, true)
			sc.current, sc.holding = tc.current, tc.holding
			for _, h := range tc.holding {
				sc.isHeld[h.pod] = true
			}
			sc.waiting, sc.noRoom, sc.quotaEvents, sc.actErr = tc.waiting, tc.noRoom, tc.quotaEvents, tc.actErr

			events := sc.phase()
			got := phaseOutcome{Phase: sc.status.Phase, Reason: sc.status.Reason, Message: conditionMessage(sc.status, sc.status.Phase),
				Completed: sc.status.CompletionTimestamp != nil}
			for _, e := range events {
				got.Events = append(got.Events, e.Type+" "+e.Reason)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("phase (-want,+got):\n%s", diff)
			}
			if sc.status.CompletionTimestamp != nil && !sc.status.CompletionTimestamp.Equal(&sc.now) {
				t.Errorf("completed at %s, want the sync's time %s", sc.status.CompletionTimestamp, sc.now)
			}
		})
	}
}
