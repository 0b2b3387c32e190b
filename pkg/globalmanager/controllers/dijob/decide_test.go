package dijob

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// The example job's replicas, in spec order.
const (
	learner0   = "cartpole-dqn-learner-0"
	collector0 = "cartpole-dqn-collector-0"
	collector1 = "cartpole-dqn-collector-1"
	evaluator0 = "cartpole-dqn-evaluator-0"
	// collector2 is a replica the example job does not want: scaled down.
	collector2 = "cartpole-dqn-collector-2"
)

var exampleReplicas = []string{learner0, collector0, collector1, evaluator0}

// replicaPod is the pod named name of the collector, learner or evaluator
// task of job, of the task's current template, in phase; edits change it.
func replicaPod(t *testing.T, job *div2.DIJob, name string, phase corev1.PodPhase, edits ...func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	hashes, err := taskHashes(job)
	if err != nil {
		t.Fatal(err)
	}
	task := ""
	for _, tn := range []string{"learner", "collector", "evaluator"} {
		for rank := range 3 {
			if PodName(job.Name, tn, rank) == name {
				task = tn
			}
		}
	}
	if task == "" {
		t.Fatalf("%s is no replica's name", name)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{LabelTaskName: task, common.LabelTemplateHash: hashes[task]}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, edit := range edits {
		edit(p)
	}
	return p
}

// Edits of replicaPod.
var (
	ofAnOlderTemplate = func(p *corev1.Pod) { p.Labels[common.LabelTemplateHash] = "older" }
	beingDeleted      = func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Unix(900, 0)) }
)

func markedWith(annotation, n string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Annotations = common.MergeLabels(p.Annotations, map[string]string{annotation: n})
	}
}

// podsIn are pods of the example job's replicas, each in phase.
func podsIn(t *testing.T, job *div2.DIJob, phase corev1.PodPhase) []*corev1.Pod {
	var out []*corev1.Pod
	for _, name := range exampleReplicas {
		out = append(out, replicaPod(t, job, name, phase))
	}
	return out
}

// observed is a syncCtx of job with pods, as observe leaves it (no edge
// link holds a pod).
func observed(t *testing.T, job *div2.DIJob, pods []*corev1.Pod, satisfied bool) *syncCtx {
	t.Helper()
	hashes, err := taskHashes(job)
	if err != nil {
		t.Fatal(err)
	}
	sc := &syncCtx{
		key: ns + "/" + job.Name, job: job, status: job.Status.DeepCopy(), now: metav1.Unix(1000, 0),
		wanted: replicasOf(job), pods: pods, satisfied: satisfied, hashes: hashes,
	}
	sc.sortPods(func(*corev1.Pod) (held, bool) { return held{}, false })
	return sc
}

func podNames(pods []*corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func replicaNames(rs []replica) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.name)
	}
	slices.Sort(out)
	return out
}

func TestSortPods(t *testing.T) {
	job := exampleJob(t)
	pods := []*corev1.Pod{
		replicaPod(t, job, learner0, corev1.PodRunning),
		replicaPod(t, job, collector0, corev1.PodFailed),
		replicaPod(t, job, collector1, corev1.PodUnknown),
		replicaPod(t, job, evaluator0, corev1.PodFailed, beingDeleted),
		replicaPod(t, job, collector2, corev1.PodFailed),
	}
	for name, tc := range map[string]struct {
		held       string // the node of the pod an edge link holds
		wantLive   []string
		wantFailed string
		wantHeld   []string
	}{
		"no link down: the first failed pod": {
			wantLive: []string{collector0, collector1, collector2, learner0}, wantFailed: collector0, wantHeld: []string{},
		},
		"a held failed pod is not the failure": {
			held:     collector0,
			wantLive: []string{collector0, collector1, collector2, learner0}, wantFailed: collector2, wantHeld: []string{collector0},
		},
	} {
		t.Run(name, func(t *testing.T) {
			sc := &syncCtx{job: job, pods: pods}
			asked := map[string]bool{}
			sc.sortPods(func(p *corev1.Pod) (held, bool) {
				asked[p.Name] = true
				return held{pod: p.Name}, p.Name == tc.held
			})
			if diff := cmp.Diff(tc.wantLive, podNames(sc.live)); diff != "" {
				t.Errorf("live (-want,+got):\n%s", diff)
			}
			gotFailed := ""
			if sc.failed != nil {
				gotFailed = sc.failed.Name
			}
			if gotFailed != tc.wantFailed {
				t.Errorf("failed %q, want %q", gotFailed, tc.wantFailed)
			}
			gotHeld := []string{}
			for _, h := range sc.holding {
				gotHeld = append(gotHeld, h.pod)
				if !sc.isHeld[h.pod] {
					t.Errorf("%s is held but not in isHeld", h.pod)
				}
			}
			if diff := cmp.Diff(tc.wantHeld, gotHeld); diff != "" {
				t.Errorf("held (-want,+got):\n%s", diff)
			}
			// Only a live failed or unknown pod may be an edge link's doing.
			if want := map[string]bool{collector0: true, collector1: true, collector2: true}; !cmp.Equal(want, asked) {
				t.Errorf("links asked about %v, want %v", asked, want)
			}
		})
	}
}

