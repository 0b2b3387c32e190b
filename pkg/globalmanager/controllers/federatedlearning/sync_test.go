package federatedlearning

import (
	"errors"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/internal/fakeapi"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednafake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

const ns = "default"

var testConfig = Config{AggregationPort: 7363}

// testWorker is what workers are told of their LocalController and data.
var testWorker = kinds.Worker{LocalController: common.LCAddress{Port: 9100}, LogLevel: "INFO", DataPathPrefix: "/home/data"}

func exampleJob(t *testing.T) *sednav1.FederatedLearningJob {
	t.Helper()
	data, err := os.ReadFile("../../../../examples/federatedlearningjob/10-federatedlearningjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := &sednav1.FederatedLearningJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace, job.UID, job.Generation = ns, "job-uid", 1
	return job
}

func referencedObjects() []runtime.Object {
	return []runtime.Object{
		&sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: "surface-defect-detection-model", Namespace: ns}, Spec: sednav1.ModelSpec{URL: "/model/surface-defect", Format: "pb"}},
		&sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "edge0-surface-defect-detection-dataset", Namespace: ns}, Spec: sednav1.DatasetSpec{URL: "/data/surface-defect/1.txt", Format: "txt", NodeName: "edge-0"}},
		&sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "edge1-surface-defect-detection-dataset", Namespace: ns}, Spec: sednav1.DatasetSpec{URL: "/data/surface-defect/2.txt", Format: "txt", NodeName: "edge-1"}},
	}
}

type fixture struct {
	c     *Controller
	kube  *kubefake.Clientset
	sedna *sednafake.Clientset
}

// newFixture seeds the fake clients and the informers' indexers with objs.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	var kubeObjs, sednaObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Pod); ok {
			kubeObjs = append(kubeObjs, o)
		} else if _, ok := o.(*corev1.Service); ok {
			kubeObjs = append(kubeObjs, o)
		} else {
			sednaObjs = append(sednaObjs, o)
		}
	}
	f := &fixture{kube: kubefake.NewClientset(kubeObjs...), sedna: sednafake.NewClientset(sednaObjs...)}
	fakeapi.ConditionalUpdates(f.sedna)
	ki := kubeinformers.NewSharedInformerFactory(f.kube, 0)
	si := sednainformers.NewSharedInformerFactory(f.sedna, 0)
	v1 := si.Sedna().V1alpha1()
	c, err := NewController(t.Context(), kinds.Deps{Kube: f.kube, Client: f.sedna, KubeInformers: ki, Informers: si,
		Recorder: record.NewFakeRecorder(100), Worker: testWorker, Clock: testingclock.NewFakePassiveClock(time.Unix(1000, 0))}, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			err = ki.Core().V1().Pods().Informer().GetIndexer().Add(o)
		case *corev1.Service:
			err = ki.Core().V1().Services().Informer().GetIndexer().Add(o)
		case *sednav1.FederatedLearningJob:
			err = v1.FederatedLearningJobs().Informer().GetIndexer().Add(o)
		case *sednav1.Model:
			err = v1.Models().Informer().GetIndexer().Add(o)
		case *sednav1.Dataset:
			err = v1.Datasets().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f.c = c
	return f
}

