package replicasapi

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

func TestGetReplicasListsLiveReplicasInRankOrder(t *testing.T) {
	// Ranks are the pods' own (diengine/rank, their DI_RANK): a learner
	// added by a later scale comes after the collectors, not at its place
	// in the spec. Failed and deleting pods are no replicas.
	job := newJob(testJob, newTask(div2alpha1.TaskTypeLearner, "", 2), newTask(div2alpha1.TaskTypeCollector, "", 4))
	other := newJob("other")
	learner := newPod(job, "learner", 0, 0, "10.0.0.1")
	collector0 := newPod(job, "collector", 0, 1, "10.0.0.2")
	collector1 := newPod(job, "collector", 1, 2, "10.0.0.3")
	collector1.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9000}, {Name: portName, ContainerPort: 3333}}
	collector2 := newPod(job, "collector", 2, 3, "") // not placed yet
	ipv6 := newPod(job, "collector", 3, 4, "fd00::5")
	scaledLearner := newPod(job, "learner", 1, 8, "10.0.0.10")

	failed := newPod(job, "collector", 4, 5, "10.0.0.6")
	failed.Status.Phase = corev1.PodFailed
	deleting := newPod(job, "collector", 5, 6, "10.0.0.7")
	deleting.DeletionTimestamp = &metav1.Time{}
	// Labelled with the job's name but another job's child (owner-uid label
	// and controller).
	impostor := newPod(other, "collector", 9, 7, "10.0.0.8")
	impostor.Labels[labelJob] = job.Name
	noRank := newPod(job, "collector", 7, 0, "10.0.0.9")
	delete(noRank.Annotations, "diengine/rank")

	// Seeded out of order: the answer is ordered by rank, not by cache.
	f := newFixture(t, Config{}, job, other, scaledLearner, ipv6, collector2, failed, collector1, impostor, learner, deleting, noRank, collector0)
	a := f.do(http.MethodGet, replicasPath(testJob), "admin", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET replicas: %d %q", a.status, a.raw)
	}
	want := []any{
		"10.0.0.1:22270",
		"10.0.0.2:22270",
		"10.0.0.3:3333",
		"cartpole-collector-2.di-cartpole.rl.svc:22270",
		"[fd00::5]:22270",
		"10.0.0.10:22270",
	}
	if diff := cmp.Diff(want, a.body.Data); diff != "" {
		t.Errorf("GET replicas data (-want,+got):\n%s", diff)
	}
	if a.body.Message != "successfully get replicas" {
		t.Errorf("message %q, want DI's %q", a.body.Message, "successfully get replicas")
	}
}

func TestGetReplicasOfAJobWithoutPodsIsAnEmptyList(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob))
	a := f.do(http.MethodGet, replicasPath(testJob), "admin", "")
	if a.status != http.StatusOK || !strings.Contains(a.raw, `"data":[]`) {
		t.Errorf("GET replicas of a job without pods: %d %s, want 200 with data []", a.status, a.raw)
	}
}

func TestGetReplicasAnswersOnlyPodsTheJobControls(t *testing.T) {
	// Labelled as the job's child, and named as its collector, but
	// controlled by another job: no replica (nor a worker, isWorkerOf).
	job := newJob(testJob, newTask(div2alpha1.TaskTypeLearner, "", 1), newTask(div2alpha1.TaskTypeCollector, "", 1))
	other := newJob("other")
	learner := newPod(job, "learner", 0, 0, "10.0.0.1")
	foreign := newPod(job, "collector", 0, 1, "10.0.0.2")
	foreign.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, div2alpha1.DIJobKind)}
	f := newFixture(t, Config{}, job, other, learner, foreign)
	a := f.do(http.MethodGet, replicasPath(testJob), "admin", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET replicas: %d %q", a.status, a.raw)
	}
	if diff := cmp.Diff([]any{"10.0.0.1:22270"}, a.body.Data); diff != "" {
		t.Errorf("GET replicas data (-want,+got):\n%s", diff)
	}
}

// scaleCase is a request to scale a job's replicas, and its answer and
// effect.
type scaleCase struct {
	tasks       []div2alpha1.Task
	change      func(*div2alpha1.DIJob)
	method      string
	body        string
	wantStatus  int
	wantMessage string // a part of it
	// wantReplicas are the tasks' replicas after the request, by name.
	wantReplicas map[string]int32
	wantData     []any
}

