package replicasapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

func TestV1RoutesAnswerAsDIOrchestrator(t *testing.T) {
	job := newV1Job(t, testV1Job)
	f := newV1Fixture(t, Config{}, job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP))
	cases := map[string]struct {
		req         v1Request
		wantStatus  int
		wantMessage string
	}{
		"PUT replicas":          {req: fromCoordinator(http.MethodPut, v1ReplicasPath, ""), wantStatus: http.StatusNotImplemented, wantMessage: "PUT not implemented"},
		"GET replicas/failed":   {req: fromCoordinator(http.MethodGet, v1FailedPath, ""), wantStatus: http.StatusNotImplemented, wantMessage: "GET not implemented"},
		"another path":          {req: fromCoordinator(http.MethodGet, "/v1alpha1/jobs", ""), wantStatus: http.StatusNotFound, wantMessage: "no such route"},
		"an unknown GET param":  {req: fromCoordinator(http.MethodGet, v1ReplicasPath+"?namespace=rl&job=x", ""), wantStatus: http.StatusBadRequest, wantMessage: `request param "job" is not supported`},
		"a body of no JSON":     {req: fromCoordinator(http.MethodPost, v1ReplicasPath, "collectors"), wantStatus: http.StatusBadRequest, wantMessage: "not valid"},
		"a body without caller": {req: fromCoordinator(http.MethodPost, v1ReplicasPath, `{"namespace": "rl"}`), wantStatus: http.StatusBadRequest, wantMessage: `"coordinator" must name`},
		"GPUs past an int64 of thousandths": {
			req:        fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{}`, `{"replicas": 1, "gpus": "1e300"}`)),
			wantStatus: http.StatusBadRequest, wantMessage: "learners: cpus, gpus and memory must be at most",
		},
		"memory past an int64 of thousandths": {
			req:        fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 1, "memory": 18446744073709551616}`, `{}`)),
			wantStatus: http.StatusBadRequest, wantMessage: "collectors: cpus, gpus and memory must be at most",
		},
		"GET by name": {
			req:        fromCoordinator(http.MethodGet, v1ReplicasPath+"?namespace=rl&coordinator="+coordinatorName+"&name=x", ""),
			wantStatus: http.StatusOK, wantMessage: "successfully get replicas",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := f.call(tc.req)
			if a.status != tc.wantStatus || !strings.Contains(a.body.Message, tc.wantMessage) {
				t.Errorf("%d %q, want %d with %q", a.status, a.body.Message, tc.wantStatus, tc.wantMessage)
			}
		})
	}

	rec := httptest.NewRecorder()
	f.v1.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("/healthz: %d %q, want DI's 200 and no body", rec.Code, rec.Body.String())
	}
}

