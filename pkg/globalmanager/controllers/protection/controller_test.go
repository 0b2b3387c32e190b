package protection

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/nereid-ml/nereid/internal/testwait"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// protectionCase is a Model, the jobs that name it, and what sync does.
type protectionCase struct {
	model          *sednav1.Model
	jobs           []runtime.Object
	wantFinalizer  bool
	wantBlocked    bool
	wantEvents     int
	wantNoWriteAll bool
	uncached       bool   // the jobs are in the API server, not yet in the caches
	listFails      bool   // the API server refuses lists
	wantReason     string // of DeletionBlocked, when blocked
}

func protectionCases() map[string]protectionCase {
	deleting := metav1.Now()
	model := func(finalizers []string, deleted *metav1.Time) *sednav1.Model {
		return &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Finalizers: finalizers, DeletionTimestamp: deleted},
			Spec: sednav1.ModelSpec{URL: "/models/m.pb", Format: "pb"}}
	}
	user := &sednav1.IncrementalLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "il", Namespace: "ns"},
		Spec: sednav1.IncrementalLearningJobSpec{InitialModel: sednav1.ModelRef{Name: "m"},
			DeploySpec: sednav1.DeploySpec{Model: sednav1.DeployModel{Name: "other"}}}}
	return map[string]protectionCase{
		"a new model gets the finalizer":                    {model: model(nil, nil), wantFinalizer: true},
		"a deleted model a job names waits, and says why":   {model: model([]string{ModelFinalizer}, &deleting), jobs: []runtime.Object{user}, wantFinalizer: true, wantBlocked: true, wantEvents: 1},
		"a deleted model no job names is released":          {model: model([]string{ModelFinalizer}, &deleting)},
		"a protected model no one deletes is left as it is": {model: model([]string{ModelFinalizer}, nil), jobs: []runtime.Object{user}, wantFinalizer: true, wantNoWriteAll: true},
		"a deleted model a job the caches have not seen yet names waits": {model: model([]string{ModelFinalizer}, &deleting), jobs: []runtime.Object{user}, uncached: true,
			wantFinalizer: true, wantBlocked: true, wantEvents: 1},
		"a deleted model is released when the API server's jobs name other models": {model: model([]string{ModelFinalizer}, &deleting), uncached: true,
			jobs: []runtime.Object{&sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "fl", Namespace: "ns"},
				Spec: sednav1.FederatedLearningJobSpec{AggregationWorker: sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: "m2"}}}}}},
		"a deleted model a joint inference service the caches have not seen names waits": {model: model([]string{ModelFinalizer}, &deleting), uncached: true,
			jobs:          []runtime.Object{&sednav1.JointInferenceService{ObjectMeta: metav1.ObjectMeta{Name: "ji", Namespace: "ns"}, Spec: sednav1.JointInferenceServiceSpec{EdgeWorker: sednav1.EdgeWorker{Model: sednav1.ModelRef{Name: "m"}}}}},
			wantFinalizer: true, wantBlocked: true, wantEvents: 1},
		"a job of another namespace naming a model of the same name holds no one": {model: model([]string{ModelFinalizer}, &deleting), uncached: true,
			jobs: []runtime.Object{&sednav1.IncrementalLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "il", Namespace: "elsewhere"},
				Spec: sednav1.IncrementalLearningJobSpec{InitialModel: sednav1.ModelRef{Name: "m"}}}}},
		"a deleted model whose jobs cannot be listed waits, and says why": {model: model([]string{ModelFinalizer}, &deleting), listFails: true,
			wantFinalizer: true, wantBlocked: true, wantReason: "CannotVerify", wantEvents: 1},
		"a deleted model without our finalizer is left to go": {model: model([]string{"someone.else/keep"}, &deleting), wantFinalizer: false, wantNoWriteAll: true},
	}
}

