package replicasapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

func TestAuthentication(t *testing.T) {
	const ours = "nereid-diserver"
	cases := map[string]struct {
		audiences       []string
		audienceUnaware bool
		header          []string // Authorization values
		reviewFails     bool
		wantStatus      int
		wantMessage     string
		wantReviews     int
	}{
		"no token": {
			wantStatus: http.StatusUnauthorized, wantMessage: "a bearer token is required",
		},
		"another scheme": {
			header:     []string{"Basic YWxpY2U6c2VjcmV0"},
			wantStatus: http.StatusUnauthorized, wantMessage: "a bearer token is required",
		},
		"empty bearer token": {
			header:     []string{"Bearer "},
			wantStatus: http.StatusUnauthorized, wantMessage: "a bearer token is required",
		},
		"two Authorization headers": {
			header:     []string{"Bearer admin", "Bearer nobody"},
			wantStatus: http.StatusUnauthorized, wantMessage: "a bearer token is required",
		},
		"token too long to be one": {
			header:     []string{"Bearer " + strings.Repeat("a", tokenreview.MaxTokenBytes+1)},
			wantStatus: http.StatusUnauthorized, wantMessage: "the token is not valid",
		},
		"invalid token": {
			header:     []string{"Bearer forged"},
			wantStatus: http.StatusUnauthorized, wantMessage: "the token is not valid: invalid bearer token", wantReviews: 1,
		},
		"valid token, any scheme case": {
			header:     []string{"bearer admin"},
			wantStatus: http.StatusOK, wantReviews: 1,
		},
		"token for the API server when an audience is required": {
			audiences: []string{ours},
			header:    []string{"Bearer admin"},
			// The review names our audience; the token is not for it.
			wantStatus: http.StatusUnauthorized, wantMessage: "token audiences are invalid", wantReviews: 1,
		},
		"token for our audience": {
			audiences:  []string{"other", ours},
			header:     []string{"Bearer admin@" + ours},
			wantStatus: http.StatusOK, wantReviews: 1,
		},
		"token for another audience when none is required": {
			header:     []string{"Bearer admin@some-other-service"},
			wantStatus: http.StatusUnauthorized, wantMessage: "token audiences are invalid", wantReviews: 1,
		},
		"review that does not check audiences when one is required": {
			audiences: []string{ours}, audienceUnaware: true,
			header:     []string{"Bearer admin"},
			wantStatus: http.StatusUnauthorized, wantMessage: "not validated for the audiences nereid-diserver", wantReviews: 1,
		},
		"review that fails": {
			header: []string{"Bearer admin"}, reviewFails: true,
			wantStatus: http.StatusServiceUnavailable, wantMessage: "could not be reviewed", wantReviews: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, Config{Audiences: tc.audiences}, newJob(testJob))
			f.audienceUnaware = tc.audienceUnaware
			if tc.reviewFails {
				f.kube.PrependReactor("create", "tokenreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
					f.mu.Lock()
					f.tokenReviews++
					f.mu.Unlock()
					return true, nil, errors.New("connection refused")
				})
			}
			req := httptest.NewRequest(http.MethodGet, replicasPath(testJob), nil)
			for _, h := range tc.header {
				req.Header.Add("Authorization", h)
			}
			rec := httptest.NewRecorder()
			f.handler.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if !strings.Contains(rec.Body.String(), tc.wantMessage) {
				t.Errorf("answer %s, want it to contain %q", rec.Body, tc.wantMessage)
			}
			if tc.wantStatus == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") != bearerRealm {
				t.Errorf("401 with WWW-Authenticate %q, want %q", rec.Header().Get("WWW-Authenticate"), bearerRealm)
			}
			if got := f.reviewCount(); got != tc.wantReviews {
				t.Errorf("%d TokenReviews, want %d", got, tc.wantReviews)
			}
			if tc.wantStatus != http.StatusOK && f.sarCount() != 0 {
				t.Errorf("an unauthenticated request made %d SubjectAccessReviews", f.sarCount())
			}
		})
	}
}

// accessObjects are the jobs and pods whose tokens TestAuthorization tries.
type accessObjects struct {
	job, other                                                         *div2alpha1.DIJob
	worker, otherWorker, elsewhere, deleting, orphan, fresh, recreated *corev1.Pod
}