func TestV1PostCreatesReplicasFromTheJobsTemplates(t *testing.T) {
	cases := map[string]struct {
		collectors, learners string
	}{
		"quantities as strings": {
			collectors: `{"replicas": 2, "cpus": "500m", "memory": "1Gi", "gpus": "0"}`,
			learners:   `{"replicas": 1, "cpus": "2", "gpus": "1", "memory": "2Gi"}`,
		},
		"quantities as numbers": {
			collectors: `{"replicas": 2, "cpus": 0.5, "memory": 1073741824, "gpus": 0}`,
			learners:   `{"replicas": 1, "cpus": 2, "gpus": 1, "memory": 2147483648}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := newV1Job(t, testV1Job)
			f := newV1Fixture(t, Config{}, job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP))
			a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(tc.collectors, tc.learners)))
			if a.status != http.StatusOK || a.body.Message != "successfully create replicas" {
				t.Fatalf("POST: %d %s", a.status, a.raw)
			}
			collectors, learners := f.apiPodNames(coordinated.Collector), f.apiPodNames(coordinated.Learner)
			got := a.jobData(t)
			want := v1JobResponse{Namespace: testNS, Coordinator: coordinatorName, Collectors: urlsAt(collectors, 22270), Learners: urlsAt(learners, 22271)}
			slices.Sort(got.Collectors)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("POST's data (-want,+got):\n%s", diff)
			}
			checkReplicaPods(t, f, map[string]corev1.ResourceList{
				coordinated.Collector: {corev1.ResourceCPU: quantity("500m"), corev1.ResourceMemory: quantity("1Gi")},
				coordinated.Learner:   {corev1.ResourceCPU: quantity("2"), corev1.ResourceMemory: quantity("2Gi"), coordinated.ResourceGPU: quantity("1")},
			})
		})
	}
}

// checkReplicaPods checks that every collector and learner in the API
// server is the job's, from its template, with want's resources.
func checkReplicaPods(t *testing.T, f *v1Fixture, want map[string]corev1.ResourceList) {
	t.Helper()
	for _, pod := range f.apiPods() {
		typ := coordinated.TypeOf(&pod)
		if typ == coordinated.Coordinator {
			continue
		}
		c := pod.Spec.Containers[0]
		if c.Image != typ || pod.OwnerReferences[0].UID != "uid-"+testV1Job {
			t.Errorf("pod %s: image %s, owners %v: not made from the job's %s template", pod.Name, c.Image, pod.OwnerReferences, typ)
		}
		if !slices.Contains(c.Env, corev1.EnvVar{Name: coordinated.EnvServerURL, Value: testServerURL}) {
			t.Errorf("pod %s: env %v lacks KUBERNETES_SERVER_URL=%s", pod.Name, c.Env, testServerURL)
		}
		if diff := cmp.Diff(want[typ], c.Resources.Requests); diff != "" {
			t.Errorf("pod %s's requests (-want,+got):\n%s", pod.Name, diff)
		}
		if diff := cmp.Diff(want[typ], c.Resources.Limits); diff != "" {
			t.Errorf("pod %s's limits (-want,+got):\n%s", pod.Name, diff)
		}
	}
}

// urlsAt are names' URLs at port in testNS, sorted.
func urlsAt(names []string, port int) []string {
	out := []string{}
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s.%s:%d", n, testNS, port))
	}
	slices.Sort(out)
	return out
}

func TestV1GetListsTheJobsReplicas(t *testing.T) {
	job := newV1Job(t, testV1Job)
	aggregator := newV1Pod(t, job, coordinated.Aggregator, testV1Job+"-aggregator-abcde", "10.0.0.7")
	ddp := newV1Pod(t, job, coordinated.DDPLearner, testV1Job+"-ddp-learner-fghij", "10.0.0.8")
	ddp.OwnerReferences = append(ddp.OwnerReferences, *ownerPod(aggregator))
	coordinated.AddPort(ddp, corev1.ContainerPort{Name: "gpu-port-1", ContainerPort: 22274})
	f := newV1Fixture(t, Config{}, job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP), aggregator, ddp,
		newV1Pod(t, job, coordinated.Collector, testV1Job+"-collector-aaaaa", "10.0.0.9"), newV1Pod(t, job, coordinated.Learner, testV1Job+"-learner-bbbbb", "10.0.0.10"))

	a := f.call(fromCoordinator(http.MethodGet, v1ReplicasPath+"?namespace="+testNS+"&coordinator="+coordinatorName, ""))
	want := v1JobResponse{Namespace: testNS, Coordinator: coordinatorName,
		Collectors: []string{testV1Job + "-collector-aaaaa.rl:22270"},
		Learners:   []string{testV1Job + "-learner-bbbbb.rl:22271", testV1Job + "-aggregator-abcde.rl:22272"}}
	if diff := cmp.Diff(want, a.jobData(t)); a.status != http.StatusOK || diff != "" {
		t.Errorf("GET by coordinator: %d (-want,+got):\n%s", a.status, diff)
	}

	a = f.call(v1Request{method: http.MethodGet, path: v1ReplicasPath + "?namespace=" + testNS + "&aggregator=" + aggregator.Name, from: "10.0.0.7"})
	want = v1JobResponse{Namespace: testNS, Coordinator: aggregator.Name, Learners: []string{ddp.Name + ".rl:22271", ddp.Name + ".rl:22274"}}
	if diff := cmp.Diff(want, a.jobData(t)); a.status != http.StatusOK || diff != "" {
		t.Errorf("GET by aggregator: %d (-want,+got):\n%s", a.status, diff)
	}
	if !strings.Contains(a.raw, `"collectors":null`) {
		t.Errorf("GET by aggregator: %s, want collectors null as DI answered", a.raw)
	}
}

func TestV1Access(t *testing.T) {
	job := newV1Job(t, testV1Job)
	onHost := newV1Pod(t, job, coordinated.Aggregator, testV1Job+"-aggregator-hhhhh", "10.0.0.20")
	onHost.Spec.HostNetwork = true
	collector := newV1Pod(t, job, coordinated.Collector, testV1Job+"-collector-ccccc", "10.0.0.21")
	// Its IP, which its status keeps, is free for the node to give another pod.
	ended := newV1Pod(t, job, coordinated.Aggregator, testV1Job+"-aggregator-eeeee", "10.0.0.22")
	ended.Status.Phase = corev1.PodFailed
	// A pod someone who may create pods made, labelled and owned as the job's
	// coordinator.
	impostor := newV1Pod(t, job, coordinated.Coordinator, testV1Job+"-coordinator-2", "10.0.0.23")
	other := newV1Job(t, "other")
	objects := []runtime.Object{job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP), onHost, collector, ended, impostor, other}
	get := func(pod string) string { return v1ReplicasPath + "?namespace=" + testNS + "&coordinator=" + pod }
	cases := map[string]struct {
		req         v1Request
		wantStatus  int
		wantMessage string
	}{
		"the coordinator from its address": {req: fromCoordinator(http.MethodGet, get(coordinatorName), ""), wantStatus: http.StatusOK},
		"the coordinator's name from another address": {
			req:        v1Request{method: http.MethodGet, path: get(coordinatorName), from: strangerIP},
			wantStatus: http.StatusUnauthorized, wantMessage: strangerIP + " is not the address of a live coordinator or aggregator rl/" + coordinatorName,
		},
		"a pod that does not exist": {
			req:        v1Request{method: http.MethodGet, path: get("nope"), from: strangerIP},
			wantStatus: http.StatusUnauthorized, wantMessage: strangerIP + " is not the address of a live coordinator or aggregator rl/nope",
		},
		"a collector from its address": {
			req:        v1Request{method: http.MethodPost, path: v1ReplicasPath, body: `{"namespace": "rl", "coordinator": "` + collector.Name + `"}`, from: "10.0.0.21"},
			wantStatus: http.StatusUnauthorized, wantMessage: "is not the address of a live coordinator or aggregator",
		},
		"an aggregator on the host's network": {
			req:        v1Request{method: http.MethodGet, path: v1ReplicasPath + "?namespace=rl&aggregator=" + onHost.Name, from: "10.0.0.20"},
			wantStatus: http.StatusUnauthorized, wantMessage: "is not the address",
		},
		"an aggregator that failed, from the address it had": {
			req:        v1Request{method: http.MethodPost, path: v1ReplicasPath, body: `{"namespace": "rl", "coordinator": "` + ended.Name + `", "collectors": {"replicas": 1}}`, from: "10.0.0.22"},
			wantStatus: http.StatusUnauthorized, wantMessage: "is not the address of a live coordinator or aggregator",
		},
		"a coordinator not of the coordinator's name": {
			req:        v1Request{method: http.MethodPost, path: v1ReplicasPath, body: `{"namespace": "rl", "coordinator": "` + impostor.Name + `", "collectors": {"replicas": 1}}`, from: "10.0.0.23"},
			wantStatus: http.StatusUnauthorized, wantMessage: "is not the address of a live coordinator or aggregator",
		},
		"the token of the coordinator's pod": {
			req: v1Request{method: http.MethodPost, path: v1ReplicasPath, body: postBody(`{"replicas": 1}`, `{}`), from: strangerIP, token: "pod:rl:" + coordinatorName + ":uid-" + coordinatorName}, wantStatus: http.StatusOK,
		},
		"the token of a collector's pod, naming the coordinator": {
			req:        v1Request{method: http.MethodPost, path: v1ReplicasPath, body: postBody(`{"replicas": 1}`, `{}`), from: strangerIP, token: "pod:rl:" + collector.Name + ":uid-" + collector.Name},
			wantStatus: http.StatusForbidden, wantMessage: `user "system:serviceaccount:rl:default" may not update dijobs`,
		},
		"a token that may update the job": {
			req: v1Request{method: http.MethodPost, path: v1ReplicasPath, body: postBody(`{"replicas": 1}`, `{}`), from: strangerIP, token: "admin"}, wantStatus: http.StatusOK,
		},
		"a token that may not": {
			req:        v1Request{method: http.MethodPost, path: v1ReplicasPath, body: postBody(`{"replicas": 1}`, `{}`), from: coordinatorIP, token: "viewer"},
			wantStatus: http.StatusForbidden, wantMessage: `user "victor" may not update dijobs.diengine.opendilab.org "pong"`,
		},
		"an invalid token from the coordinator's address": {
			req: v1Request{method: http.MethodGet, path: get(coordinatorName), from: coordinatorIP, token: "forged"}, wantStatus: http.StatusUnauthorized, wantMessage: "not valid",
		},
		"a token naming no such pod": {
			req: v1Request{method: http.MethodGet, path: get("nope"), from: strangerIP, token: "admin"}, wantStatus: http.StatusNotFound, wantMessage: "pod rl/nope is not",
		},
		"a token that may not, naming no such pod": {
			req: v1Request{method: http.MethodGet, path: get("nope"), from: strangerIP, token: "nobody"}, wantStatus: http.StatusForbidden, wantMessage: `may not get dijobs`,
		},
		"every namespace without a token": {
			req: v1Request{method: http.MethodGet, path: v1ReplicasPath, from: coordinatorIP}, wantStatus: http.StatusUnauthorized, wantMessage: "a bearer token that may list DIJobs is required",
		},
		"a namespace without a token": {
			req: v1Request{method: http.MethodGet, path: v1ReplicasPath + "?namespace=rl", from: coordinatorIP}, wantStatus: http.StatusUnauthorized, wantMessage: "a bearer token",
		},
		"every namespace with a token that may not list": {
			req: v1Request{method: http.MethodGet, path: v1ReplicasPath, from: strangerIP, token: "viewer"}, wantStatus: http.StatusForbidden, wantMessage: `may not list dijobs.diengine.opendilab.org in every namespace`,
		},
		"every namespace with a token that may list": {
			req: v1Request{method: http.MethodGet, path: v1ReplicasPath, from: strangerIP, token: "admin"}, wantStatus: http.StatusOK,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newV1Fixture(t, Config{}, objects...)
			a := f.call(tc.req)
			if a.status != tc.wantStatus || !strings.Contains(a.body.Message, tc.wantMessage) {
				t.Errorf("%d %q, want %d with %q", a.status, a.body.Message, tc.wantStatus, tc.wantMessage)
			}
			if a.status == http.StatusUnauthorized && a.header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		})
	}
}

func TestV1ListOfEveryJobNamesEachCoordinator(t *testing.T) {
	job, other := newV1Job(t, testV1Job), newV1Job(t, "other")
	f := newV1Fixture(t, Config{}, job, other, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP),
		newV1Pod(t, other, coordinated.Coordinator, "other-coordinator", "10.0.0.30"), newV1Pod(t, other, coordinated.Collector, "other-collector-xxxxx", "10.0.0.31"),
		newPod(newJob("v2"), "learner", 0, 0, "10.0.0.40"))
	a := f.call(v1Request{method: http.MethodGet, path: v1ReplicasPath + "?namespace=" + testNS, from: strangerIP, token: "admin"})
	var got []v1JobResponse
	if err := remarshal(a.body.Data, &got); err != nil || a.status != http.StatusOK {
		t.Fatalf("GET of the namespace: %d %s: %v", a.status, a.raw, err)
	}
	want := []v1JobResponse{
		{Namespace: testNS, Coordinator: "other-coordinator", Collectors: []string{"other-collector-xxxxx.rl:22270"}, Learners: []string{}},
		{Namespace: testNS, Coordinator: coordinatorName, Collectors: []string{}, Learners: []string{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET of the namespace (-want,+got):\n%s", diff)
	}
}

func TestV1Bounds(t *testing.T) {
	job := newV1Job(t, testV1Job)
	objects := []runtime.Object{job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP)}
	t.Run("replicas per request", func(t *testing.T) {
		f := newV1Fixture(t, Config{}, objects...)
		a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 65}`, `{}`)))
		if a.status != http.StatusBadRequest || !strings.Contains(a.body.Message, "collectors.replicas must be between 0 and 64 (the bound of replicas per request)") {
			t.Errorf("65 collectors: %d %q", a.status, a.body.Message)
		}
		if n := len(f.apiPods()); n != 1 {
			t.Errorf("%d pods after a refusal, want the coordinator alone", n)
		}
	})
	t.Run("live replicas per job, before the cache shows them", func(t *testing.T) {
		f := newV1Fixture(t, Config{V1: V1Config{MaxLiveReplicas: 3}}, objects...)
		if a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 2}`, `{"replicas": 3}`))); a.status != http.StatusOK {
			t.Fatalf("2 collectors and 3 learners: %d %s", a.status, a.raw)
		}
		// The cache has not seen them: the server counts them all the same.
		a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 2}`, `{}`)))
		if a.status != http.StatusConflict || !strings.Contains(a.body.Message, "has 2 collectors: 2 more would pass the bound of 3 live collectors per job") {
			t.Errorf("2 more collectors: %d %q", a.status, a.body.Message)
		}
		f.syncPods()
		a = f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{}`, `{"replicas": 1}`)))
		if a.status != http.StatusConflict || !strings.Contains(a.body.Message, "the bound of 3 live learners per job") {
			t.Errorf("1 more learner: %d %q", a.status, a.body.Message)
		}
		if got := len(f.apiPodNames(coordinated.Collector)) + len(f.apiPodNames(coordinated.Learner)); got != 5 {
			t.Errorf("%d replicas, want the first request's 5", got)
		}
	})
	t.Run("concurrent requests share no room", func(t *testing.T) {
		f := newV1Fixture(t, Config{V1: V1Config{MaxLiveReplicas: 3, RequestsPerSecond: 100}}, objects...)
		statuses := make(chan int, 4)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				statuses <- f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 2}`, `{}`))).status
			})
		}
		wg.Wait()
		close(statuses)
		counts := map[int]int{}
		for s := range statuses {
			counts[s]++
		}
		if diff := cmp.Diff(map[int]int{http.StatusOK: 1, http.StatusConflict: 3}, counts); diff != "" {
			t.Errorf("4 requests for 2 of 3 collectors at once, answers by status (-want,+got):\n%s", diff)
		}
		if got := len(f.apiPodNames(coordinated.Collector)); got != 2 {
			t.Errorf("%d collectors, want 2", got)
		}
	})
	t.Run("body size", func(t *testing.T) {
		f := newV1Fixture(t, Config{}, objects...)
		a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 1, "pad": "`+strings.Repeat("x", 64<<10)+`"}`, `{}`)))
		if a.status != http.StatusRequestEntityTooLarge {
			t.Errorf("a body over 64 KiB: %d %q", a.status, a.body.Message)
		}
	})
	t.Run("changes per second per job", func(t *testing.T) {
		clk := testingclock.NewFakeClock(time.Now())
		f := newV1Fixture(t, Config{Clock: clk, V1: V1Config{RequestsPerSecond: 1}}, objects...)
		for i := range 2 { // the burst
			if a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 1}`, `{}`))); a.status != http.StatusOK {
				t.Fatalf("change %d: %d %s", i, a.status, a.raw)
			}
		}
		a := f.call(fromCoordinator(http.MethodDelete, v1ReplicasPath, postBody(`{"replicas": 1}`, `{}`)))
		if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "1" || !strings.Contains(a.body.Message, "changed at most 1 times a second") {
			t.Errorf("a third change at once: %d %q %v", a.status, a.body.Message, a.header)
		}
		clk.Step(time.Second)
		if a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 1}`, `{}`))); a.status != http.StatusOK {
			t.Errorf("a change a second later: %d %s", a.status, a.raw)
		}
	})
}

func TestV1PostThatFailsPartwayLeavesNoPod(t *testing.T) {
	job := newV1Job(t, testV1Job)
	f := newV1Fixture(t, Config{}, job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP))
	creates := 0
	f.kube.PrependReactor("create", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		creates++
		if creates == 3 {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("exceeded quota"))
		}
		return false, nil, nil
	})
	a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 2}`, `{"replicas": 2}`)))
	if a.status != http.StatusConflict || !strings.Contains(a.body.Message, "exceeded quota") {
		t.Errorf("POST failing at the third pod: %d %q, want 409 telling why", a.status, a.body.Message)
	}
	if got := len(f.apiPods()); got != 1 {
		t.Errorf("%d pods after the failure, want the coordinator alone: what was created is deleted", got)
	}
	a = f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 2}`, `{"replicas": 2}`)))
	if a.status != http.StatusOK || len(f.apiPodNames(coordinated.Collector)) != 2 || len(f.apiPodNames(coordinated.Learner)) != 2 {
		t.Errorf("the retry: %d, %d collectors and %d learners, want 2 and 2", a.status, len(f.apiPodNames(coordinated.Collector)), len(f.apiPodNames(coordinated.Learner)))
	}
}

func TestV1IdempotencyKeyAnswersTheFirstResult(t *testing.T) {
	job := newV1Job(t, testV1Job)
	clk := testingclock.NewFakeClock(time.Now())
	f := newV1Fixture(t, Config{Clock: clk}, job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP))
	keyed := func(body string) v1Request {
		req := fromCoordinator(http.MethodPost, v1ReplicasPath, body)
		req.header = map[string]string{IdempotencyKeyHeader: "init-1"}
		return req
	}
	first := f.call(keyed(postBody(`{"replicas": 2}`, `{}`)))
	again := f.call(keyed(postBody(`{"replicas": 2}`, `{}`)))
	if first.status != http.StatusOK || again.raw != first.raw {
		t.Errorf("the repeated request: %s, want the first one's answer %s", again.raw, first.raw)
	}
	if got := len(f.apiPodNames(coordinated.Collector)); got != 2 {
		t.Errorf("%d collectors, want the first request's 2 only", got)
	}
	if a := f.call(keyed(postBody(`{"replicas": 3}`, `{}`))); a.status != http.StatusConflict || !strings.Contains(a.body.Message, "with another request body") {
		t.Errorf("the key with another body: %d %q", a.status, a.body.Message)
	}
	clk.Step(DefaultV1IdempotencyTTL)
	if a := f.call(keyed(postBody(`{"replicas": 2}`, `{}`))); a.status != http.StatusOK || a.raw == first.raw {
		t.Errorf("the key after its TTL: %d %s, want a new creation", a.status, a.raw)
	}
	if got := len(f.apiPodNames(coordinated.Collector)); got != 4 {
		t.Errorf("%d collectors after the key expired, want 4", got)
	}
}

func TestV1DeleteRemovesTheNewestReplicas(t *testing.T) {
	job := newV1Job(t, testV1Job)
	objects := []runtime.Object{job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP)}
	for i, name := range []string{"c-old", "c-mid", "c-new"} {
		pod := newV1Pod(t, job, coordinated.Collector, name, fmt.Sprintf("10.0.1.%d", i))
		pod.CreationTimestamp.Time = time.Unix(int64(1000+i), 0)
		objects = append(objects, pod)
	}
	objects = append(objects, newV1Pod(t, job, coordinated.Aggregator, "agg", "10.0.1.9"))
	f := newV1Fixture(t, Config{}, objects...)
	a := f.call(fromCoordinator(http.MethodDelete, v1ReplicasPath, postBody(`{"replicas": 2}`, `{"replicas": 1}`)))
	want := v1JobResponse{Namespace: testNS, Coordinator: coordinatorName, Collectors: []string{"c-new.rl:22270", "c-mid.rl:22270"}, Learners: []string{"agg.rl:22272"}}
	if diff := cmp.Diff(want, a.jobData(t)); a.status != http.StatusOK || diff != "" {
		t.Errorf("DELETE: %d (-want,+got):\n%s", a.status, diff)
	}
	if diff := cmp.Diff([]string{"c-old"}, f.apiPodNames(coordinated.Collector)); diff != "" {
		t.Errorf("collectors left (-want,+got):\n%s", diff)
	}
}

func TestV1FailedReplacesTheNamedPods(t *testing.T) {
	job := newV1Job(t, testV1Job)
	collector := newV1Pod(t, job, coordinated.Collector, testV1Job+"-collector-aaaaa", "10.0.2.1")
	learner := newV1Pod(t, job, coordinated.Learner, testV1Job+"-learner-bbbbb", "10.0.2.2")
	objects := []runtime.Object{job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP), collector, learner}
	failed := func(collectors, learners string) string {
		return `{"namespace": "rl", "coordinator": "` + coordinatorName + `", "collectors": ` + collectors + `, "learners": ` + learners + `}`
	}
	t.Run("by name and by URL", func(t *testing.T) {
		f := newV1Fixture(t, Config{}, objects...)
		a := f.call(fromCoordinator(http.MethodPost, v1FailedPath, failed(`["`+collector.Name+`"]`, `["`+learner.Name+`.rl:22271"]`)))
		if a.status != http.StatusOK || a.body.Message != "successfully recreate replicas" {
			t.Fatalf("replicas/failed: %d %s", a.status, a.raw)
		}
		collectors, learners := f.apiPodNames(coordinated.Collector), f.apiPodNames(coordinated.Learner)
		if len(collectors) != 1 || collectors[0] == collector.Name || !strings.HasPrefix(collectors[0], testV1Job+"-collector-") ||
			len(learners) != 1 || learners[0] == learner.Name {
			t.Errorf("collectors %v, learners %v: want each replaced by one of a new name", collectors, learners)
		}
		for _, pod := range f.apiPods() {
			if typ := coordinated.TypeOf(&pod); typ == coordinated.Collector || typ == coordinated.Learner {
				// The cache holds slim pods: the new one is the old one's whole spec,
				// its image the template's.
				if c := pod.Spec.Containers[0]; c.Image != typ || !slices.Contains(c.Env, corev1.EnvVar{Name: coordinated.EnvPodName, Value: pod.Name}) {
					t.Errorf("new pod %s: image %q, env %v; want the old pod's spec with image %s and KUBERNETES_POD_NAME=%s", pod.Name, c.Image, c.Env, typ, pod.Name)
				}
			}
		}
		want := v1JobResponse{Namespace: testNS, Coordinator: coordinatorName, Collectors: urlsAt(collectors, 22270), Learners: urlsAt(learners, 22271)}
		if diff := cmp.Diff(want, a.jobData(t)); diff != "" {
			t.Errorf("replicas/failed's data (-want,+got):\n%s", diff)
		}
	})
	cases := map[string]struct {
		body        string
		wantStatus  int
		wantMessage string
	}{
		"a pod that does not exist":  {body: failed(`["nope"]`, `[]`), wantStatus: http.StatusNotFound, wantMessage: "pod: rl/nope not exists in cache"},
		"a learner under collectors": {body: failed(`["`+learner.Name+`"]`, `[]`), wantStatus: http.StatusBadRequest, wantMessage: "is a learner, not a collector"},
		"the coordinator":            {body: failed(`[]`, `["`+coordinatorName+`"]`), wantStatus: http.StatusBadRequest, wantMessage: "is a coordinator, not a learner or aggregator or ddp-learner"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newV1Fixture(t, Config{}, objects...)
			a := f.call(fromCoordinator(http.MethodPost, v1FailedPath, tc.body))
			if a.status != tc.wantStatus || !strings.Contains(a.body.Message, tc.wantMessage) {
				t.Errorf("%d %q, want %d with %q", a.status, a.body.Message, tc.wantStatus, tc.wantMessage)
			}
			if got := len(f.apiPods()); got != 3 {
				t.Errorf("%d pods after a refusal, want the 3 there were", got)
			}
		})
	}
}

func TestV1LearnersOfMoreThanOneGPU(t *testing.T) {
	job := newV1Job(t, testV1Job)
	objects := []runtime.Object{job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP)}
	body := postBody(`{}`, `{"replicas": 1, "gpus": "4", "cpus": "8"}`)
	t.Run("without the GPU allocator", func(t *testing.T) {
		f := newV1Fixture(t, Config{}, objects...)
		a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, body))
		if a.status != http.StatusNotImplemented || !strings.Contains(a.body.Message, "learners with more than one GPU need the GPU allocator") {
			t.Errorf("%d %q, want 501", a.status, a.body.Message)
		}
	})
	withDDP := V1Config{GPUs: fixedSlots{{Node: "gpu-0", GPUs: 4}}}
	t.Run("without the AggregatorConfig", func(t *testing.T) {
		cfg := Config{V1: withDDP}
		cfg.V1.AggregatorConfigs = aggregatorConfigs(t)
		f := newV1Fixture(t, cfg, objects...)
		a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, body))
		if a.status != http.StatusNotFound || !strings.Contains(a.body.Message, "AggregatorConfig di-system/aggregator-config not found") {
			t.Errorf("%d %q, want 404 naming it", a.status, a.body.Message)
		}
	})
	t.Run("with both", func(t *testing.T) {
		cfg := Config{V1: withDDP}
		cfg.V1.AggregatorConfigs = aggregatorConfigs(t, aggregatorConfig())
		f := newV1Fixture(t, cfg, objects...)
		a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, body))
		aggregators, ddp := f.apiPodNames(coordinated.Aggregator), f.apiPodNames(coordinated.DDPLearner)
		if a.status != http.StatusOK || len(aggregators) != 1 || len(ddp) != 1 {
			t.Fatalf("%d %s: aggregators %v, DDP learners %v", a.status, a.raw, aggregators, ddp)
		}
		if diff := cmp.Diff([]string{aggregators[0] + ".rl:22272"}, a.jobData(t).Learners); diff != "" {
			t.Errorf("learners answered (-want,+got):\n%s", diff)
		}
	})
}

func TestV1FailedAggregatorGetsNewDDPLearners(t *testing.T) {
	job := newV1Job(t, testV1Job)
	aggregator := newV1Pod(t, job, coordinated.Aggregator, testV1Job+"-aggregator-abcde", "10.0.3.1")
	ddp := newV1Pod(t, job, coordinated.DDPLearner, testV1Job+"-ddp-learner-fghij", "10.0.3.2")
	ddp.OwnerReferences = append(ddp.OwnerReferences, *ownerPod(aggregator))
	coordinated.SetEnv(ddp, corev1.EnvVar{Name: coordinated.EnvWorldSize, Value: "4"})
	coordinated.SetResources(ddp, coordinated.Resources{CPU: quantity("8"), GPU: quantity("4")})
	objects := []runtime.Object{job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP), aggregator, ddp}
	body := `{"namespace": "rl", "coordinator": "` + coordinatorName + `", "learners": ["` + aggregator.Name + `"]}`

	f := newV1Fixture(t, Config{}, objects...)
	if a := f.call(fromCoordinator(http.MethodPost, v1FailedPath, body)); a.status != http.StatusNotImplemented || !strings.Contains(a.body.Message, "needs the GPU allocator") {
		t.Errorf("replacing an aggregator without the GPU allocator: %d %q, want 501", a.status, a.body.Message)
	}

	f = newV1Fixture(t, Config{V1: V1Config{GPUs: fixedSlots{{Node: "gpu-0", GPUs: 4}}, AggregatorConfigs: aggregatorConfigs(t, aggregatorConfig())}}, objects...)
	a := f.call(fromCoordinator(http.MethodPost, v1FailedPath, body))
	aggregators := f.apiPodNames(coordinated.Aggregator)
	if a.status != http.StatusOK || len(aggregators) != 1 || aggregators[0] == aggregator.Name {
		t.Fatalf("replacing an aggregator: %d %s; aggregators %v, want one new", a.status, a.raw, aggregators)
	}
	var made []corev1.Pod
	for _, p := range f.apiPods() {
		if coordinated.TypeOf(&p) == coordinated.DDPLearner && p.Name != ddp.Name {
			made = append(made, p)
		}
	}
	if len(made) != 1 || !slices.ContainsFunc(made[0].OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.Name == aggregators[0] }) {
		t.Fatalf("new DDP learners %v, want one owned by the new aggregator %s", made, aggregators[0])
	}
	if gpus := made[0].Spec.Containers[0].Resources.Limits[coordinated.ResourceGPU]; gpus.Cmp(quantity("4")) != 0 {
		t.Errorf("the new DDP learner's GPUs %s, want the world size 4", gpus.String())
	}
}

func TestV1AggregatorOnlyReportsItsOwnDDPLearners(t *testing.T) {
	job := newV1Job(t, testV1Job)
	const aggregatorIP = "10.0.3.1"
	aggregator := newV1Pod(t, job, coordinated.Aggregator, testV1Job+"-aggregator-abcde", aggregatorIP)
	ddp := newV1Pod(t, job, coordinated.DDPLearner, testV1Job+"-ddp-learner-fghij", "10.0.3.2")
	ddp.OwnerReferences = append(ddp.OwnerReferences, *ownerPod(aggregator))
	coordinated.SetEnv(ddp, corev1.EnvVar{Name: coordinated.EnvWorldSize, Value: "1"})
	collector := newV1Pod(t, job, coordinated.Collector, testV1Job+"-collector-aaaaa", "10.0.3.3")
	learner := newV1Pod(t, job, coordinated.Learner, testV1Job+"-learner-bbbbb", "10.0.3.4")
	objects := []runtime.Object{job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP), aggregator, ddp, collector, learner}
	named := func(collectors, learners string) string {
		return `{"namespace": "rl", "coordinator": "` + aggregator.Name + `", "collectors": ` + collectors + `, "learners": ` + learners + `}`
	}
	cases := map[string]struct {
		req         v1Request
		wantStatus  int
		wantMessage string
	}{
		"POST": {
			req:        v1Request{method: http.MethodPost, path: v1ReplicasPath, body: named(`{"replicas": 1}`, `{}`), from: aggregatorIP},
			wantStatus: http.StatusForbidden, wantMessage: "only the coordinator adds and deletes replicas",
		},
		"DELETE": {
			req:        v1Request{method: http.MethodDelete, path: v1ReplicasPath, body: named(`{"replicas": 1}`, `{"replicas": 1}`), from: aggregatorIP},
			wantStatus: http.StatusForbidden, wantMessage: "only the coordinator adds and deletes replicas",
		},
		"a collector failed": {
			req:        v1Request{method: http.MethodPost, path: v1FailedPath, body: named(`["`+collector.Name+`"]`, `[]`), from: aggregatorIP},
			wantStatus: http.StatusForbidden, wantMessage: "is no DDP learner of aggregator",
		},
		"a learner failed": {
			req:        v1Request{method: http.MethodPost, path: v1FailedPath, body: named(`[]`, `["`+learner.Name+`"]`), from: aggregatorIP},
			wantStatus: http.StatusForbidden, wantMessage: "is no DDP learner of aggregator",
		},
		"itself failed": {
			req:        v1Request{method: http.MethodPost, path: v1FailedPath, body: named(`[]`, `["`+aggregator.Name+`"]`), from: aggregatorIP},
			wantStatus: http.StatusForbidden, wantMessage: "is no DDP learner of aggregator",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newV1Fixture(t, Config{V1: V1Config{GPUs: fixedSlots{{Node: "gpu-0", GPUs: 1}}}}, objects...)
			a := f.call(tc.req)
			if a.status != tc.wantStatus || !strings.Contains(a.body.Message, tc.wantMessage) {
				t.Errorf("%d %q, want %d with %q", a.status, a.body.Message, tc.wantStatus, tc.wantMessage)
			}
			if got := len(f.apiPods()); got != len(objects)-1 {
				t.Errorf("%d pods after a refusal, want the %d there were", got, len(objects)-1)
			}
		})
	}
	t.Run("its own DDP learner failed", func(t *testing.T) {
		f := newV1Fixture(t, Config{}, objects...)
		a := f.call(v1Request{method: http.MethodPost, path: v1FailedPath, body: named(`[]`, `["`+ddp.Name+`"]`), from: aggregatorIP})
		if a.status != http.StatusOK {
			t.Fatalf("%d %s, want 200", a.status, a.raw)
		}
		if got := f.apiPodNames(coordinated.DDPLearner); len(got) != 1 || got[0] == ddp.Name {
			t.Errorf("DDP learners %v, want %s replaced", got, ddp.Name)
		}
	})
}

// TestV1FailedDoesNotCopyAnEditOfTheFailedPod: someone who may create or
// update pods, not the job, gave a failed collector another image, a
// toleration of the control plane's taint and the host's network; the
// replacement the GlobalManager makes is the collector template's pod.
func TestV1FailedDoesNotCopyAnEditOfTheFailedPod(t *testing.T) {
	job := newV1Job(t, testV1Job)
	collector := newV1Pod(t, job, coordinated.Collector, testV1Job+"-collector-aaaaa", "10.0.2.1")
	collector.Spec.Containers[0].Image = "attacker"
	collector.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}
	collector.Spec.HostNetwork = true
	f := newV1Fixture(t, Config{}, job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP), collector)
	body := `{"namespace": "rl", "coordinator": "` + coordinatorName + `", "collectors": ["` + collector.Name + `"]}`
	if a := f.call(fromCoordinator(http.MethodPost, v1FailedPath, body)); a.status != http.StatusOK {
		t.Fatalf("replicas/failed: %d %s", a.status, a.raw)
	}
	for _, pod := range f.apiPods() {
		if coordinated.TypeOf(&pod) != coordinated.Collector {
			continue
		}
		if image := pod.Spec.Containers[0].Image; image != "collector" || len(pod.Spec.Tolerations) != 0 || pod.Spec.HostNetwork {
			t.Errorf("new collector %s: image %q, tolerations %v, hostNetwork %t; want the template's pod", pod.Name, image, pod.Spec.Tolerations, pod.Spec.HostNetwork)
		}
	}
}

// TestV1JobsAtRestLeaveRoomForOthers: the states of MaxJobs jobs that
// changed once and rest, their rate back to a whole burst, do not refuse
// another job's change (a tenant's own jobs would otherwise fill the
// table for minutes); a job still within its burst keeps its state.
func TestV1JobsAtRestLeaveRoomForOthers(t *testing.T) {
	job, other := newV1Job(t, testV1Job), newV1Job(t, "other")
	const otherIP = "10.0.9.1"
	objects := []runtime.Object{job, other, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP),
		newV1Pod(t, other, coordinated.Coordinator, "other-coordinator", otherIP)}
	otherBody := `{"namespace": "rl", "coordinator": "other-coordinator", "collectors": {"replicas": 0}}`
	clk := testingclock.NewFakeClock(time.Now())
	f := newV1Fixture(t, Config{Clock: clk, V1: V1Config{MaxJobs: 1, RequestsPerSecond: 1}}, objects...)
	if a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{}`, `{}`))); a.status != http.StatusOK {
		t.Fatalf("the first job's change: %d %s", a.status, a.raw)
	}
	if a := f.call(v1Request{method: http.MethodPost, path: v1ReplicasPath, body: otherBody, from: otherIP}); a.status != http.StatusServiceUnavailable {
		t.Errorf("another job's change while the first is within its burst: %d %s, want 503", a.status, a.raw)
	}
	clk.Step(time.Second)
	if a := f.call(v1Request{method: http.MethodPost, path: v1ReplicasPath, body: otherBody, from: otherIP}); a.status != http.StatusOK {
		t.Errorf("another job's change once the first rests: %d %s, want 200", a.status, a.raw)
	}
}

