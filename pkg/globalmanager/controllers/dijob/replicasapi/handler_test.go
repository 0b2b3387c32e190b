package replicasapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

func TestRoutesRefuseWhatIsNotOne(t *testing.T) {
	cases := map[string]struct {
		method      string
		path        string
		wantStatus  int
		wantMessage string
		wantAllow   string
	}{
		"id without a dot":          {http.MethodGet, "/v2alpha1/job/rlcartpole/replicas", http.StatusBadRequest, "must be in namespace.name format", ""},
		"id with two dots":          {http.MethodGet, "/v2alpha1/job/rl.cart.pole/replicas", http.StatusBadRequest, "must be in namespace.name format", ""},
		"id of two dots":            {http.MethodGet, "/v2alpha1/job/../replicas", http.StatusBadRequest, "must be in namespace.name format", ""},
		"id of one dot":             {http.MethodGet, "/v2alpha1/job/./replicas", http.StatusBadRequest, "is not a namespace or DIJob name", ""},
		"id with upper case":        {http.MethodGet, "/v2alpha1/job/rl.CartPole/replicas", http.StatusBadRequest, "is not a namespace or DIJob name", ""},
		"id with a name too long":   {http.MethodGet, "/v2alpha1/job/rl." + strings.Repeat("a", 64) + "/replicas", http.StatusBadRequest, "is not a namespace or DIJob name", ""},
		"id with an encoded slash":  {http.MethodGet, "/v2alpha1/job/rl%2Fx.cartpole/replicas", http.StatusNotFound, "no such route", ""},
		"id with an encoded space":  {http.MethodGet, "/v2alpha1/job/rl.cart%20pole/replicas", http.StatusBadRequest, "is not a namespace or DIJob name", ""},
		"id with a control char":    {http.MethodGet, "/v2alpha1/job/rl.cart%0Apole/replicas", http.StatusBadRequest, `"rl.cart\npole"`, ""},
		"no id":                     {http.MethodGet, "/v2alpha1/job//replicas", http.StatusNotFound, "no such route", ""},
		"path past the resource":    {http.MethodGet, "/v2alpha1/job/rl.cartpole/replicas/x", http.StatusNotFound, "no such route", ""},
		"another resource":          {http.MethodGet, "/v2alpha1/job/rl.cartpole/pods", http.StatusNotFound, "no such route", ""},
		"another version":           {http.MethodGet, "/v1alpha1/replicas", http.StatusNotFound, "no such route", ""},
		"root":                      {http.MethodGet, "/", http.StatusNotFound, "no such route", ""},
		"PUT on replicas":           {http.MethodPut, replicasPath(testJob), http.StatusMethodNotAllowed, "method PUT is not allowed", "GET, POST, DELETE"},
		"GET on profilings":         {http.MethodGet, profilingsPath(testJob), http.StatusMethodNotAllowed, "use POST", "POST"},
		"unknown job":               {http.MethodGet, replicasPath("missing"), http.StatusNotFound, "DIJob rl/missing not found", ""},
		"unknown job on profilings": {http.MethodPost, profilingsPath("missing"), http.StatusNotFound, "DIJob rl/missing not found", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, Config{}, newJob(testJob))
			a := f.do(tc.method, tc.path, "admin", `{"data": {}}`)
			if a.status != tc.wantStatus {
				t.Fatalf("%s %s: status %d (%q), want %d", tc.method, tc.path, a.status, a.body.Message, tc.wantStatus)
			}
			if !strings.Contains(a.body.Message, tc.wantMessage) {
				t.Errorf("message %q, want it to contain %q", a.body.Message, tc.wantMessage)
			}
			if got := a.header.Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow %q, want %q", got, tc.wantAllow)
			}
			// What is not a route of a job asks no one about a token.
			if tc.wantStatus != http.StatusNotFound || strings.Contains(tc.path, "missing") {
				return
			}
			if f.reviewCount() != 0 {
				t.Errorf("%d TokenReviews for a request that is not a route", f.reviewCount())
			}
		})
	}
}

func TestBodiesOverTheBoundAreRefused(t *testing.T) {
	cases := map[string]struct {
		maxBody    int64
		path       string
		body       string
		wantStatus int
	}{
		"replicas request over a small bound": {
			maxBody: 1024, path: replicasPath(testJob),
			body:       `{"replicas": 1, "task": "` + strings.Repeat("x", 2000) + `"}`,
			wantStatus: http.StatusRequestEntityTooLarge,
		},
		"whitespace that never ends": {
			maxBody: 1024, path: replicasPath(testJob),
			body:       `{"replicas": 1}` + strings.Repeat(" ", 2000),
			wantStatus: http.StatusRequestEntityTooLarge,
		},
		"profilings over the default bound": {
			path:       profilingsPath(testJob),
			body:       `{"data": {"blob": "` + strings.Repeat("x", int(DefaultMaxBodyBytes)) + `"}}`,
			wantStatus: http.StatusRequestEntityTooLarge,
		},
		"profilings nested deeper than JSON allows": {
			path:       profilingsPath(testJob),
			body:       `{"data": {"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`,
			wantStatus: http.StatusBadRequest,
		},
		"profilings under the default bound": {
			path:       profilingsPath(testJob),
			body:       `{"data": {"blob": "` + strings.Repeat("x", int(DefaultMaxBodyBytes)-100) + `"}}`,
			wantStatus: http.StatusOK,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, Config{MaxBodyBytes: tc.maxBody}, newJob(testJob))
			a := f.do(http.MethodPost, tc.path, "admin", tc.body)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d (%q), want %d", a.status, a.body.Message, tc.wantStatus)
			}
			stored := f.job(testJob).Status.Profilings != nil
			if stored != (tc.wantStatus == http.StatusOK && tc.path == profilingsPath(testJob)) {
				t.Errorf("profilings stored: %t", stored)
			}
		})
	}
}