func (f *fixture) sync(t *testing.T, job *sednav1.FederatedLearningJob) {
	t.Helper()
	if err := f.c.sync(t.Context(), ns+"/"+job.Name); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// kubeWrites summarises the fake kube client's writes as "verb resource name".
func (f *fixture) kubeWrites() []string {
	var out []string
	for _, a := range f.kube.Actions() {
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

func (f *fixture) createdPods() map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, a := range f.kube.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok {
			if p, ok := c.GetObject().(*corev1.Pod); ok {
				out[p.Name] = p
			}
		}
	}
	return out
}

func (f *fixture) status(t *testing.T, name string) sednav1.FederatedLearningJobStatus {
	t.Helper()
	for i := len(f.sedna.Actions()) - 1; i >= 0; i-- {
		if u, ok := f.sedna.Actions()[i].(clienttesting.UpdateAction); ok && u.GetSubresource() == "status" {
			return u.GetObject().(*sednav1.FederatedLearningJob).Status
		}
	}
	t.Fatalf("no status update for %s", name)
	return sednav1.FederatedLearningJobStatus{}
}

func envOf(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return out
}

func TestNewJobCreatesWorkersWithSednaEnvironment(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, append(referencedObjects(), job)...)
	f.sync(t, job)

	pods := f.createdPods()
	if len(pods) != 3 {
		t.Fatalf("created %d pods, want 3: %v", len(pods), f.kubeWrites())
	}
	var agg, train0 *corev1.Pod
	for _, p := range pods {
		switch {
		case p.Labels[common.LabelWorkerRole] == roleAggregation:
			agg = p
		case strings.Contains(p.Name, "-training-0-"):
			train0 = p
		}
	}
	if agg == nil || train0 == nil {
		t.Fatalf("missing aggregation or training-0 pod: %v", f.kubeWrites())
	}
	wantTrain := map[string]string{
		"NAMESPACE": ns, "JOB_NAME": job.Name, "WORKER_NAME": train0.Name, "LC_SERVER": "http://$(NEREID_NODE_IP):9100", "NEREID_NODE_IP": "",
		"AGG_IP": "surface-defect-detection-aggregation." + ns, "AGG_PORT": "7363", "PARTICIPANTS_COUNT": "2",
		"TRANSMITTER": "ws", "DATASET_NAME": "edge0-surface-defect-detection-dataset",
		"TRAIN_DATASET_URL": "/home/data/data/surface-defect/1.txt", "MODEL_URL": "/home/data/model/surface-defect",
		"MODEL_NAME": "surface-defect-detection-model", "LOG_LEVEL": "INFO", "DATA_PATH_PREFIX": "/home/data",
		// The user's own variables stay.
		"batch_size": "32", "learning_rate": "0.001", "epochs": "2",
	}
	if diff := cmp.Diff(wantTrain, envOf(train0)); diff != "" {
		t.Errorf("training worker env (-want,+got):\n%s", diff)
	}
	if got := envOf(agg)["AGG_BIND_PORT"]; got != "7363" {
		t.Errorf("AGG_BIND_PORT = %q", got)
	}
	if train0.Spec.NodeName != "edge-0" || agg.Spec.NodeName != "cloud-0" {
		t.Errorf("nodeName of the template not honoured: training-0 on %q, aggregation on %q", train0.Spec.NodeName, agg.Spec.NodeName)
	}
	ref := metav1.GetControllerOf(train0)
	if ref == nil || ref.Kind != "FederatedLearningJob" || ref.UID != job.UID || ref.APIVersion != "sedna.io/v1alpha1" {
		t.Errorf("controller reference %+v", ref)
	}
	if len(train0.Spec.Volumes) == 0 || train0.Spec.Volumes[0].HostPath == nil {
		t.Errorf("the dataset folder is not mounted: %+v", train0.Spec.Volumes)
	}
	if w := f.kubeWrites(); !contains(w, "create services surface-defect-detection-aggregation") {
		t.Errorf("no aggregation service created: %v", w)
	}
	for _, a := range f.sedna.Actions() {
		if a.GetSubresource() == "status" {
			t.Errorf("status written while the pods' add events are pending: %v", a)
		}
	}

	// Once the pods are seen (Pending, as the scheduler leaves them), the status says so.
	var seen []runtime.Object
	for _, p := range pods {
		p.Status.Phase = corev1.PodPending
		seen = append(seen, p)
	}
	f = newFixture(t, append(append(referencedObjects(), job), seen...)...)
	f.sync(t, job)
	st := f.status(t, job.Name)
	if st.Phase != sednav1.FLJobPending || st.ObservedGeneration != 1 || st.StartTime == nil || st.Active != 3 {
		t.Errorf("status: phase %q, observedGeneration %d, startTime %v, active %d", st.Phase, st.ObservedGeneration, st.StartTime, st.Active)
	}
	if !common.IsJobConditionTrue(st.Conditions, condWorkersCreated) {
		t.Errorf("WorkersCreated not True with every pod there: %+v", st.Conditions)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestMissingReferenceCreatesNothingAndSaysWhich(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, referencedObjects()[0], referencedObjects()[1], job) // no edge1 dataset
	f.sync(t, job)
	if w := f.kubeWrites(); len(w) != 0 {
		t.Errorf("writes while a dataset is missing: %v", w)
	}
	c := common.FindJobCondition(f.status(t, job.Name).Conditions, common.ConditionReferencesResolved)
	if c == nil || c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "Dataset edge1-surface-defect-detection-dataset") {
		t.Errorf("ReferencesResolved condition: %+v", c)
	}
}