// decideCase is a job's pods, phase and expectations, what the allocator
// says, and what decide makes of them.
type decideCase struct {
	pods        []*corev1.Pod
	phase       div2.Phase // the job's phase in status
	unsatisfied bool
	moveChosen  bool // what startMove says

	want        verdict
	wantAsked   bool // startMove was asked
	wantMove    int32
	wantCurrent []string
	wantStale   []string
	wantExtra   []string
	wantMissing []string
}

func decideCases(t *testing.T, job *div2.DIJob) map[string]decideCase {
	pod := func(name string, phase corev1.PodPhase, edits ...func(*corev1.Pod)) *corev1.Pod {
		return replicaPod(t, job, name, phase, edits...)
	}
	none := []string{}
	return map[string]decideCase{
		"a new job: every replica is missing": {
			want: decideRun, wantAsked: true,
			wantCurrent: none, wantStale: none, wantExtra: none, wantMissing: []string{collector0, collector1, evaluator0, learner0},
		},
		"pods of an older template, being deleted, and scaled down": {
			pods: []*corev1.Pod{
				pod(learner0, corev1.PodRunning), pod(collector0, corev1.PodRunning, ofAnOlderTemplate),
				pod(collector1, corev1.PodRunning, beingDeleted), pod(collector2, corev1.PodRunning),
			},
			want: decideRun, wantAsked: true,
			// collector-1 is made again once it is gone: neither current nor missing.
			wantCurrent: []string{learner0}, wantStale: []string{collector0}, wantExtra: []string{collector2}, wantMissing: []string{evaluator0},
		},
		"a failed pod restarts the job": {
			pods: []*corev1.Pod{
				pod(learner0, corev1.PodRunning), pod(collector0, corev1.PodFailed),
				pod(collector1, corev1.PodRunning), pod(evaluator0, corev1.PodRunning),
			},
			want: decideRestart, wantAsked: true,
			wantCurrent: exampleSorted(), wantStale: none, wantExtra: none, wantMissing: none,
		},
		"a failed pod of a job whose learner and evaluator succeeded restarts nothing": {
			pods: []*corev1.Pod{
				pod(learner0, corev1.PodSucceeded), pod(collector0, corev1.PodFailed),
				pod(collector1, corev1.PodRunning), pod(evaluator0, corev1.PodSucceeded),
			},
			want: decideRun, wantAsked: true,
			wantCurrent: exampleSorted(), wantStale: none, wantExtra: none, wantMissing: none,
		},
		"a move the cache does not show yet waits, whatever the pods": {
			pods:  []*corev1.Pod{pod(learner0, corev1.PodFailed)},
			phase: div2.JobRescheduling, unsatisfied: true,
			want: decideWait,
		},
		"a pod marked for a move moves the job, before the cache is satisfied": {
			pods:        []*corev1.Pod{pod(learner0, corev1.PodRunning), pod(collector0, corev1.PodRunning, markedWith(AnnotationMove, "2"))},
			unsatisfied: true,
			want:        decideMove, wantMove: 2,
		},
		"the allocator chose a new placement": {
			pods:       podsIn(t, job, corev1.PodRunning),
			moveChosen: true,
			want:       decideMove, wantAsked: true,
		},
		"an unsatisfied sync leaves the allocator's choice for later": {
			pods:        podsIn(t, job, corev1.PodRunning),
			unsatisfied: true, moveChosen: true,
			want:        decideRun,
			wantCurrent: exampleSorted(), wantStale: none, wantExtra: none, wantMissing: none,
		},
	}
}

func TestDecide(t *testing.T) {
	job := exampleJob(t)
	cases := decideCases(t, job)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc := observed(t, job, tc.pods, !tc.unsatisfied)
			sc.status.Phase = tc.phase
			asked := false
			got := sc.decide(func() bool {
				asked = true
				return tc.moveChosen
			})
			if got != tc.want {
				t.Errorf("decide = %d, want %d", got, tc.want)
			}
			if asked != tc.wantAsked {
				t.Errorf("startMove asked: %v, want %v", asked, tc.wantAsked)
			}
			if got == decideMove && sc.moveN != tc.wantMove {
				t.Errorf("move %d, want %d", sc.moveN, tc.wantMove)
			}
			if tc.want != decideRun && tc.want != decideRestart {
				if sc.current != nil || sc.missing != nil || sc.stale != nil || sc.extra != nil {
					t.Errorf("a wait or a move sorted the replicas: current %v missing %v", podNames(sc.current), replicaNames(sc.missing))
				}
				return
			}
			for what, diff := range map[string]string{
				"current": cmp.Diff(tc.wantCurrent, podNames(sc.current)),
				"stale":   cmp.Diff(tc.wantStale, podNames(sc.stale)),
				"extra":   cmp.Diff(tc.wantExtra, podNames(sc.extra)),
				"missing": cmp.Diff(tc.wantMissing, replicaNames(sc.missing)),
			} {
				if diff != "" {
					t.Errorf("%s (-want,+got):\n%s", what, diff)
				}
			}
		})
	}
}

