// Package cycletest is the unit-test fixture of the learning-cycle
// controllers: fake clientsets, informer indexers seeded from them, and the
// steps a test drives (sync, a report from the edge, a pod changing phase).
package cycletest

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/internal/fakeapi"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednafake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Namespace of the objects of the tests.
const Namespace = "default"

// Build makes the controller under test from the dependencies the fixture
// gives it: its fakes and their informers, workers told of a LocalController
// on port 9100 and data under /home/data, and its clock.
type Build[J learningcycle.Job[J]] func(ctx context.Context, d kinds.Deps) (*learningcycle.Controller[J], error)

// Fixture is one controller over fake clients whose informers' indexers hold
// what the clients held when it was made: a GlobalManager whose caches have
// just synced. Next makes the next one, after the clients changed.
type Fixture[J learningcycle.Job[J]] struct {
	C        *learningcycle.Controller[J]
	Kube     *kubefake.Clientset
	Sedna    *sednafake.Clientset
	Recorder *record.FakeRecorder
	// Clock is the controller's time, which the test moves.
	Clock *testingclock.FakePassiveClock
	build Build[J]
}

// New seeds fake clients with objs and makes the first fixture.
func New[J learningcycle.Job[J]](t *testing.T, build Build[J], objs ...runtime.Object) *Fixture[J] {
	t.Helper()
	var kubeObjs, sednaObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Pod); ok {
			kubeObjs = append(kubeObjs, o)
		} else {
			sednaObjs = append(sednaObjs, o)
		}
	}
	f := &Fixture[J]{Kube: kubefake.NewClientset(kubeObjs...), Sedna: sednafake.NewSimpleClientset(sednaObjs...),
		Clock: testingclock.NewFakePassiveClock(time.Unix(1000, 0).UTC()), build: build}
	fakeapi.ConditionalUpdates(f.Sedna)
	f.start(t)
	return f
}

// Next is a fresh controller (fresh expectations, as after a restart) whose
// caches hold the clients' current objects; the clients' recorded actions
// are cleared, so Writes names this step's only.
func (f *Fixture[J]) Next(t *testing.T) *Fixture[J] {
	t.Helper()
	f.Kube.ClearActions()
	f.Sedna.ClearActions()
	next := &Fixture[J]{Kube: f.Kube, Sedna: f.Sedna, Clock: f.Clock, build: f.build}
	next.start(t)
	return next
}