func newAccessObjects() accessObjects {
	job := newJob(testJob)
	other := newJob("other")
	worker := newPod(job, "collector", 0, 1, "10.0.0.2")
	otherWorker := newPod(other, "collector", 0, 1, "10.0.0.3")
	// A pod that DIJob controls by UID, in another namespace (no
	// controller can own across namespaces; the server does not trust it).
	elsewhere := newPod(job, "collector", 1, 2, "10.0.0.4")
	elsewhere.Namespace = "elsewhere"
	deleting := newPod(job, "collector", 2, 3, "10.0.0.5")
	deleting.DeletionTimestamp = &metav1.Time{}
	orphan := newPod(job, "collector", 3, 4, "10.0.0.6")
	orphan.OwnerReferences = nil
	// In the API server, not yet in the lister.
	fresh := newPod(job, "collector", 4, 5, "10.0.0.7")
	recreated := worker.DeepCopy()
	recreated.UID = "uid-of-the-deleted-pod"
	return accessObjects{job: job, other: other, worker: worker, otherWorker: otherWorker, elsewhere: elsewhere,
		deleting: deleting, orphan: orphan, fresh: fresh, recreated: recreated}
}

// authorizationCase is a request, whose token it carries, and the answer.
type authorizationCase struct {
	token       string
	method      string
	path        string
	body        string
	wantStatus  int
	wantMessage string
	// wantSAR is the one SubjectAccessReview expected, nil for none.
	wantSAR *authorizationv1.ResourceAttributes
}

func authorizationCases(o accessObjects) map[string]authorizationCase {
	cases := authorizationByReviewCases()
	maps.Copy(cases, authorizationOfWorkersCases(o))
	return cases
}

// authorizationByReviewCases: users, whom a SubjectAccessReview authorizes.
func authorizationByReviewCases() map[string]authorizationCase {
	wantAttrs := func(verb, name string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Namespace: testNS, Verb: verb, Group: "diengine.opendilab.org", Version: "v2alpha1", Resource: "dijobs", Name: name}
	}
	return map[string]authorizationCase{
		"allowed to get by the SAR": {
			token: "admin", method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusOK, wantSAR: wantAttrs("get", testJob),
		},
		"allowed to update by the SAR": {
			token: "admin", method: http.MethodPost, path: replicasPath(testJob), body: `{"replicas": 1}`,
			wantStatus: http.StatusOK, wantSAR: wantAttrs("update", testJob),
		},
		"profilings need update": {
			token: "viewer", method: http.MethodPost, path: profilingsPath(testJob), body: `{"data": {}}`,
			wantStatus: http.StatusForbidden, wantMessage: `user "victor" may not update dijobs.diengine.opendilab.org "cartpole" in namespace "rl"`,
			wantSAR: wantAttrs("update", testJob),
		},
		"a viewer may get": {
			token: "viewer", method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusOK, wantSAR: wantAttrs("get", testJob),
		},
		"a viewer may not scale": {
			token: "viewer", method: http.MethodDelete, path: replicasPath(testJob), body: `{"replicas": 1}`,
			wantStatus: http.StatusForbidden, wantMessage: "no RBAC policy matched", wantSAR: wantAttrs("update", testJob),
		},
		"denied by the SAR": {
			token: "nobody", method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusForbidden, wantMessage: `user "mallory" may not get dijobs.diengine.opendilab.org "cartpole" in namespace "rl": no RBAC policy matched`,
			wantSAR: wantAttrs("get", testJob),
		},
		"denied before a missing job is told": {
			token: "nobody", method: http.MethodGet, path: replicasPath("missing"),
			wantStatus: http.StatusForbidden, wantSAR: wantAttrs("get", "missing"),
		},
		"allowed, and the job is missing": {
			token: "admin", method: http.MethodDelete, path: replicasPath("missing"), body: `{"replicas": 1}`,
			wantStatus: http.StatusNotFound, wantMessage: "DIJob rl/missing not found", wantSAR: wantAttrs("update", "missing"),
		},
	}
}