// workerPods are the pods the controller would create for job, as if created and Running.
func workerPods(t *testing.T, job *sednav1.FederatedLearningJob, phase corev1.PodPhase) []runtime.Object {
	t.Helper()
	f := newFixture(t, append(referencedObjects(), job)...)
	f.sync(t, job)
	var out []runtime.Object
	for _, p := range f.createdPods() {
		p.UID = types.UID("uid-" + p.Name)
		p.Status.Phase = phase
		out = append(out, p)
	}
	return out
}

func TestSyncActsOnlyOnDifferences(t *testing.T) {
	cases := map[string]struct {
		edit       func(job *sednav1.FederatedLearningJob)
		pods       func(pods []runtime.Object) []runtime.Object
		unsatisfy  bool
		wantWrites func(job *sednav1.FederatedLearningJob, pods []runtime.Object) []string
	}{
		"all workers running: nothing to do": {
			wantWrites: func(*sednav1.FederatedLearningJob, []runtime.Object) []string { return nil },
		},
		"a deleted worker is recreated": {
			pods: func(pods []runtime.Object) []runtime.Object { return pods[1:] },
			wantWrites: func(_ *sednav1.FederatedLearningJob, pods []runtime.Object) []string {
				return []string{"create pods " + pods[0].(*corev1.Pod).Name}
			},
		},
		"unsatisfied expectations: nothing is created twice": {
			pods:       func(pods []runtime.Object) []runtime.Object { return pods[1:] },
			unsatisfy:  true,
			wantWrites: func(*sednav1.FederatedLearningJob, []runtime.Object) []string { return nil },
		},
		"a spec edit replaces that worker only": {
			edit: func(job *sednav1.FederatedLearningJob) {
				job.Generation = 2
				job.Spec.TrainingWorkers[1].Template.Spec.Containers[0].Image = "train:v2"
			},
			wantWrites: func(job *sednav1.FederatedLearningJob, pods []runtime.Object) []string {
				var old string
				for _, p := range pods {
					if strings.Contains(p.(*corev1.Pod).Name, "-training-1-") {
						old = p.(*corev1.Pod).Name
					}
				}
				return []string{"create pods NEW-training-1", "delete pods " + old}
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := exampleJob(t)
			pods := workerPods(t, job, corev1.PodRunning)
			sort.Slice(pods, func(i, j int) bool { return pods[i].(*corev1.Pod).Name < pods[j].(*corev1.Pod).Name })
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: serviceName(job), Namespace: ns,
				Labels: common.OwnerLabels(job, "federatedlearningjob"), OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)}}}
			want := tc.wantWrites(job, pods)
			if tc.edit != nil {
				tc.edit(job)
			}
			if tc.pods != nil {
				pods = tc.pods(pods)
			}
			f := newFixture(t, append(append(referencedObjects(), job, svc), pods...)...)
			if tc.unsatisfy {
				f.c.exp.ExpectCreations(ns+"/"+job.Name, 1)
			}
			f.sync(t, job)
			got := f.kubeWrites()
			// New pod names carry a hash; compare their stable part.
			for i, w := range got {
				if strings.HasPrefix(w, "create pods ") && strings.Contains(w, "-training-1-") && tc.edit != nil {
					got[i] = "create pods NEW-training-1"
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("writes (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestFinishedJobAppliesCleanPodPolicy(t *testing.T) {
	cases := map[string]struct {
		policy     sednav1.CleanPodPolicy
		wantDelete int
	}{
		"default Running deletes the running workers": {policy: "", wantDelete: 2},
		"All deletes every worker":                    {policy: sednav1.CleanPodPolicyAll, wantDelete: 3},
		"None keeps them":                             {policy: sednav1.CleanPodPolicyNone, wantDelete: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := exampleJob(t)
			pods := workerPods(t, job, corev1.PodRunning)
			for _, p := range pods {
				if p.(*corev1.Pod).Labels[common.LabelWorkerRole] == roleAggregation {
					p.(*corev1.Pod).Status.Phase = corev1.PodSucceeded
				}
			}
			job.Spec.CleanPodPolicy = tc.policy
			f := newFixture(t, append(append(referencedObjects(), job), pods...)...)
			f.sync(t, job)
			if st := f.status(t, job.Name); st.Phase != sednav1.FLJobSucceeded || st.CompletionTime == nil {
				t.Fatalf("phase %q completionTime %v, want Succeeded with a time", st.Phase, st.CompletionTime)
			}
			// The next sync sees the finished job and cleans, creating nothing.
			job.Status = f.status(t, job.Name)
			f = newFixture(t, append(append(referencedObjects(), job), pods...)...)
			f.sync(t, job)
			deletes := 0
			for _, w := range f.kubeWrites() {
				if strings.HasPrefix(w, "delete pods") {
					deletes++
				} else {
					t.Errorf("unexpected write for a finished job: %s", w)
				}
			}
			if deletes != tc.wantDelete {
				t.Errorf("deleted %d pods, want %d", deletes, tc.wantDelete)
			}
		})
	}
}

// TestAQuotaRefusalRemovesWhatWasMade: the API server refuses a pod for
// quota after the job was admitted (another writer took the room): the
// pods made of the job go again, so no part of it holds the quota while it
// waits, and a QuotaExceeded warning says so.
func TestAQuotaRefusalRemovesWhatWasMade(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, append(referencedObjects(), job)...)
	var creates atomic.Int32
	f.kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if creates.Add(1) == 2 {
			name := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod).Name
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), name,
				errors.New("exceeded quota: q, requested: requests.cpu=1, used: requests.cpu=4, limited: requests.cpu=4"))
		}
		return false, nil, nil
	})
	err := f.c.sync(t.Context(), ns+"/"+job.Name)
	if !admission.IsQuotaRefusal(err) {
		t.Fatalf("sync error %v, want the quota's refusal", err)
	}
	var made, deleted []string
	for _, a := range f.kube.Actions() {
		switch a := a.(type) {
		case clienttesting.CreateAction:
			if p, ok := a.GetObject().(*corev1.Pod); ok {
				made = append(made, p.Name)
			}
		case clienttesting.DeleteAction:
			deleted = append(deleted, a.GetName())
		}
	}
	// The refused pod is among those the client was asked for; the others
	// made were deleted, every one.
	sort.Strings(deleted)
	kept := map[string]bool{}
	for _, n := range made {
		kept[n] = true
	}
	for _, n := range deleted {
		delete(kept, n)
	}
	if len(deleted) == 0 || len(kept) != 1 {
		t.Errorf("made %v, deleted %v: want every pod made deleted, only the refused one never made", made, deleted)
	}
	st := f.status(t, job.Name)
	if c := common.FindJobCondition(st.Conditions, condWorkersCreated); c == nil || c.Status != corev1.ConditionFalse {
		t.Errorf("WorkersCreated %+v, want False while the job waits whole", c)
	}
	events := f.c.children.Recorder.(*record.FakeRecorder).Events
	found := false
	for len(events) > 0 && !found {
		found = strings.Contains(<-events, "Warning "+admission.ReasonQuotaExceeded)
	}
	if !found {
		t.Error("no QuotaExceeded warning")
	}
}

// Of what Nereid sets, a template overrides what Sedna's GlobalManager does
// not set for the worker type (createAggPod, createTrainPod): the
// aggregator's MODEL_NAME and LC_SERVER among them, never a trainer's.
func TestWorkersDefaultsAreWhatSednaDoesNotSet(t *testing.T) {
	f := newFixture(t, referencedObjects()...)
	job := exampleJob(t)
	refs, missing, err := f.c.resolve(job)
	if err != nil || len(missing) > 0 {
		t.Fatalf("resolving the example: missing %v, err %v", missing, err)
	}
	workers, err := f.c.desiredWorkers(job, refs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		roleAggregation: {"LOG_LEVEL", "MODEL_NAME", "NEREID_NODE_IP", "LC_SERVER"},
		roleTraining:    {"LOG_LEVEL", "NEREID_NODE_IP", "LC_SERVER"},
	}
	for _, w := range workers {
		if diff := cmp.Diff(want[w.Role], w.Defaults()); diff != "" {
			t.Errorf("%s worker %s: what a template overrides (-want,+got):\n%s", w.Role, w.Name, diff)
		}
	}
}
