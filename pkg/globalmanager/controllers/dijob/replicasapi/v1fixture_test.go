package replicasapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	div1listers "github.com/nereid-ml/nereid/pkg/client/listers/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// The v1 job of the v1 tests, its coordinator's address, and another.
const (
	testV1Job       = "pong"
	coordinatorIP   = "10.0.0.5"
	strangerIP      = "10.0.0.66"
	testServerURL   = "di-server.di-system:8080"
	coordinatorName = testV1Job + "-coordinator"
)

// newV1Job is a running v1 job of testNS (as the API server stores it, in
// v2alpha1) with a coordinator, collector and learner template.
func newV1Job(t *testing.T, name string) *div2alpha1.DIJob {
	t.Helper()
	template := func(image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: coordinated.ContainerName, Image: image}}}}
	}
	v1 := &div1.DIJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: div1.DIJobSpec{
			Coordinator: &div1.CoordinatorSpec{Template: template("coordinator")},
			Collector:   &div1.CollectorSpec{Template: template("collector")},
			Learner:     &div1.LearnerSpec{Template: template("learner")},
		},
		Status: div1.DIJobStatus{Phase: div1.JobRunning},
	}
	job, err := conversion.ToV2(v1)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// newV1Pod is a pod of job of replica type typ named name, at ip, as
// coordinated.Pod builds it.
func newV1Pod(t *testing.T, job *div2alpha1.DIJob, typ, name, ip string) *corev1.Pod {
	t.Helper()
	view, err := conversion.ToV1(job)
	if err != nil {
		t.Fatal(err)
	}
	pod, _ := coordinated.Pod(coordinated.Replica{Job: view, Type: typ, Name: name, Template: &view.Spec.Coordinator.Template, ServerURL: testServerURL})
	pod.UID = types.UID("uid-" + name)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	return pod
}

// v1Fixture is the fixture with the v1 server's handler, whose pod cache
// follows the fake API server's pods when synced.
type v1Fixture struct {
	*fixture
	v1 http.Handler
}

func newV1Fixture(t *testing.T, cfg Config, objects ...runtime.Object) *v1Fixture {
	t.Helper()
	if cfg.V1.ServerURL == "" {
		cfg.V1.ServerURL = testServerURL
	}
	f := &v1Fixture{fixture: newFixture(t, cfg, objects...)}
	// The API server gives every object it creates a UID (DDP learners
	// are owned by their aggregator's).
	f.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if pod, ok := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod); ok && pod.UID == "" {
			pod.UID = types.UID("uid-" + pod.Name)
		}
		return false, nil, nil
	})
	f.v1 = f.server.V1Handler()
	for _, o := range f.pods.List() {
		if err := f.kube.Tracker().Add(o.(*corev1.Pod)); err != nil {
			t.Fatal(err)
		}
	}
	f.syncPods()
	return f
}

// syncPods has the pod cache show the API server's pods, as the informer
// does in time: slimmed, as the GlobalManager's cache holds them.
func (f *v1Fixture) syncPods() {
	f.t.Helper()
	list := f.apiPods()
	objs := make([]any, len(list))
	for i := range list {
		objs[i] = common.SlimPod(&list[i])
	}
	if err := f.pods.Replace(objs, ""); err != nil {
		f.t.Fatal(err)
	}
}

// apiPods are the fake API server's pods, by name.
func (f *v1Fixture) apiPods() []corev1.Pod {
	f.t.Helper()
	list, err := f.kube.CoreV1().Pods(testNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// apiPodNames are the names of the API server's pods of replica type typ.
func (f *v1Fixture) apiPodNames(typ string) []string {
	var out []string
	for _, p := range f.apiPods() {
		if coordinated.TypeOf(&p) == typ {
			out = append(out, p.Name)
		}
	}
	return out
}

// v1Request is one request to the v1 server.
type v1Request struct {
	method, path, body string
	from               string // the caller's IP
	token              string
	header             map[string]string
}

// call sends req and decodes DI's answer.
func (f *v1Fixture) call(req v1Request) answer {
	f.t.Helper()
	r := httptest.NewRequest(req.method, "http://di-server"+req.path, strings.NewReader(req.body))
	r.RemoteAddr = req.from + ":41000"
	if req.token != "" {
		r.Header.Set("Authorization", "Bearer "+req.token)
	}
	for k, v := range req.header {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	f.v1.ServeHTTP(rec, r)
	a := answer{status: rec.Code, header: rec.Header(), raw: rec.Body.String()}
	if err := json.Unmarshal(rec.Body.Bytes(), &a.body); err != nil {
		f.t.Fatalf("%s %s: the answer is not DI's JSON response: %v: %q", req.method, req.path, err, a.raw)
	}
	if a.body.Success != (a.status == http.StatusOK) {
		f.t.Errorf("%s %s: status %d with success %t", req.method, req.path, a.status, a.body.Success)
	}
	return a
}

// jobData is the answer's data as DI's DIJobResponse.
func (a answer) jobData(t *testing.T) v1JobResponse {
	t.Helper()
	var out v1JobResponse
	raw, err := json.Marshal(a.body.Data)
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil {
		t.Fatalf("data %v is not a DIJobResponse: %v", a.body.Data, err)
	}
	return out
}

// postBody is a POST or DELETE body of the coordinator of v1Job.
func postBody(collectors, learners string) string {
	return `{"namespace": "` + testNS + `", "coordinator": "` + coordinatorName + `", "collectors": ` + collectors + `, "learners": ` + learners + `}`
}

// fromCoordinator is a request of the coordinator of testV1Job, from its pod.
func fromCoordinator(method, path, body string) v1Request {
	return v1Request{method: method, path: path, body: body, from: coordinatorIP}
}

// quantity is resource.MustParse.
func quantity(s string) resource.Quantity { return resource.MustParse(s) }

// ownerPod is a reference to pod as its DDP learners' owner.
func ownerPod(pod *corev1.Pod) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
}

// remarshal decodes v's JSON into out.
func remarshal(v, out any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// fixedSlots is a GPUAllocator that always places on its slots.
type fixedSlots []coordinated.GPUSlot

func (f fixedSlots) Place(int, *corev1.PodSpec) ([]coordinated.GPUSlot, error) { return f, nil }
func (fixedSlots) Hold([]coordinated.GPUSlot, []*corev1.Pod)                   {}
func (fixedSlots) Release([]coordinated.GPUSlot)                               {}

// aggregatorConfigs is a lister of configs.
func aggregatorConfigs(t *testing.T, configs ...*div1.AggregatorConfig) div1listers.AggregatorConfigLister {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, c := range configs {
		mustAdd(t, indexer, c)
	}
	return div1listers.NewAggregatorConfigLister(indexer)
}

// aggregatorConfig is DI's default AggregatorConfig.
func aggregatorConfig() *div1.AggregatorConfig {
	return &div1.AggregatorConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: DefaultAggregatorConfig.Namespace, Name: DefaultAggregatorConfig.Name},
		Spec: div1.AggregatorConfigSpec{Aggregator: div1.AggregatorSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: coordinated.ContainerName, Image: "aggregator"}}},
		}}},
	}
}