// exampleSorted are the example job's replicas, sorted by name.
func exampleSorted() []string {
	return slices.Sorted(slices.Values(exampleReplicas))
}

func TestPlanRestart(t *testing.T) {
	job := exampleJob(t)
	restarting := func(since time.Duration) []div2.JobCondition {
		return []div2.JobCondition{{Type: div2.ConditionType(div2.JobRestarting), Status: corev1.ConditionFalse,
			LastTransitionTime: metav1.NewTime(time.Unix(1000, 0).Add(-since))}}
	}
	cases := map[string]struct {
		mark         string // the failed pod's AnnotationRestart
		restarts     int32
		conditions   []div2.JobCondition
		backoffLimit *int32
		unsatisfied  bool

		want     restartStep
		wantN    int32
		wantWait time.Duration
	}{
		"the first failure is marked restart 1": {want: restartMarks, wantN: 1},
		"an unmarked failure waits for the cache": {
			unsatisfied: true, want: restartWaits,
		},
		"an unmarked failure past the backoff limit fails the job": {
			restarts: 3, want: restartFails,
		},
		"a backoffLimit of 0 fails the job at the first failure": {
			backoffLimit: ptr.To[int32](0), want: restartFails,
		},
		"the second restart waits out its backoff": {
			restarts: 1, conditions: restarting(4 * time.Second), want: restartBacksOff, wantWait: 6 * time.Second,
		},
		"the second restart past its backoff is marked": {
			restarts: 1, conditions: restarting(10 * time.Second), want: restartMarks, wantN: 2,
		},
		"a marked failure is counted, before the cache is satisfied": {
			mark: "2", restarts: 1, unsatisfied: true, want: restartCounts, wantN: 2,
		},
		"a counted failure waits for the cache": {
			mark: "2", restarts: 2, unsatisfied: true, want: restartWaits, wantN: 2,
		},
		"a counted failure deletes every pod": {
			mark: "2", restarts: 2, want: restartDeletes, wantN: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := job.DeepCopy()
			job.Spec.BackoffLimit = tc.backoffLimit
			var edits []func(*corev1.Pod)
			if tc.mark != "" {
				edits = append(edits, markedWith(AnnotationRestart, tc.mark))
			}
			pods := podsIn(t, job, corev1.PodRunning)
			pods[1] = replicaPod(t, job, collector0, corev1.PodFailed, edits...)
			sc := observed(t, job, pods, !tc.unsatisfied)
			sc.status.Restarts, sc.status.Conditions = tc.restarts, tc.conditions
			step, n, wait := sc.planRestart()
			if step != tc.want || n != tc.wantN || wait != tc.wantWait {
				t.Errorf("planRestart = (%d, %d, %s), want (%d, %d, %s)", step, n, wait, tc.want, tc.wantN, tc.wantWait)
			}
		})
	}
}

func TestPlanMove(t *testing.T) {
	job := exampleJob(t)
	cases := map[string]struct {
		live        bool  // the job has live pods
		mark        int32 // the move a live pod is marked for
		reschedules int32
		unsatisfied bool

		want  moveStep
		wantN int32
	}{
		"no pod to move": {want: moveWaits},
		"a pod is marked with the next move": {
			live: true, reschedules: 1, want: moveMarks, wantN: 2,
		},
		"a marked move is counted, before the cache is satisfied": {
			live: true, mark: 2, reschedules: 1, unsatisfied: true, want: moveCounts, wantN: 2,
		},
		"a counted move waits for the cache": {
			live: true, mark: 2, reschedules: 2, unsatisfied: true, want: moveWaits, wantN: 2,
		},
		"a counted move deletes every pod": {
			live: true, mark: 2, reschedules: 2, want: moveDeletes, wantN: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var pods []*corev1.Pod
			if tc.live {
				pods = podsIn(t, job, corev1.PodRunning)
			}
			sc := observed(t, job, pods, !tc.unsatisfied)
			sc.moveN, sc.moveMarked = tc.mark, tc.mark > 0
			sc.status.Reschedules = tc.reschedules
			if step, n := sc.planMove(); step != tc.want || n != tc.wantN {
				t.Errorf("planMove = (%d, %d), want (%d, %d)", step, n, tc.want, tc.wantN)
			}
		})
	}
}