func TestProfilingsAreStored(t *testing.T) {
	cases := map[string]struct {
		body        string
		wantStatus  int
		wantMessage string
		wantStored  string // status.profilings after, "" for none
	}{
		"an object": {
			body:       `{"data": {"fps": 30.5, "learner": {"iterations": [1, 2]}}}`,
			wantStatus: http.StatusOK, wantMessage: "successfully report profilings",
			wantStored: `{"fps":30.5,"learner":{"iterations":[1,2]}}`,
		},
		"an empty object": {
			body:       `{"data": {}}`,
			wantStatus: http.StatusOK, wantStored: `{}`,
		},
		"an array":     {body: `{"data": [1, 2]}`, wantStatus: http.StatusBadRequest, wantMessage: `needs "data", a JSON object`},
		"null":         {body: `{"data": null}`, wantStatus: http.StatusBadRequest, wantMessage: `needs "data", a JSON object`},
		"a string":     {body: `{"data": "fast"}`, wantStatus: http.StatusBadRequest, wantMessage: `needs "data", a JSON object`},
		"no data":      {body: `{}`, wantStatus: http.StatusBadRequest, wantMessage: `needs "data", a JSON object`},
		"DI's profile": {body: `{"fps": 30}`, wantStatus: http.StatusBadRequest, wantMessage: `unknown field "fps"`},
		"a second value after": {
			body: `{"data": {}} {"data": {"x": 1}}`, wantStatus: http.StatusBadRequest, wantMessage: "after the JSON object",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, Config{}, newJob(testJob))
			a := f.do(http.MethodPost, profilingsPath(testJob), "admin", tc.body)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d (%q), want %d", a.status, a.body.Message, tc.wantStatus)
			}
			if !strings.Contains(a.body.Message, tc.wantMessage) {
				t.Errorf("message %q, want it to contain %q", a.body.Message, tc.wantMessage)
			}
			var stored string
			if p := f.job(testJob).Status.Profilings; p != nil {
				stored = string(p.Raw)
			}
			if stored != tc.wantStored {
				t.Errorf("status.profilings = %s, want %s", stored, tc.wantStored)
			}
			if tc.wantStatus != http.StatusOK {
				return
			}
			var statusUpdates int
			for _, act := range f.di.Actions() {
				if act.GetVerb() == "update" {
					if act.GetSubresource() != "status" {
						t.Errorf("profilings written by %s %q, want an update of the status", act.GetVerb(), act.GetSubresource())
					}
					statusUpdates++
				}
			}
			if statusUpdates != 1 {
				t.Errorf("%d status updates, want 1", statusUpdates)
			}
		})
	}
}

func TestProfilingsRetryOnConflict(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob))
	conflicts := 0
	f.di.PrependReactor("update", "dijobs", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" || conflicts > 0 {
			return false, nil, nil
		}
		conflicts++
		// The controller wrote the status meanwhile.
		other := f.job(testJob).DeepCopy()
		other.Status.ReadyReplicas = 4
		if err := f.di.Tracker().Update(div2alpha1.SchemeGroupVersion.WithResource("dijobs"), other, testNS); err != nil {
			t.Fatal(err)
		}
		return true, nil, apierrors.NewConflict(div2alpha1.Resource("dijobs"), testJob, nil)
	})
	a := f.do(http.MethodPost, profilingsPath(testJob), "admin", `{"data": {"fps": 1}}`)
	if a.status != http.StatusOK {
		t.Fatalf("POST profilings after a conflict: %d %q", a.status, a.body.Message)
	}
	job := f.job(testJob)
	if job.Status.Profilings == nil || string(job.Status.Profilings.Raw) != `{"fps":1}` || job.Status.ReadyReplicas != 4 {
		t.Errorf("status after a conflict: profilings %v, readyReplicas %d; want the profilings and the controller's 4", job.Status.Profilings, job.Status.ReadyReplicas)
	}
}

func TestRequestsAreCountedByRouteAndStatus(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFixture(t, Config{Registerer: reg}, newJob(testJob))
	f.do(http.MethodGet, replicasPath(testJob), "admin", "")
	f.do(http.MethodGet, replicasPath(testJob), "admin", "")
	f.do(http.MethodGet, replicasPath(testJob), "", "")
	f.do(http.MethodPost, replicasPath(testJob), "admin", `{"replicas": 1}`)
	f.do(http.MethodGet, "/etc/passwd", "", "")

	got := map[string]float64{}
	for _, route := range []action{actionGetReplicas, actionAddReplicas, actionUnknown} {
		for _, code := range []int{200, 401, 404} {
			if v := testutil.ToFloat64(f.server.metrics.requests.WithLabelValues(string(route), fmt.Sprint(code))); v > 0 {
				got[fmt.Sprintf("%s %d", route, code)] = v
			}
		}
	}
	want := map[string]float64{"get_replicas 200": 2, "get_replicas 401": 1, "add_replicas 200": 1, "unknown 404": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests_total (-want,+got):\n%s", diff)
	}
	// A second server in the process shares the counter.
	if second := New(Config{Registerer: reg}); second.metrics == nil || second.metrics.requests != f.server.metrics.requests {
		t.Error("a second server on the same registry does not share the counter")
	}
}