// TestV1FailedLeavesOutAPodWhoseTypeChanged: a collector the cache shows,
// relabelled a coordinator since, is left out rather than made again as a
// pod of another type than the one checked.
func TestV1FailedLeavesOutAPodWhoseTypeChanged(t *testing.T) {
	job := newV1Job(t, testV1Job)
	collector := newV1Pod(t, job, coordinated.Collector, testV1Job+"-collector-aaaaa", "10.0.2.1")
	f := newV1Fixture(t, Config{}, job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP), collector)
	relabelled := collector.DeepCopy()
	relabelled.Labels[coordinated.LabelReplicaType] = coordinated.Coordinator
	if _, err := f.kube.CoreV1().Pods(testNS).Update(t.Context(), relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	body := `{"namespace": "rl", "coordinator": "` + coordinatorName + `", "collectors": ["` + collector.Name + `"]}`
	if a := f.call(fromCoordinator(http.MethodPost, v1FailedPath, body)); a.status != http.StatusOK || a.jobData(t).Collectors != nil {
		t.Errorf("replicas/failed: %d %s, want 200 and no collector made", a.status, a.raw)
	}
	if got := len(f.apiPods()); got != 2 {
		t.Errorf("%d pods, want the 2 there were", got)
	}
}

// TestV1CreationFailuresAreOnTheJob: a pod the API server refuses (a
// collector template without containers) is answered 400 and put on the
// job: a Warning FailedCreate event and ReplicasCreated False naming the
// pod's template and why; once replicas are made again, ReplicasCreated
// True. A refusal of a request's names (404) is the coordinator's alone.
func TestV1CreationFailuresAreOnTheJob(t *testing.T) {
	job := newV1Job(t, testV1Job)
	recorder := record.NewFakeRecorder(10)
	f := newV1Fixture(t, Config{Recorder: recorder}, job, newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP))
	refuse := true
	f.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pod := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		if refuse && coordinated.TypeOf(pod) == coordinated.Collector {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, pod.Name, field.ErrorList{field.Required(field.NewPath("spec", "containers"), "")})
		}
		return false, nil, nil
	})
	condition := func() *div2alpha1.JobCondition {
		t.Helper()
		cur, err := f.di.DiengineV2alpha1().DIJobs(testNS).Get(t.Context(), testV1Job, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mustAdd(t, f.jobs, cur) // the informer's copy follows
		return replicasCreated(cur)
	}

	a := f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 1}`, `{"replicas": 0}`)))
	if a.status != http.StatusBadRequest || !strings.Contains(a.body.Message, "spec.containers: Required value") {
		t.Fatalf("POST of a collector the API server refuses: %d %q, want 400 saying why", a.status, a.body.Message)
	}
	c := condition()
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != common.ReasonFailedCreate ||
		!strings.Contains(c.Message, "from spec.collector.template") || !strings.Contains(c.Message, "spec.containers: Required value") {
		t.Fatalf("ReplicasCreated %+v, want False %s naming the template and why", c, common.ReasonFailedCreate)
	}
	select {
	case ev := <-recorder.Events:
		if !strings.HasPrefix(ev, "Warning FailedCreate ") || !strings.Contains(ev, "spec.containers: Required value") {
			t.Errorf("event %q, want a Warning FailedCreate saying why", ev)
		}
	default:
		t.Error("no event on the job")
	}

	a = f.call(fromCoordinator(http.MethodPost, v1FailedPath, `{"namespace": "`+testNS+`", "coordinator": "`+coordinatorName+`", "collectors": ["no-such-pod"], "learners": []}`))
	if a.status != http.StatusNotFound {
		t.Errorf("replicas/failed naming no pod: %d, want 404", a.status)
	}
	if c := condition(); c.Status != corev1.ConditionFalse || len(recorder.Events) > 0 {
		t.Errorf("a refusal of names changed ReplicasCreated to %+v or made an event", c)
	}

	refuse = false
	a = f.call(fromCoordinator(http.MethodPost, v1ReplicasPath, postBody(`{"replicas": 1}`, `{"replicas": 0}`)))
	if a.status != http.StatusOK {
		t.Fatalf("POST once the API server takes the pod: %d %q", a.status, a.body.Message)
	}
	if c := condition(); c == nil || c.Status != corev1.ConditionTrue || c.Reason != common.ReasonSuccessfulCreate {
		t.Errorf("ReplicasCreated %+v once replicas are made, want True %s", c, common.ReasonSuccessfulCreate)
	}
}

// A coordinator that calls as soon as it starts may find the pod cache
// without its address yet: the request waits for the cache (a moment, at
// most callerAddressWait) instead of being refused.
func TestV1TokenlessCallWaitsForTheCacheToShowItsCallersAddress(t *testing.T) {
	job := newV1Job(t, testV1Job)
	pod := newV1Pod(t, job, coordinated.Coordinator, coordinatorName, coordinatorIP)
	pod.Status.PodIP, pod.Status.PodIPs = "", nil
	f := newV1Fixture(t, Config{}, job, pod)
	get := fromCoordinator(http.MethodGet, v1ReplicasPath+"?namespace=rl&coordinator="+coordinatorName, "")

	started := time.Now()
	addressed := make(chan struct{})
	go func() {
		defer close(addressed)
		time.Sleep(200 * time.Millisecond)
		p := pod.DeepCopy()
		p.Status.PodIP, p.Status.PodIPs = coordinatorIP, []corev1.PodIP{{IP: coordinatorIP}}
		if err := f.pods.Update(common.SlimPod(p)); err != nil {
			t.Error(err)
		}
	}()
	if a := f.call(get); a.status != http.StatusOK {
		t.Errorf("a call while the cache lacked the coordinator's address: %d %q, want 200 once it shows", a.status, a.body.Message)
	}
	<-addressed
	if took := time.Since(started); took < 200*time.Millisecond {
		t.Errorf("answered in %s, before the cache showed the address", took)
	}

	// Another address than the pod's, once it has one: refused at once.
	stranger := get
	stranger.from = "10.9.9.9"
	started = time.Now()
	if a := f.call(stranger); a.status != http.StatusUnauthorized {
		t.Errorf("a stranger's call: %d, want 401", a.status)
	}
	if took := time.Since(started); took > callerAddressWait/2 {
		t.Errorf("a stranger's call waited %s", took)
	}
}