func TestModelProtection(t *testing.T) {
	tests := protectionCases()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, client, factory, recorder := newTestController(t, append([]runtime.Object{tc.model}, tc.jobs...)...)
			v1 := factory.Sedna().V1alpha1()
			if err := v1.Models().Informer().GetIndexer().Add(tc.model); err != nil {
				t.Fatal(err)
			}
			for _, j := range tc.jobs {
				if _, il := j.(*sednav1.IncrementalLearningJob); il && !tc.uncached {
					if err := v1.IncrementalLearningJobs().Informer().GetIndexer().Add(j); err != nil {
						t.Fatal(err)
					}
				}
			}
			if tc.listFails {
				client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, errors.New("the API server is unavailable")
				})
			}
			c.recheck = time.Millisecond
			client.ClearActions()
			if err := c.sync(t.Context(), "ns/m"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if err := c.listLive(t.Context(), "ns"); (err != nil) != tc.listFails {
				t.Fatalf("live list: %v, want an error: %v", err, tc.listFails)
			}
			if tc.wantNoWriteAll && len(client.Actions()) != 0 {
				t.Errorf("actions %v, want none", client.Actions())
			}
			// The API server is asked only when the caches name no job.
			lists := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "list" {
					lists++
				}
			}
			wantLists := 0
			switch {
			case tc.model.DeletionTimestamp == nil || !slices.Contains(tc.model.Finalizers, ModelFinalizer) || !tc.uncached && len(tc.jobs) > 0:
			case tc.listFails:
				wantLists = 1 // the first fails
			default:
				wantLists = 3 // one page of each kind that names Models
			}
			if lists != wantLists {
				t.Errorf("%d lists of jobs, want %d", lists, wantLists)
			}
			got, err := client.SednaV1alpha1().Models("ns").Get(t.Context(), "m", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if has := slices.Contains(got.Finalizers, ModelFinalizer); has != tc.wantFinalizer {
				t.Errorf("finalizer present = %v, want %v", has, tc.wantFinalizer)
			}
			if blocked := apimeta.IsStatusConditionTrue(got.Status.Conditions, ConditionDeletionBlocked); blocked != tc.wantBlocked {
				t.Errorf("DeletionBlocked = %v, want %v (%v)", blocked, tc.wantBlocked, got.Status.Conditions)
			}
			if c := apimeta.FindStatusCondition(got.Status.Conditions, ConditionDeletionBlocked); tc.wantBlocked && c != nil && c.Reason != cmp.Or(tc.wantReason, "InUse") {
				t.Errorf("DeletionBlocked reason %q (%s), want %q", c.Reason, c.Message, cmp.Or(tc.wantReason, "InUse"))
			}
			// A Model held only by jobs the caches have not shown is
			// looked at again later, whatever happens meanwhile.
			if tc.uncached && tc.wantBlocked {
				testwait.Eventually(t, 5*time.Second, "the Model queued again", func(context.Context) (bool, error) {
					return c.queue.Len() > 0, nil
				})
			}
			if len(recorder.Events) != tc.wantEvents {
				t.Errorf("%d events, want %d", len(recorder.Events), tc.wantEvents)
			}
		})
	}
}

// deletedModel is a Model of namespace ns, deleted, that carries the
// finalizer.
func deletedModel(ns, name string) *sednav1.Model {
	deleting := metav1.Now()
	return &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{ModelFinalizer}, DeletionTimestamp: &deleting},
		Spec: sednav1.ModelSpec{URL: "/models/" + name + ".pb", Format: "pb"}}
}