// authorizationOfWorkersCases: pods' tokens, which only the job's own workers' pass.
func authorizationOfWorkersCases(o accessObjects) map[string]authorizationCase {
	worker, otherWorker, elsewhere, deleting, orphan, fresh, recreated := o.worker, o.otherWorker, o.elsewhere, o.deleting, o.orphan, o.fresh, o.recreated
	wantAttrs := func(verb, name string) *authorizationv1.ResourceAttributes {
		return &authorizationv1.ResourceAttributes{Namespace: testNS, Verb: verb, Group: "diengine.opendilab.org", Version: "v2alpha1", Resource: "dijobs", Name: name}
	}
	return map[string]authorizationCase{
		"a worker of the job gets its replicas": {
			token: podToken(worker), method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusOK,
		},
		"a worker of the job scales it": {
			token: podToken(worker), method: http.MethodPost, path: replicasPath(testJob), body: `{"replicas": 1}`,
			wantStatus: http.StatusOK,
		},
		"a worker of the job reports profilings": {
			token: podToken(worker), method: http.MethodPost, path: profilingsPath(testJob), body: `{"data": {"fps": 1}}`,
			wantStatus: http.StatusOK,
		},
		// Only pods in the cache of Nereid's children are workers: one read
		// from the API server could be anyone's, with a forged ownerReference.
		"a pod not in the cache is no worker": {
			token: podToken(fresh), method: http.MethodPost, path: replicasPath(testJob), body: `{"replicas": 1}`,
			wantStatus: http.StatusForbidden, wantMessage: "is not a worker of DIJob rl/cartpole",
			wantSAR: wantAttrs("update", testJob),
		},
		"a worker of another job": {
			token: podToken(otherWorker), method: http.MethodPost, path: replicasPath(testJob), body: `{"replicas": 1}`,
			wantStatus: http.StatusForbidden, wantMessage: "the token's pod rl/other-collector-0 is not a worker of DIJob rl/cartpole",
			wantSAR: wantAttrs("update", testJob),
		},
		"a worker of another job asking of a missing job is told the same": {
			token: podToken(otherWorker), method: http.MethodGet, path: replicasPath("missing"),
			wantStatus: http.StatusForbidden, wantMessage: "the token's pod rl/other-collector-0 is not a worker of DIJob rl/missing",
			wantSAR: wantAttrs("get", "missing"),
		},
		"a pod in another namespace": {
			token: podToken(elsewhere), method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusForbidden, wantMessage: "is not a worker", wantSAR: wantAttrs("get", testJob),
		},
		"a token of a deleted pod whose name was taken again": {
			token: podToken(recreated), method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusForbidden, wantMessage: "is gone", wantSAR: wantAttrs("get", testJob),
		},
		"a pod being deleted": {
			token: podToken(deleting), method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusForbidden, wantMessage: "is being deleted", wantSAR: wantAttrs("get", testJob),
		},
		"a pod with the job's label that the job does not control": {
			token: podToken(orphan), method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusForbidden, wantMessage: "is not a worker", wantSAR: wantAttrs("get", testJob),
		},
		"a pod that does not exist": {
			token: fmt.Sprintf("pod:%s:%s:%s", testNS, "ghost", "uid-ghost"), method: http.MethodGet, path: replicasPath(testJob),
			wantStatus: http.StatusForbidden, wantMessage: "is not a worker", wantSAR: wantAttrs("get", testJob),
		},
	}
}

func TestAuthorization(t *testing.T) {
	o := newAccessObjects()
	cases := authorizationCases(o)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, Config{}, o.job, o.other, o.worker, o.otherWorker, o.elsewhere, o.deleting, o.orphan)
			if err := f.kube.Tracker().Add(o.fresh); err != nil {
				t.Fatal(err)
			}
			a := f.do(tc.method, tc.path, tc.token, tc.body)
			if a.status != tc.wantStatus {
				t.Fatalf("status %d (%q), want %d", a.status, a.body.Message, tc.wantStatus)
			}
			if !strings.Contains(a.body.Message, tc.wantMessage) {
				t.Errorf("message %q, want it to contain %q", a.body.Message, tc.wantMessage)
			}
			f.mu.Lock()
			sars := f.sars
			f.mu.Unlock()
			switch {
			case tc.wantSAR == nil && len(sars) > 0:
				t.Errorf("a worker of the job was reviewed by %d SubjectAccessReviews, want none", len(sars))
			case tc.wantSAR != nil && len(sars) != 1:
				t.Errorf("%d SubjectAccessReviews, want 1", len(sars))
			case tc.wantSAR != nil:
				if diff := cmp.Diff(tc.wantSAR, sars[0].ResourceAttributes); diff != "" {
					t.Errorf("SubjectAccessReview attributes (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

func TestSubjectAccessReviewNamesTheWholeUser(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob))
	if a := f.do(http.MethodGet, replicasPath(testJob), "admin", ""); a.status != http.StatusOK {
		t.Fatalf("GET replicas: %d %q", a.status, a.body.Message)
	}
	want := authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: testNS, Verb: "get", Group: "diengine.opendilab.org", Version: "v2alpha1", Resource: "dijobs", Name: testJob},
		User:               "alice", UID: "uid-alice", Groups: []string{"ml-admins", "system:authenticated"},
		Extra: map[string]authorizationv1.ExtraValue{"scopes": {"all"}},
	}
	if diff := cmp.Diff([]authorizationv1.SubjectAccessReviewSpec{want}, f.sars); diff != "" {
		t.Errorf("SubjectAccessReviews (-want,+got):\n%s", diff)
	}
}