func scaleCases() map[string]scaleCase {
	cases := scaleTaskCases()
	maps.Copy(cases, scaleRefusedCases())
	return cases
}

// scaleTaskCases: which task a request scales, and the caps on replicas.
func scaleTaskCases() map[string]scaleCase {
	return map[string]scaleCase{
		"POST adds to the collector task by default": {
			method: http.MethodPost, body: `{"replicas": 2}`,
			wantStatus: http.StatusOK, wantMessage: "successfully add replicas",
			wantReplicas: map[string]int32{"learner": 1, "collector": 5},
			wantData:     []any{"cartpole-collector-0", "cartpole-collector-1", "cartpole-collector-2", "cartpole-collector-3", "cartpole-collector-4"},
		},
		"POST adds to the named task": {
			method: http.MethodPost, body: `{"replicas": 1, "task": "learner"}`,
			wantStatus:   http.StatusOK,
			wantReplicas: map[string]int32{"learner": 2, "collector": 3},
			wantData:     []any{"cartpole-learner-0", "cartpole-learner-1"},
		},
		"POST names a task by its name, not its type": {
			tasks:  []div2alpha1.Task{newTask(div2alpha1.TaskTypeLearner, "", 1), newTask(div2alpha1.TaskTypeNone, "env", 2)},
			method: http.MethodPost, body: `{"replicas": 1, "task": "env"}`,
			wantStatus:   http.StatusOK,
			wantReplicas: map[string]int32{"learner": 1, "env": 3},
			wantData:     []any{"cartpole-env-0", "cartpole-env-1", "cartpole-env-2"},
		},
		"POST takes the default of a task without replicas as 1": {
			tasks:  []div2alpha1.Task{newTask(div2alpha1.TaskTypeCollector, "", 0)},
			method: http.MethodPost, body: `{"replicas": 1}`,
			wantStatus:   http.StatusOK,
			wantReplicas: map[string]int32{"collector": 2},
			wantData:     []any{"cartpole-collector-0", "cartpole-collector-1"},
		},
		"DELETE removes from the collector task": {
			method: http.MethodDelete, body: `{"replicas": 2}`,
			wantStatus: http.StatusOK, wantMessage: "successfully delete replicas",
			wantReplicas: map[string]int32{"learner": 1, "collector": 1},
			wantData:     []any{"cartpole-collector-0"},
		},
		"DELETE below one replica is refused": {
			method: http.MethodDelete, body: `{"replicas": 3}`,
			wantStatus: http.StatusConflict, wantMessage: "a task keeps at least 1",
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"DELETE of the only learner is refused": {
			method: http.MethodDelete, body: `{"replicas": 1, "task": "learner"}`,
			wantStatus: http.StatusConflict, wantMessage: "a task keeps at least 1",
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"POST past the cap is refused": {
			tasks:  []div2alpha1.Task{newTask(div2alpha1.TaskTypeCollector, "", 1000)},
			method: http.MethodPost, body: `{"replicas": 25}`,
			wantStatus: http.StatusConflict, wantMessage: "over the limit of 1024 per task",
			wantReplicas: map[string]int32{"collector": 1000},
		},
		"POST up to the cap is taken": {
			tasks:  []div2alpha1.Task{newTask(div2alpha1.TaskTypeCollector, "", 1000)},
			method: http.MethodPost, body: `{"replicas": 24}`,
			wantStatus:   http.StatusOK,
			wantReplicas: map[string]int32{"collector": 1024},
		},
		"POST past the job's cap, every task's together, is refused": {
			tasks:  []div2alpha1.Task{newTask(div2alpha1.TaskTypeLearner, "", 1), newTask(div2alpha1.TaskTypeCollector, "", 1000)},
			method: http.MethodPost, body: `{"replicas": 24}`,
			wantStatus: http.StatusConflict, wantMessage: "more than the 1024 a job may run",
			wantReplicas: map[string]int32{"learner": 1, "collector": 1000},
		},
		"no collector and no task named": {
			tasks:  []div2alpha1.Task{newTask(div2alpha1.TaskTypeLearner, "", 1)},
			method: http.MethodPost, body: `{"replicas": 1}`,
			wantStatus: http.StatusBadRequest, wantMessage: "has no collector task",
			wantReplicas: map[string]int32{"learner": 1},
		},
		"unknown task": {
			method: http.MethodPost, body: `{"replicas": 1, "task": "evaluator"}`,
			wantStatus: http.StatusBadRequest, wantMessage: `has no task "evaluator"; its tasks are learner, collector`,
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"task that is not a name": {
			method: http.MethodPost, body: `{"replicas": 1, "task": "../collector"}`,
			wantStatus: http.StatusBadRequest, wantMessage: `"task" must be the name`,
		},
	}
}

// scaleRefusedCases: bodies that are no request, and jobs that may not scale.
func scaleRefusedCases() map[string]scaleCase {
	return map[string]scaleCase{
		"zero replicas": {
			method: http.MethodPost, body: `{"replicas": 0}`,
			wantStatus: http.StatusBadRequest, wantMessage: `"replicas" must be between 1 and 1024, not 0`,
		},
		"negative replicas": {
			method: http.MethodDelete, body: `{"replicas": -2}`,
			wantStatus: http.StatusBadRequest, wantMessage: "not -2",
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"huge replicas": {
			method: http.MethodPost, body: `{"replicas": 4294967298}`,
			wantStatus: http.StatusBadRequest, wantMessage: "between 1 and 1024",
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"replicas past int64": {
			method: http.MethodPost, body: `{"replicas": 100000000000000000000000}`,
			wantStatus: http.StatusBadRequest, wantMessage: "not valid",
		},
		"fractional replicas": {
			method: http.MethodPost, body: `{"replicas": 1.5}`,
			wantStatus: http.StatusBadRequest,
		},
		"replicas as a string": {
			method: http.MethodPost, body: `{"replicas": "2"}`,
			wantStatus: http.StatusBadRequest,
		},
		"no replicas": {
			method: http.MethodPost, body: `{"task": "collector"}`,
			wantStatus: http.StatusBadRequest, wantMessage: `needs "replicas"`,
		},
		"unknown field": {
			method: http.MethodPost, body: `{"replicas": 1, "collectors": 5}`,
			wantStatus: http.StatusBadRequest, wantMessage: `unknown field "collectors"`,
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"data after the object": {
			method: http.MethodPost, body: `{"replicas": 1} {"replicas": 1}`,
			wantStatus: http.StatusBadRequest, wantMessage: "after the JSON object",
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"empty body": {
			method: http.MethodPost, body: ``,
			wantStatus: http.StatusBadRequest, wantMessage: "empty",
		},
		"not JSON": {
			method: http.MethodPost, body: `replicas=1`,
			wantStatus: http.StatusBadRequest,
		},
		"JSON that is not an object": {
			method: http.MethodPost, body: `[1]`,
			wantStatus: http.StatusBadRequest,
		},
		"finished job": {
			change: func(j *div2alpha1.DIJob) { j.Status.Phase = div2alpha1.JobSucceeded },
			method: http.MethodPost, body: `{"replicas": 1}`,
			wantStatus: http.StatusConflict, wantMessage: "has finished (Succeeded)",
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"job being deleted": {
			change: func(j *div2alpha1.DIJob) { j.DeletionTimestamp = &metav1.Time{} },
			method: http.MethodPost, body: `{"replicas": 1}`,
			wantStatus: http.StatusConflict, wantMessage: "is being deleted",
		},
		"preemptible job": {
			change: func(j *div2alpha1.DIJob) { j.Spec.Preemptible = true },
			method: http.MethodPost, body: `{"replicas": 1}`,
			wantStatus: http.StatusConflict, wantMessage: "the allocator sets its replicas",
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
		"v1alpha1 job": {
			change: func(j *div2alpha1.DIJob) {
				j.Annotations = map[string]string{conversion.AnnotationV1: "{}"}
			},
			method: http.MethodPost, body: `{"replicas": 1}`,
			wantStatus: http.StatusConflict, wantMessage: "is a v1alpha1 job: its coordinator asks the v1 replicas server",
			wantReplicas: map[string]int32{"learner": 1, "collector": 3},
		},
	}
}

func TestScaleReplicas(t *testing.T) {
	learnerCollector := []div2alpha1.Task{newTask(div2alpha1.TaskTypeLearner, "", 1), newTask(div2alpha1.TaskTypeCollector, "", 3)}
	cases := scaleCases()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tasks := tc.tasks
			if tasks == nil {
				tasks = learnerCollector
			}
			job := newJob(testJob, tasks...)
			if tc.change != nil {
				tc.change(job)
			}
			f := newFixture(t, Config{}, job)
			a := f.do(tc.method, replicasPath(testJob), "admin", tc.body)
			if a.status != tc.wantStatus {
				t.Fatalf("%s %s: status %d (%q), want %d", tc.method, tc.body, a.status, a.body.Message, tc.wantStatus)
			}
			if !strings.Contains(a.body.Message, tc.wantMessage) {
				t.Errorf("message %q, want it to contain %q", a.body.Message, tc.wantMessage)
			}
			if tc.wantData != nil {
				if diff := cmp.Diff(tc.wantData, a.body.Data); diff != "" {
					t.Errorf("data (-want,+got):\n%s", diff)
				}
			}
			if tc.wantReplicas != nil {
				got := map[string]int32{}
				for _, task := range f.job(testJob).Spec.Tasks {
					got[task.TaskName()] = task.Replicas
				}
				if diff := cmp.Diff(tc.wantReplicas, got); diff != "" {
					t.Errorf("replicas after the request (-want,+got):\n%s", diff)
				}
			}
			if a.status != http.StatusOK {
				for _, act := range f.di.Actions() {
					if act.GetVerb() == "update" {
						t.Errorf("a refused request wrote the job: %v", act)
					}
				}
			}
		})
	}
}

func TestScaleRetriesOnConflict(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob))
	// Someone else changes the job between the cache and the write: the
	// first update is refused as a conflict.
	conflicts := 0
	f.di.PrependReactor("update", "dijobs", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		other := f.job(testJob).DeepCopy()
		other.Spec.Tasks[1].Replicas = 4 // the change the cache did not see
		if err := f.di.Tracker().Update(div2alpha1.SchemeGroupVersion.WithResource("dijobs"), other, testNS); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(div2alpha1.Resource("dijobs"), testJob, nil)
	})
	a := f.do(http.MethodPost, replicasPath(testJob), "admin", `{"replicas": 2}`)
	if a.status != http.StatusOK {
		t.Fatalf("POST replicas after a conflict: %d %q", a.status, a.body.Message)
	}
	if got := f.job(testJob).Spec.Tasks[1].Replicas; got != 6 {
		t.Errorf("collector replicas after a conflict = %d, want 6 (the other writer's 4, plus 2)", got)
	}
	var updates, gets int
	for _, act := range f.di.Actions() {
		switch act.GetVerb() {
		case "update":
			updates++
		case "get":
			gets++
		}
	}
	if updates != 2 || gets != 1 {
		t.Errorf("%d updates and %d gets, want 2 updates (one refused) and the get of the latest job between", updates, gets)
	}
}

func TestScaleGivesUpWhenTheJobKeepsChanging(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob))
	f.di.PrependReactor("update", "dijobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(div2alpha1.Resource("dijobs"), testJob, nil)
	})
	a := f.do(http.MethodPost, replicasPath(testJob), "admin", `{"replicas": 2}`)
	if a.status != http.StatusConflict || !strings.Contains(a.body.Message, "kept changing") {
		t.Errorf("POST replicas under endless conflicts: %d %q, want 409 saying the job kept changing", a.status, a.body.Message)
	}
}

func TestScaleFailureOfTheAPIServerIsAnInternalError(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob))
	f.di.PrependReactor("update", "dijobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errSecret)
	})
	a := f.do(http.MethodPost, replicasPath(testJob), "admin", `{"replicas": 2}`)
	if a.status != http.StatusInternalServerError {
		t.Errorf("POST replicas when the API server fails: %d, want 500", a.status)
	}
	if strings.Contains(a.raw, errSecret.Error()) {
		t.Errorf("the answer tells the API server's error: %s", a.raw)
	}
}

// errSecret stands for what the API server says that callers need not know.
var errSecret = errors.New("etcd at 10.9.8.7:2379 unreachable")

func TestAnswersAreDIResponses(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob))
	a := f.do(http.MethodGet, replicasPath(testJob), "admin", "")
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(a.raw), &fields); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range fields {
		got = append(got, k)
	}
	if diff := cmp.Diff([]string{"code", "data", "message", "success"}, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("fields of the answer (-want,+got):\n%s", diff)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
}