// newTestController is a controller over a fake client's informers, which
// are not started: tests add to their caches and call the handlers.
func newTestController(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset, sednainformers.SharedInformerFactory, *record.FakeRecorder) {
	t.Helper()
	client := fake.NewSimpleClientset(objs...)
	factory := sednainformers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	c, err := NewController(t.Context(), kinds.Deps{Client: client, Informers: factory, Recorder: recorder,
		Metrics: common.NewMetrics(prometheus.NewRegistry()), Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	return c, client, factory, recorder
}

func TestOnlyAChangeOfTheModelsAJobNamesEnqueuesThem(t *testing.T) {
	c, _, _, _ := newTestController(t)
	h := c.jobHandler(common.ModelNames)
	job := &sednav1.IncrementalLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "il", Namespace: "ns", ResourceVersion: "1"},
		Spec: sednav1.IncrementalLearningJobSpec{InitialModel: sednav1.ModelRef{Name: "m"},
			DeploySpec: sednav1.DeploySpec{Model: sednav1.DeployModel{Name: "other"}}}}

	// A status write (and a resync) names the same Models.
	written := job.DeepCopy()
	written.ResourceVersion = "2"
	written.Status.Conditions = []sednav1.StageCondition{{Stage: "Train"}}
	h.OnUpdate(job, written)
	h.OnUpdate(written, written)
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("a status write enqueued %d Models, want none", n)
	}

	// A spec that stops naming one Model and names another enqueues both.
	respec := written.DeepCopy()
	respec.Spec.DeploySpec.Model.Name = "new"
	h.OnUpdate(written, respec)
	var got []string
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		got = append(got, k)
		c.queue.Done(k)
	}
	slices.Sort(got)
	if want := []string{"ns/m", "ns/new", "ns/other"}; !slices.Equal(got, want) {
		t.Errorf("a changed spec enqueued %v, want %v", got, want)
	}
}

func TestADeletedModelNamesTenOfItsJobsAndCountsTheRest(t *testing.T) {
	model := deletedModel("ns", "m")
	c, client, factory, recorder := newTestController(t, model)
	v1 := factory.Sedna().V1alpha1()
	if err := v1.Models().Informer().GetIndexer().Add(model); err != nil {
		t.Fatal(err)
	}
	// Names of the most a job may have: 1,000 of them would make a list
	// past a condition message's 32,768 bytes.
	const jobs = 1000
	long := strings.Repeat("j", 240)
	for i := range jobs {
		job := &sednav1.IncrementalLearningJob{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%04d", long, i), Namespace: "ns"},
			Spec: sednav1.IncrementalLearningJobSpec{InitialModel: sednav1.ModelRef{Name: "m"}}}
		if err := v1.IncrementalLearningJobs().Informer().GetIndexer().Add(job); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.sync(t.Context(), "ns/m"); err != nil {
		t.Fatal(err)
	}
	got, err := client.SednaV1alpha1().Models("ns").Get(t.Context(), "m", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := apimeta.FindStatusCondition(got.Status.Conditions, ConditionDeletionBlocked)
	if cond == nil {
		t.Fatalf("no %s condition: %v", ConditionDeletionBlocked, got.Status.Conditions)
	}
	if n := strings.Count(cond.Message, "IncrementalLearningJob ns/"); n != maxUsersNamed {
		t.Errorf("the message names %d jobs, want %d: %q", n, maxUsersNamed, cond.Message)
	}
	if first := "IncrementalLearningJob ns/" + long + "-0000"; !strings.Contains(cond.Message, first) {
		t.Errorf("the message does not name the first job by name, %s: %q", first, cond.Message)
	}
	if want := fmt.Sprintf(" and %d more (%d jobs)", jobs-maxUsersNamed, jobs); !strings.HasSuffix(cond.Message, want) {
		t.Errorf("message %q does not end with %q", cond.Message, want)
	}
	if len(cond.Message) > 4096 {
		t.Errorf("message of %d bytes", len(cond.Message))
	}
	select {
	case ev := <-recorder.Events:
		if !strings.HasSuffix(ev, cond.Message) {
			t.Errorf("event %q, want the condition's message", ev)
		}
	default:
		t.Error("no event")
	}
}

// A live list reads every page the API server gives, holding only the names
// of the jobs that name the model.
func TestLiveListsReadEveryPage(t *testing.T) {
	job := func(name, model string) sednav1.FederatedLearningJob {
		return sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: sednav1.FederatedLearningJobSpec{AggregationWorker: sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: model}}}}
	}
	pages := map[string]*sednav1.FederatedLearningJobList{
		"":   {ListMeta: metav1.ListMeta{Continue: "p2"}, Items: []sednav1.FederatedLearningJob{job("a", "m"), job("x", "other")}},
		"p2": {Items: []sednav1.FederatedLearningJob{job("b", "m")}},
	}
	var limits []int64
	got, err := listNaming(t.Context(), map[string]bool{"m": true}, "ns", func(_ context.Context, _ string, o metav1.ListOptions) ([]metav1.Object, string, error) {
		limits = append(limits, o.Limit)
		if len(limits) > 3 {
			return nil, "", errors.New("listed past the last page")
		}
		page := pages[o.Continue]
		return kinds.Objects(page.Items), page.Continue, nil
	}, common.ModelNames)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "map[m:[a b]]" || fmt.Sprint(limits) != fmt.Sprint([]int64{listPage, listPage}) {
		t.Errorf("listed %v with limits %v, want m: [a b] in pages of %d", got, limits, listPage)
	}
}

