package replicasapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	difake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	dilisters "github.com/nereid-ml/nereid/pkg/client/listers/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
)

const (
	testNS  = "rl"
	testJob = "cartpole"
	// apiAudience is the audience of a token without "@": the API server's.
	apiAudience = "https://kubernetes.default.svc"
)

// fixture is a Server over fake clientsets and listers seeded from indexers,
// with TokenReviews and SubjectAccessReviews answered by reactors.
//
// A token is "<who>" or "<who>@<audience>" (the token's audience, the API
// server's when absent); it authenticates only for a review naming its
// audience (or naming none, when the audience is the API server's). A
// "<who>.<base64url JSON payload>.sig" token is who's, with those claims
// (jwtOf). By who:
//
//	admin                    user alice, allowed everything by the SAR
//	viewer                   user victor, allowed only "get" by the SAR
//	nobody                   user mallory, allowed nothing
//	pod:<ns>:<name>:<uid>    ServiceAccount <ns>:default bound to that pod,
//	                         allowed nothing by the SAR
//	anything else            invalid
type fixture struct {
	t       *testing.T
	kube    *kubefake.Clientset
	di      *difake.Clientset
	jobs    cache.Indexer
	pods    cache.Indexer
	server  *Server
	handler http.Handler

	// audienceUnaware makes reviews answer no audiences, as an API server
	// that does not check them.
	audienceUnaware bool

	mu           sync.Mutex
	tokenReviews int
	sars         []authorizationv1.SubjectAccessReviewSpec
}

func newFixture(t *testing.T, cfg Config, objects ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{
		t:    t,
		jobs: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, common.IndexOwner: common.ChildIndexers[common.IndexOwner]}),
	}
	var jobs []runtime.Object
	for _, o := range objects {
		switch o := o.(type) {
		case *div2alpha1.DIJob:
			jobs = append(jobs, o)
			mustAdd(t, f.jobs, o)
		case *corev1.Pod:
			mustAdd(t, f.pods, o)
		default:
			t.Fatalf("fixture takes DIJobs and Pods, not %T", o)
		}
	}
	f.di = difake.NewClientset(jobs...)
	f.kube = kubefake.NewClientset()
	f.kube.PrependReactor("create", "tokenreviews", f.reviewToken)
	f.kube.PrependReactor("create", "subjectaccessreviews", f.reviewAccess)

	cfg.Kube, cfg.DI = f.kube, f.di
	cfg.Jobs, cfg.Pods = dilisters.NewDIJobLister(f.jobs), f.pods
	f.server = New(cfg)
	f.handler = f.server.Handler()
	return f
}

// jwtOf is a token of who whose JWT payload holds claims.
func jwtOf(who string, claims map[string]any) string {
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	return who + "." + base64.RawURLEncoding.EncodeToString(payload) + ".sig"
}

func mustAdd(t *testing.T, indexer cache.Indexer, obj any) {
	t.Helper()
	if err := indexer.Add(obj); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) reviewToken(action clienttesting.Action) (bool, runtime.Object, error) {
	review := action.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
	f.mu.Lock()
	f.tokenReviews++
	unaware := f.audienceUnaware
	f.mu.Unlock()

	who, audience, found := strings.Cut(review.Spec.Token, "@")
	who, _, _ = strings.Cut(who, ".") // a JWT's claims are not the review's business
	if !found {
		audience = apiAudience
	}
	wanted := review.Spec.Audiences
	if len(wanted) == 0 || unaware {
		wanted = []string{apiAudience}
	}
	if !slices.Contains(wanted, audience) {
		review.Status = authenticationv1.TokenReviewStatus{Error: "token audiences are invalid for the target audiences"}
		return true, review, nil
	}
	var user authenticationv1.UserInfo
	switch who {
	case "admin":
		user = authenticationv1.UserInfo{Username: "alice", UID: "uid-alice", Groups: []string{"ml-admins", "system:authenticated"},
			Extra: map[string]authenticationv1.ExtraValue{"scopes": {"all"}}}
	case "viewer":
		user = authenticationv1.UserInfo{Username: "victor", Groups: []string{"system:authenticated"}}
	case "nobody":
		user = authenticationv1.UserInfo{Username: "mallory", Groups: []string{"system:authenticated"}}
	default:
		parts := strings.Split(who, ":")
		if len(parts) != 4 || parts[0] != "pod" {
			review.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
			return true, review, nil
		}
		user = authenticationv1.UserInfo{
			Username: "system:serviceaccount:" + parts[1] + ":default",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[1], "system:authenticated"},
			Extra: map[string]authenticationv1.ExtraValue{
				PodNameExtra: {parts[2]}, PodUIDExtra: {parts[3]},
				"authentication.kubernetes.io/node-name": {"node-1"},
			},
		}
	}
	review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: user}
	if !unaware {
		review.Status.Audiences = []string{audience}
	}
	return true, review, nil
}