func (f *Fixture[J]) start(t *testing.T) {
	t.Helper()
	f.Recorder = record.NewFakeRecorder(100)
	ki := kubeinformers.NewSharedInformerFactory(f.Kube, 0)
	si := sednainformers.NewSharedInformerFactory(f.Sedna, 0)
	c, err := f.build(t.Context(), kinds.Deps{Kube: f.Kube, Client: f.Sedna, KubeInformers: ki, Informers: si, Recorder: f.Recorder,
		Worker: kinds.Worker{LocalController: common.LCAddress{Port: 9100}, LogLevel: "INFO", DataPathPrefix: "/home/data"}, Clock: f.Clock})
	if err != nil {
		t.Fatal(err)
	}
	f.C = c
	ctx := t.Context()
	v1 := si.Sedna().V1alpha1()
	seed := func(add func(obj any) error, list func() ([]runtime.Object, error)) {
		objs, err := list()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := add(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := metav1.ListOptions{}
	seed(ki.Core().V1().Pods().Informer().GetIndexer().Add, func() ([]runtime.Object, error) {
		l, err := f.Kube.CoreV1().Pods(Namespace).List(ctx, opts)
		return items(l, err, func(l *corev1.PodList) []corev1.Pod { return l.Items })
	})
	seed(v1.Models().Informer().GetIndexer().Add, func() ([]runtime.Object, error) {
		l, err := f.Sedna.SednaV1alpha1().Models(Namespace).List(ctx, opts)
		return items(l, err, func(l *sednav1.ModelList) []sednav1.Model { return l.Items })
	})
	seed(v1.Datasets().Informer().GetIndexer().Add, func() ([]runtime.Object, error) {
		l, err := f.Sedna.SednaV1alpha1().Datasets(Namespace).List(ctx, opts)
		return items(l, err, func(l *sednav1.DatasetList) []sednav1.Dataset { return l.Items })
	})
	seed(v1.IncrementalLearningJobs().Informer().GetIndexer().Add, func() ([]runtime.Object, error) {
		l, err := f.Sedna.SednaV1alpha1().IncrementalLearningJobs(Namespace).List(ctx, opts)
		return items(l, err, func(l *sednav1.IncrementalLearningJobList) []sednav1.IncrementalLearningJob { return l.Items })
	})
	seed(v1.LifelongLearningJobs().Informer().GetIndexer().Add, func() ([]runtime.Object, error) {
		l, err := f.Sedna.SednaV1alpha1().LifelongLearningJobs(Namespace).List(ctx, opts)
		return items(l, err, func(l *sednav1.LifelongLearningJobList) []sednav1.LifelongLearningJob { return l.Items })
	})
}

// items turns a list's items into pointers to objects.
func items[L any, T any, PT interface {
	*T
	runtime.Object
}](l L, err error, of func(L) []T) ([]runtime.Object, error) {
	if err != nil {
		return nil, err
	}
	list := of(l)
	out := make([]runtime.Object, len(list))
	for i := range list {
		out[i] = PT(&list[i])
	}
	return out, nil
}

// Sync runs one sync of the job named name.
func (f *Fixture[J]) Sync(t *testing.T, name string) {
	t.Helper()
	if err := f.C.Sync(t.Context(), Namespace+"/"+name); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// Store is the identity of the test LocalControllers' stores.
const Store = "store-1"

// Report applies a report the LocalController of node (its store Store)
// forwards under id.
// FirstTrain syncs a new job, has node's LocalController fire its round
// 1 train trigger of samples (report 1) and syncs again: the returned
// fixture has made round 1's train pod.
func (f *Fixture[J]) FirstTrain(t *testing.T, node string, ownerKind edgeproto.OwnerKind, job string, samples int32) *Fixture[J] {
	t.Helper()
	f.Sync(t, job)
	f = f.Next(t)
	f.Report(t, node, 1, Trigger(ownerKind, job, 1, samples))
	f = f.Next(t)
	f.Sync(t, job)
	return f
}

func (f *Fixture[J]) Report(t *testing.T, node string, id uint64, info edgeproto.WorkerInfo) {
	t.Helper()
	if err := f.Apply(t, node, id, info); err != nil {
		t.Fatalf("ApplyReport: %v", err)
	}
}

// Apply applies a report as Report does and returns the applier's error.
func (f *Fixture[J]) Apply(t *testing.T, node string, id uint64, info edgeproto.WorkerInfo) error {
	t.Helper()
	if info.Namespace == "" {
		info.Namespace = Namespace
	}
	body, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	r := &edgeproto.Report{ID: id, Worker: info.Name, Body: body, ReceivedAt: f.Clock.Now()}
	return f.C.ApplyReports(t.Context(), edgeproto.Source{Node: node, Store: Store}, []edgeproto.WorkerReport{{Report: r, Info: &info}})[0]
}

// Pods are the pods the kube client holds, by name.
func (f *Fixture[J]) Pods(t *testing.T) map[string]*corev1.Pod {
	t.Helper()
	l, err := f.Kube.CoreV1().Pods(Namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

// Pod is the pod named name; the test fails without it.
func (f *Fixture[J]) Pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, ok := f.Pods(t)[name]
	if !ok {
		t.Fatalf("no pod %s; pods: %v", name, keys(f.Pods(t)))
	}
	return p
}

// SetPodPhase moves a pod to phase, as the kubelet would.
func (f *Fixture[J]) SetPodPhase(t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	p := f.Pod(t, name)
	p.Status.Phase = phase
	if _, err := f.Kube.CoreV1().Pods(Namespace).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// DeletePod deletes a pod, as a user would.
func (f *Fixture[J]) DeletePod(t *testing.T, name string) {
	t.Helper()
	if err := f.Kube.CoreV1().Pods(Namespace).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Writes are the kube client's creates and deletes of this step, as "verb
// resource name", sorted.
func (f *Fixture[J]) Writes() []string {
	var out []string
	for _, a := range f.Kube.Actions() {
		switch a := a.(type) {
		case clienttesting.CreateAction:
			out = append(out, "create "+a.GetResource().Resource+" "+a.GetObject().(metav1.Object).GetName())
		case clienttesting.DeleteAction:
			out = append(out, "delete "+a.GetResource().Resource+" "+a.GetName())
		}
	}
	sort.Strings(out)
	return out
}

// StatusWrites counts this step's writes of job statuses.
func (f *Fixture[J]) StatusWrites() int {
	n := 0
	for _, a := range f.Sedna.Actions() {
		if a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource != "models" {
			n++
		}
	}
	return n
}

// Events are the events recorded so far, as "Type Reason Message".
func (f *Fixture[J]) Events() []string {
	var out []string
	for {
		select {
		case e := <-f.Recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Env is a pod's first container's environment, literal values only.
func Env(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		if e.ValueFrom == nil {
			out[e.Name] = e.Value
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Trigger is the LocalController's report that round's train trigger fired.
func Trigger(ownerKind edgeproto.OwnerKind, job string, round, samples int32) edgeproto.WorkerInfo {
	info, _ := json.Marshal(map[string]any{
		"round": round, "numberOfSamples": samples, "datasetSamples": 1000 * round,
		"trainDatasetURL": "/output/round-" + itoa(round) + "/data/train.txt",
		"testDatasetURL":  "/output/round-" + itoa(round) + "/data/test.txt",
		"triggeredAt":     "2026-01-02T03:04:05Z",
	})
	return edgeproto.WorkerInfo{Name: edgeproto.LocalControllerWorker, OwnerName: job, OwnerKind: ownerKind,
		Kind: edgeproto.StageTrain, Status: edgeproto.WorkerReady, OwnerInfo: info}
}

// Worker is a stage worker's report; results are JSON objects.
func Worker(ownerKind edgeproto.OwnerKind, job, worker string, stage edgeproto.Stage, status edgeproto.WorkerStatus, results ...string) edgeproto.WorkerInfo {
	info := edgeproto.WorkerInfo{Name: worker, OwnerName: job, OwnerKind: ownerKind, Kind: stage, Status: status}
	for _, r := range results {
		info.Results = append(info.Results, json.RawMessage(r))
	}
	return info
}

func itoa(n int32) string {
	b, _ := json.Marshal(n)
	return string(b)
}