// A Model that many jobs hold says so in one Warning event: as they go, one
// by one, its condition's count follows them without an event each time; a
// new reason to wait has an event of its own.
func TestADeletedModelWarnsOncePerReason(t *testing.T) {
	model := deletedModel("ns", "m")
	c, client, factory, recorder := newTestController(t, model)
	v1 := factory.Sedna().V1alpha1()
	models, jobs := v1.Models().Informer().GetIndexer(), v1.IncrementalLearningJobs().Informer().GetIndexer()
	var held []*sednav1.IncrementalLearningJob
	for i := range maxUsersNamed + 3 {
		job := &sednav1.IncrementalLearningJob{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("il-%02d", i), Namespace: "ns"},
			Spec: sednav1.IncrementalLearningJobSpec{InitialModel: sednav1.ModelRef{Name: "m"}}}
		if err := jobs.Add(job); err != nil {
			t.Fatal(err)
		}
		held = append(held, job)
	}
	// sync syncs the Model as the API server has it (the cache follows its
	// writes) and returns its condition and the events recorded.
	sync := func() (*metav1.Condition, []string) {
		t.Helper()
		current, err := client.SednaV1alpha1().Models("ns").Get(t.Context(), "m", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := models.Update(current); err != nil {
			t.Fatal(err)
		}
		_ = c.sync(t.Context(), "ns/m")
		_ = c.listLive(t.Context(), "ns")
		got, err := client.SednaV1alpha1().Models("ns").Get(t.Context(), "m", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var events []string
		for len(recorder.Events) > 0 {
			events = append(events, <-recorder.Events)
		}
		return apimeta.FindStatusCondition(got.Status.Conditions, ConditionDeletionBlocked), events
	}

	cond, events := sync()
	if cond == nil || !strings.HasSuffix(cond.Message, "and 3 more (13 jobs)") || len(events) != 1 {
		t.Fatalf("first sync: condition %v, events %q; want 13 jobs counted and one event", cond, events)
	}
	for i, want := range []string{"and 2 more (12 jobs)", "and 1 more (11 jobs)"} {
		if err := jobs.Delete(held[len(held)-1-i]); err != nil {
			t.Fatal(err)
		}
		cond, events = sync()
		if !strings.HasSuffix(cond.Message, want) || len(events) != 0 {
			t.Errorf("after a job went: condition %q, events %q; want it to end %q, and no event", cond.Message, events, want)
		}
	}

	// Every job gone from the caches, and the API server cannot say.
	for _, j := range held {
		_ = jobs.Delete(j)
	}
	client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is unavailable")
	})
	cond, events = sync()
	if cond.Reason != "CannotVerify" || len(events) != 1 {
		t.Errorf("a failed list: reason %q, events %q; want CannotVerify and one event", cond.Reason, events)
	}
	if _, events = sync(); len(events) != 0 {
		t.Errorf("a second failed list: events %q, want none", events)
	}
}