func (f *fixture) reviewAccess(action clienttesting.Action) (bool, runtime.Object, error) {
	review := action.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
	f.mu.Lock()
	f.sars = append(f.sars, review.Spec)
	f.mu.Unlock()
	switch {
	case review.Spec.User == "alice":
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: `RBAC: allowed by RoleBinding "ml-admins"`}
	case review.Spec.User == "victor" && review.Spec.ResourceAttributes.Verb == "get":
		review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
	default:
		review.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
	}
	return true, review, nil
}

func (f *fixture) sarCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sars)
}

func (f *fixture) reviewCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenReviews
}

// answer is a decoded response.
type answer struct {
	status int
	header http.Header
	body   response
	raw    string
}

// do sends a request to the handler; an empty token sends no Authorization.
func (f *fixture) do(method, path, token, body string) answer {
	f.t.Helper()
	req := httptest.NewRequest(method, "http://diserver"+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	a := answer{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if err := json.Unmarshal(rec.Body.Bytes(), &a.body); err != nil {
		f.t.Fatalf("%s %s: the answer is not DI's JSON response: %v: %q", method, path, err, a.raw)
	}
	if got, want := a.body.Success, a.status == http.StatusOK; got != want {
		f.t.Errorf("%s %s: status %d with success %t", method, path, a.status, got)
	}
	if wantCode := map[bool]int{true: codeSuccess, false: codeFailed}[a.status == http.StatusOK]; a.body.Code != wantCode {
		f.t.Errorf("%s %s: status %d with code %d, want %d", method, path, a.status, a.body.Code, wantCode)
	}
	return a
}

// job reads a DIJob back from the fake API server.
func (f *fixture) job(name string) *div2alpha1.DIJob {
	f.t.Helper()
	obj, err := f.di.Tracker().Get(div2alpha1.SchemeGroupVersion.WithResource("dijobs"), testNS, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return obj.(*div2alpha1.DIJob)
}

// replicasPath and profilingsPath are the routes of a job in testNS.
func replicasPath(job string) string   { return "/v2alpha1/job/" + testNS + "." + job + "/replicas" }
func profilingsPath(job string) string { return "/v2alpha1/job/" + testNS + "." + job + "/profilings" }

// podToken is the token of a ServiceAccount bound to pod.
func podToken(pod *corev1.Pod) string {
	return fmt.Sprintf("pod:%s:%s:%s", pod.Namespace, pod.Name, pod.UID)
}

func newTask(typ div2alpha1.TaskType, name string, replicas int32) div2alpha1.Task {
	return div2alpha1.Task{Type: typ, Name: name, Replicas: replicas}
}

// newJob is a running DIJob of testNS with tasks, by default a learner and
// 3 collectors.
func newJob(name string, tasks ...div2alpha1.Task) *div2alpha1.DIJob {
	if len(tasks) == 0 {
		tasks = []div2alpha1.Task{newTask(div2alpha1.TaskTypeLearner, "", 1), newTask(div2alpha1.TaskTypeCollector, "", 3)}
	}
	return &div2alpha1.DIJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec:       div2alpha1.DIJobSpec{Tasks: tasks},
		Status:     div2alpha1.DIJobStatus{Phase: div2alpha1.JobRunning},
	}
}

// labelJob is the label the DIJob controller puts on its pods, as
// DI-orchestrator does.
const labelJob = dijob.LabelJob

// newPod is the replica of job with global rank rank, named
// <job>-<task>-<taskRank>, with IP ip when not empty, as the DIJob
// controller makes it.
func newPod(job *div2alpha1.DIJob, task string, taskRank, rank int, ip string) *corev1.Pod {
	name := fmt.Sprintf("%s-%s-%d", job.Name, task, taskRank)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{labelJob: job.Name, "diengine/task-name": task, "diengine/pod": name, "nereid.io/owner-uid": string(job.UID)},
			Annotations: map[string]string{
				"diengine/rank": fmt.Sprint(rank), "diengine/task-rank": fmt.Sprint(taskRank),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, div2alpha1.DIJobKind)},
		},
		Spec: corev1.PodSpec{
			Hostname: name, Subdomain: "di-" + job.Name,
			Containers: []corev1.Container{{Name: "di-container"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
}