func TestTokenReviewsAreCachedBriefly(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newFixture(t, Config{ReviewCacheTTL: 10 * time.Second, MaxCachedReviews: 2, Clock: clk}, newJob(testJob))
	get := func(token string) int { return f.do(http.MethodGet, replicasPath(testJob), token, "").status }

	for range 3 {
		if s := get("admin"); s != http.StatusOK {
			t.Fatalf("GET: %d", s)
		}
		if s := get("forged"); s != http.StatusUnauthorized {
			t.Fatalf("GET with a forged token: %d", s)
		}
	}
	if got := f.reviewCount(); got != 2 {
		t.Errorf("3 requests with each of 2 tokens made %d TokenReviews, want 2", got)
	}
	if got := f.sarCount(); got != 3 {
		t.Errorf("3 authenticated requests made %d SubjectAccessReviews, want 3 (never cached)", got)
	}

	clk.SetTime(clk.Now().Add(10 * time.Second))
	get("admin")
	if got := f.reviewCount(); got != 3 {
		t.Errorf("a request after the TTL made %d TokenReviews in all, want 3", got)
	}

	get("viewer")
	get("nobody")
	if n := f.server.authn.(*tokenReviewer).cache.Len(); n > 2 {
		t.Errorf("the review cache holds %d tokens, more than MaxCachedReviews (2)", n)
	}
}

// A user is taken from the cache no longer than its token says it is the
// one to use (exp, or warnafter once the kubelet has rotated it): an expired
// token is reviewed again, and the API server refuses it.
func TestACachedUserLastsNoLongerThanItsToken(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newFixture(t, Config{ReviewCacheTTL: 10 * time.Second, Clock: clk}, newJob(testJob))
	token := jwtOf("admin", map[string]any{"exp": clk.Now().Add(3 * time.Second).Unix()})
	get := func() int { return f.do(http.MethodGet, replicasPath(testJob), token, "").status }

	for range 2 {
		if s := get(); s != http.StatusOK {
			t.Fatalf("GET: %d", s)
		}
	}
	if got := f.reviewCount(); got != 1 {
		t.Errorf("2 requests before the token expires made %d TokenReviews, want 1", got)
	}
	clk.SetTime(clk.Now().Add(3 * time.Second))
	get()
	if got := f.reviewCount(); got != 2 {
		t.Errorf("a request once the token expired, within the TTL, made %d TokenReviews in all, want 2", got)
	}
}

func TestTokenReviewCacheCanBeTurnedOff(t *testing.T) {
	f := newFixture(t, Config{ReviewCacheTTL: -1}, newJob(testJob))
	for range 3 {
		f.do(http.MethodGet, replicasPath(testJob), "admin", "")
	}
	if got := f.reviewCount(); got != 3 {
		t.Errorf("3 requests without a cache made %d TokenReviews, want 3", got)
	}
}

func TestReviewsWaitForATurn(t *testing.T) {
	f := newFixture(t, Config{MaxConcurrentReviews: 1}, newJob(testJob))
	slots := f.server.authn.(*tokenReviewer).turns.slots
	// The one turn is taken: a request waits for it and, when its own time
	// ends first, is told to come back.
	slots <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, replicasPath(testJob), nil)
	req.Header.Set("Authorization", "Bearer admin")
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a request with no turn to review: %d (Retry-After %q), want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	<-slots
	if a := f.do(http.MethodGet, replicasPath(testJob), "admin", ""); a.status != http.StatusOK {
		t.Errorf("a request once the turn is free: %d", a.status)
	}
	if len(slots) != 0 {
		t.Errorf("%d turns still taken after the requests", len(slots))
	}
}

func TestWorkerCheckNeedsTheJobsUID(t *testing.T) {
	// The job was deleted and created again under its name: the old job's
	// workers are not the new job's.
	old := newJob(testJob)
	worker := newPod(old, "collector", 0, 1, "10.0.0.2")
	current := newJob(testJob)
	current.UID = "uid-of-the-new-job"
	f := newFixture(t, Config{}, current, worker)
	a := f.do(http.MethodPost, replicasPath(testJob), podToken(worker), `{"replicas": 1}`)
	if a.status != http.StatusForbidden {
		t.Errorf("a worker of a deleted job with the same name: %d %q, want 403", a.status, a.body.Message)
	}
	if got := f.job(testJob).Spec.Tasks[1].Replicas; got != 3 {
		t.Errorf("collector replicas = %d, want 3 (unchanged)", got)
	}
}