// The deleted Models of a namespace that wait for a live list share one: a
// thousand unused Models deleted at once list the namespace's jobs a few
// times, not three thousand. A Model that starts waiting while a list runs
// waits for the next one, which starts after its deletion was seen.
func TestLiveListsArePerNamespace(t *testing.T) {
	objs := []runtime.Object{
		deletedModel("ns", "m1"), deletedModel("ns", "m2"), deletedModel("ns", "m3"), deletedModel("ns", "m4"), deletedModel("ns", "late"), deletedModel("other", "m1"),
		// Named by a job the caches have not shown yet.
		&sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "fl", Namespace: "ns"},
			Spec: sednav1.FederatedLearningJobSpec{AggregationWorker: sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: "m2"}}}},
	}
	c, client, factory, _ := newTestController(t, objs...)
	c.recheck = time.Hour
	models := factory.Sedna().V1alpha1().Models().Informer().GetIndexer()
	for _, o := range objs {
		if m, ok := o.(*sednav1.Model); ok {
			if err := models.Add(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	lists := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "list" {
				n++
			}
		}
		return n
	}
	protected := func(ns, name string) bool {
		m, err := client.SednaV1alpha1().Models(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(m.Finalizers, ModelFinalizer)
	}
	for _, key := range []string{"ns/m1", "ns/m2", "ns/m3", "ns/m4", "other/m1"} {
		if err := c.sync(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	}
	if n := lists(); n != 0 {
		t.Fatalf("the Models' syncs listed jobs %d times, want none: the live list is the namespace's", n)
	}
	// "late" is seen deleted while the namespace's list runs.
	var once sync.Once
	client.PrependReactor("list", "federatedlearningjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() {
			if err := c.sync(t.Context(), "ns/late"); err != nil {
				t.Error(err)
			}
		})
		return false, nil, nil
	})
	client.ClearActions()
	if err := c.listLive(t.Context(), "ns"); err != nil {
		t.Fatal(err)
	}
	if n := lists(); n != 3 {
		t.Errorf("one round for four Models listed %d times, want 3 (a page of each kind)", n)
	}
	for name, want := range map[string]bool{"m1": false, "m2": true, "m3": false, "m4": false, "late": true} {
		if got := protected("ns", name); got != want {
			t.Errorf("after the first round, ns/%s protected = %v, want %v", name, got, want)
		}
	}
	if !protected("other", "m1") {
		t.Error("a Model of another namespace was released by this namespace's list")
	}

	// The next round is late's, and lists again.
	client.ClearActions()
	if err := c.listLive(t.Context(), "ns"); err != nil {
		t.Fatal(err)
	}
	if n := lists(); n != 3 || protected("ns", "late") {
		t.Errorf("the second round listed %d times, late protected = %v; want 3 lists and late released", n, protected("ns", "late"))
	}
	if err := c.listLive(t.Context(), "other"); err != nil {
		t.Fatal(err)
	}
	if protected("other", "m1") {
		t.Error("other/m1 is still protected after its namespace's round")
	}
}

// A Dataset is protected once a job names it, and not before: a fleet holds
// a Dataset a node, most named by no job, and a finalizer on each would be
// as many writes and as many objects sent down to their nodes again.
func TestADatasetIsProtectedOnceAJobNamesIt(t *testing.T) {
	ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"}}
	job := &sednav1.IncrementalLearningJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "il"},
		Spec: sednav1.IncrementalLearningJobSpec{Dataset: sednav1.CycleDataset{Name: "d"}}}
	client := fake.NewSimpleClientset(ds, job)
	factory := sednainformers.NewSharedInformerFactory(client, 0)
	c, err := NewDatasetController(t.Context(), kinds.Deps{Client: client, Informers: factory, Recorder: record.NewFakeRecorder(10),
		Metrics: common.NewMetrics(prometheus.NewRegistry()), Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	v1 := factory.Sedna().V1alpha1()
	if err := v1.Datasets().Informer().GetIndexer().Add(ds); err != nil {
		t.Fatal(err)
	}
	finalizers := func() []string {
		got, err := client.SednaV1alpha1().Datasets("ns").Get(t.Context(), "d", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Finalizers
	}
	if err := c.sync(t.Context(), "ns/d"); err != nil {
		t.Fatal(err)
	}
	if f := finalizers(); len(f) != 0 {
		t.Errorf("a Dataset no job names got finalizers %v", f)
	}
	if err := v1.IncrementalLearningJobs().Informer().GetIndexer().Add(job); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(t.Context(), "ns/d"); err != nil {
		t.Fatal(err)
	}
	if f := finalizers(); !slices.Equal(f, []string{DatasetFinalizer}) {
		t.Errorf("a Dataset a job names has finalizers %v, want %s", f, DatasetFinalizer)
	}
}
