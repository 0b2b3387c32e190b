package common

// The rules every kind follows through the shared plumbing: the sync's
// beginning and end (Syncer), the edge report applier (EdgeReports), the
// references an object names (References, SetReferencesResolved) and the
// base worker environment (BaseEnv).

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednalisters "github.com/nereid-ml/nereid/pkg/client/listers/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// caches are listers over indexers seeded with objects, as synced informers'.
type caches struct {
	jobs     sednalisters.FederatedLearningJobLister
	pods     cache.Indexer // with the owner index, as a Syncer's
	models   sednalisters.ModelLister
	datasets sednalisters.DatasetLister
}

func newCaches(t *testing.T, objs ...any) caches {
	t.Helper()
	indexer := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	jobs, pods, models, datasets := indexer(), indexer(), indexer(), indexer()
	if err := pods.AddIndexers(ChildIndexers); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *sednav1.FederatedLearningJob:
			err = jobs.Add(o)
		case *corev1.Pod:
			err = pods.Add(o)
		case *sednav1.Model:
			err = models.Add(o)
		case *sednav1.Dataset:
			err = datasets.Add(o)
		default:
			t.Fatalf("no cache for %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return caches{
		jobs: sednalisters.NewFederatedLearningJobLister(jobs), pods: pods,
		models: sednalisters.NewModelLister(models), datasets: sednalisters.NewDatasetLister(datasets),
	}
}

// statusServer is the API server's side of one job: a StatusClient whose
// status writes fail with writeErr, or with a conflict the first conflicts
// times (someone else wrote meanwhile, which the next read sees).
type statusServer struct {
	job       *sednav1.FederatedLearningJob
	writeErr  error
	conflicts int
	recorder  *record.FakeRecorder
	// writes are the statuses written; eventsAtWrite how many events had
	// been recorded at each attempt to write.
	writes        []sednav1.FederatedLearningJobStatus
	eventsAtWrite []int
}

func newStatusServer(job *sednav1.FederatedLearningJob) *statusServer {
	return &statusServer{job: job.DeepCopy(), recorder: record.NewFakeRecorder(10)}
}

func (s *statusServer) client(string) StatusClient[*sednav1.FederatedLearningJob] { return s }

func (s *statusServer) Get(_ context.Context, name string, _ metav1.GetOptions) (*sednav1.FederatedLearningJob, error) {
	if s.job == nil || s.job.Name != name {
		return nil, apierrors.NewNotFound(sednav1.Resource("federatedlearningjobs"), name)
	}
	return s.job.DeepCopy(), nil
}

func (s *statusServer) UpdateStatus(_ context.Context, j *sednav1.FederatedLearningJob, _ metav1.UpdateOptions) (*sednav1.FederatedLearningJob, error) {
	s.eventsAtWrite = append(s.eventsAtWrite, len(s.recorder.Events))
	switch {
	case s.writeErr != nil:
		return nil, s.writeErr
	case s.conflicts > 0:
		s.conflicts--
		s.job.Status.Active++
		return nil, apierrors.NewConflict(sednav1.Resource("federatedlearningjobs"), j.Name, errors.New("the object has been modified"))
	}
	s.writes = append(s.writes, j.Status)
	s.job = j.DeepCopy()
	return j, nil
}

func testJob() *sednav1.FederatedLearningJob {
	return &sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid", Generation: 1}}
}

// testJobServer is testJob, its status server failing writes with
// writeErr, and expectations.
func testJobServer(writeErr error) (*sednav1.FederatedLearningJob, *statusServer, *Expectations) {
	job := testJob()
	server := newStatusServer(job)
	server.writeErr = writeErr
	return job, server, NewExpectations()
}

// testSyncer is a Syncer of the jobs in c, writing to server.
func testSyncer(c caches, server *statusServer, exp *Expectations) *Syncer[*sednav1.FederatedLearningJob] {
	return &Syncer[*sednav1.FederatedLearningJob]{
		LogName: "job",
		Get: func(ns, name string) (*sednav1.FederatedLearningJob, error) {
			return c.jobs.FederatedLearningJobs(ns).Get(name)
		},
		Client:       server.client,
		Status:       func(j *sednav1.FederatedLearningJob) any { return &j.Status },
		Recorder:     server.recorder,
		Expectations: exp,
		Pods:         c.pods,
	}
}

// childPod is a pod with owner's labels whose controller has controllerUID.
func childPod(name string, owner *sednav1.FederatedLearningJob, controllerUID types.UID, labels map[string]string) *corev1.Pod {
	ref := metav1.NewControllerRef(owner, sednav1.FederatedLearningJobKind)
	ref.UID = controllerUID
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: owner.Namespace,
		Labels:          MergeLabels(OwnerLabels(owner, "federatedlearningjob"), labels),
		OwnerReferences: []metav1.OwnerReference{*ref}}}
}

func TestBeginReadsTheOwnerAndClaimsItsChildren(t *testing.T) {
	job := testJob()
	mine := childPod("mine", job, job.UID, nil)
	other := childPod("other-controller", job, "earlier-job-uid", nil)
	sednas := childPod("left-by-sedna", job, job.UID, map[string]string{LabelAdoptedFrom: AdoptedFromSedna})
	// The owner index is by namespace and UID: a pod elsewhere that names
	// the job's UID (in its label and controller reference) is not its.
	elsewhere := childPod("elsewhere", job, job.UID, nil)
	elsewhere.Namespace = "other-ns"
	exp := NewExpectations()
	syncer := testSyncer(newCaches(t, job, mine, other, sednas, elsewhere), newStatusServer(job), exp)
	exp.ExpectCreations("ns/job", 1)

	_, s, err := syncer.Begin(t.Context(), "ns/job")
	if err != nil || s == nil {
		t.Fatalf("Begin = %v, %v; want a sync", s, err)
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	got := map[string][]string{"own": names(s.Pods), "adopted": names(s.Adopted.Pods)}
	want := map[string][]string{"own": {"mine"}, "adopted": {"left-by-sedna"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claimed pods (-want,+got):\n%s", diff)
	}
	if s.Satisfied {
		t.Errorf("Satisfied with a creation pending")
	}
	s.Owner.Status.Phase = sednav1.FLJobRunning
	if cached, _ := syncer.Get("ns", "job"); cached.Status.Phase != "" {
		t.Errorf("the sync changed the cached owner: phase %q", cached.Status.Phase)
	}
}

func TestBeginHasNothingToDoForAnOwnerGoneOrGoing(t *testing.T) {
	deleting := testJob()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	cases := map[string]struct {
		key  string
		objs []any
	}{
		"gone":          {key: "ns/job"},
		"being deleted": {key: "ns/job", objs: []any{deleting}},
		"malformed key": {key: "ns/job/x", objs: []any{testJob()}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			exp := NewExpectations()
			syncer := testSyncer(newCaches(t, tc.objs...), newStatusServer(testJob()), exp)
			var forgotten []string
			syncer.Forget = func(key string) { forgotten = append(forgotten, key) }
			exp.ExpectCreations(tc.key, 1)
			_, s, err := syncer.Begin(t.Context(), tc.key)
			if s != nil || err != nil {
				t.Fatalf("Begin = %v, %v; want nothing to do", s, err)
			}
			if !exp.Satisfied(tc.key) {
				t.Errorf("the expectations of an owner with nothing to do are kept")
			}
			if diff := cmp.Diff([]string{tc.key}, forgotten); diff != "" {
				t.Errorf("forgotten keys (-want,+got):\n%s", diff)
			}
		})
	}
}

// Every kind ends its sync by one rule: End's.
func TestEndWritesStatusOnlyWhenItSaysSomethingAndEventsAfterIt(t *testing.T) {
	conflict := apierrors.NewConflict(sednav1.Resource("federatedlearningjobs"), "job", errors.New("the object has been modified"))
	actErr := errors.New("creating pod job-0: quota exceeded")
	event := Event{Type: corev1.EventTypeNormal, Reason: "Running", Message: "all workers are running"}
	type want struct {
		Writes int
		// EventsAtWrite is how many events were recorded when the status
		// was written: none, they come after.
		EventsAtWrite []int
		Events        int
		Err           bool
	}
	cases := map[string]struct {
		unchanged bool
		inFlight  bool
		events    []Event
		actErr    error
		writeErr  error
		want      want
	}{
		"changed: written, then the events": {
			events: []Event{event},
			want:   want{Writes: 1, EventsAtWrite: []int{0}, Events: 1},
		},
		"equal: no write, the events still recorded": {
			unchanged: true, events: []Event{event},
			want: want{Events: 1},
		},
		"own creates in flight, nothing to say: no write": {
			inFlight: true,
			want:     want{},
		},
		"own creates in flight with an event to tell: written": {
			inFlight: true, events: []Event{event},
			want: want{Writes: 1, EventsAtWrite: []int{0}, Events: 1},
		},
		"own creates in flight after a failed act: written, the act's error returned": {
			inFlight: true, actErr: actErr,
			want: want{Writes: 1, EventsAtWrite: []int{0}, Err: true},
		},
		"a conflict alone: no error, the events left to the next sync": {
			events: []Event{event}, writeErr: conflict,
			want: want{EventsAtWrite: []int{0}},
		},
		"a conflict after a failed act: the error, no events": {
			events: []Event{event}, actErr: actErr, writeErr: conflict,
			want: want{EventsAtWrite: []int{0}, Err: true},
		},
		"another write failure: the error, no events": {
			events: []Event{event}, writeErr: apierrors.NewInternalError(errors.New("etcd down")),
			want: want{EventsAtWrite: []int{0}, Err: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job, server, exp := testJobServer(tc.writeErr)
			ctx, s, err := testSyncer(newCaches(t, job), server, exp).Begin(t.Context(), "ns/job")
			if err != nil || s == nil {
				t.Fatalf("Begin = %v, %v", s, err)
			}
			if !tc.unchanged {
				s.Owner.Status.Phase = sednav1.FLJobRunning
			}
			if tc.inFlight {
				exp.ExpectCreations(s.Key, 1)
			}
			err = s.End(ctx, tc.actErr, tc.events, "phase", s.Owner.Status.Phase)
			got := want{Writes: len(server.writes), EventsAtWrite: server.eventsAtWrite, Events: len(server.recorder.Events), Err: err != nil}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
			if tc.actErr != nil && !errors.Is(err, tc.actErr) {
				t.Errorf("the sync's own error is lost: %v", err)
			}
		})
	}
}

// What one sync creates is told in one event, recorded by End whatever the
// status write does; outside a sync each create tells its own.
func TestASyncsCreatesAreToldInOneEvent(t *testing.T) {
	conflict := apierrors.NewConflict(sednav1.Resource("federatedlearningjobs"), "job", errors.New("the object has been modified"))
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	}
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	}
	cases := map[string]struct {
		inSync     bool
		existing   []runtime.Object
		writeErr   error
		wantEvents []string
		wantMade   []string
	}{
		"in a sync: one event naming the Service and every pod": {
			inSync:     true,
			wantEvents: []string{"Normal SuccessfulCreate Created service job-svc; pods job-a, job-b, job-c"},
			wantMade:   []string{"job-a", "job-b", "job-c"},
		},
		"in a sync whose status write conflicts: the event still told": {
			inSync: true, writeErr: conflict,
			wantEvents: []string{"Normal SuccessfulCreate Created service job-svc; pods job-a, job-b, job-c"},
			wantMade:   []string{"job-a", "job-b", "job-c"},
		},
		"in a sync where a pod existed: it is neither told nor made": {
			inSync: true, existing: []runtime.Object{pod("job-b")},
			wantEvents: []string{"Normal SuccessfulCreate Created service job-svc; pods job-a, job-c"},
			wantMade:   []string{"job-a", "job-c"},
		},
		"outside a sync: each create tells its own": {
			wantEvents: []string{"Normal SuccessfulCreate Created service: job-svc", "Normal SuccessfulCreate Created pods job-a, job-b, job-c"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job, server, exp := testJobServer(tc.writeErr)
			children := &Children{Client: kubefake.NewClientset(tc.existing...), Recorder: server.recorder, Expectations: exp}
			ctx := t.Context()
			var s *Sync[*sednav1.FederatedLearningJob]
			if tc.inSync {
				var err error
				if ctx, s, err = testSyncer(newCaches(t, job), server, exp).Begin(ctx, "ns/job"); err != nil || s == nil {
					t.Fatalf("Begin = %v, %v", s, err)
				}
				s.Owner.Status.Phase = sednav1.FLJobPending
			}
			if err := children.CreateService(ctx, job, svc("job-svc")); err != nil {
				t.Fatal(err)
			}
			// A pod that exists already is ours in the cache's eyes only
			// when its controller is the job.
			for _, o := range tc.existing {
				p := o.(*corev1.Pod)
				p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, sednav1.FederatedLearningJobKind)}
				if _, err := children.Client.CoreV1().Pods("ns").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := children.CreatePods(ctx, "ns/job", job, []*corev1.Pod{pod("job-c"), pod("job-a"), pod("job-b")}); err != nil {
				t.Fatal(err)
			}
			var made []string
			if s != nil {
				for _, p := range s.PodsMade() {
					made = append(made, p.Name)
				}
				sort.Strings(made)
				if err := s.End(ctx, nil, nil); err != nil && !apierrors.IsConflict(err) {
					t.Fatalf("End: %v", err)
				}
			}
			if diff := cmp.Diff(tc.wantMade, made); diff != "" {
				t.Errorf("PodsMade (-want,+got):\n%s", diff)
			}
			var events []string
			for len(server.recorder.Events) > 0 {
				events = append(events, <-server.recorder.Events)
			}
			if diff := cmp.Diff(tc.wantEvents, events); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
		})
	}
}

// Every kind applies what the edge reports by one rule: EdgeReports'.
func TestEdgeReportsApplyEachReportOnceAndTellAfterTheWrite(t *testing.T) {
	from := edgeproto.Source{Node: "edge-0", Store: "store-1"}
	told := Event{Type: corev1.EventTypeNormal, Reason: "Round", Message: "round 2 trains"}
	type want struct {
		Refused bool
		Err     bool
		Writes  int
		// Applied is how many times the kind's part ran.
		Applied       int
		EventsAtWrite []int
		Events        int
		// Worker is whom the edgeNodes entry heard from.
		Worker string
		// Active is another writer's change, kept when a conflict made the
		// report apply to the newer object.
		Active int32
	}
	cases := map[string]struct {
		ids       []uint64
		owner     string
		conflicts int
		kindErr   error
		want      want
	}{
		"a report sent twice is applied once, its event once after the write": {
			ids:  []uint64{5, 5},
			want: want{Writes: 1, Applied: 1, EventsAtWrite: []int{0}, Events: 1, Worker: "w"},
		},
		"an older report after a newer one changes nothing": {
			ids:  []uint64{5, 4},
			want: want{Writes: 1, Applied: 1, EventsAtWrite: []int{0}, Events: 1, Worker: "w"},
		},
		"a conflict reads the object again and applies the report again, its event once": {
			ids: []uint64{5}, conflicts: 2,
			want: want{Writes: 1, Applied: 3, EventsAtWrite: []int{0, 0, 0}, Events: 1, Worker: "w", Active: 2},
		},
		"a report about an object that does not exist is refused": {
			ids: []uint64{5}, owner: "gone",
			want: want{Refused: true, Err: true},
		},
		"a report the kind refuses writes nothing and tells nothing": {
			ids: []uint64{5}, kindErr: edgeproto.Refuse("not the current worker"),
			want: want{Refused: true, Err: true, Applied: 1},
		},
		"a kind's failure is returned, to have the report resent": {
			ids: []uint64{5}, kindErr: errors.New("updating status of Model m: etcd down"),
			want: want{Err: true, Applied: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			server := newStatusServer(testJob())
			server.conflicts = tc.conflicts
			a := &EdgeReports[*sednav1.FederatedLearningJob]{
				Kind:      "federatedlearningjob",
				Client:    server.client,
				EdgeNodes: func(j *sednav1.FederatedLearningJob) *[]sednav1.EdgeNodeStatus { return &j.Status.EdgeNodes },
				Recorder:  server.recorder,
				Clock:     testingclock.NewFakePassiveClock(time.Unix(1000, 0)),
			}
			info := &edgeproto.WorkerInfo{Name: "w", Namespace: "ns", OwnerName: "job", Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning}
			if tc.owner != "" {
				info.OwnerName = tc.owner
			}
			applied := 0
			var err error
			for _, id := range tc.ids {
				err = errors.Join(err, applyWorker(t.Context(), a, from, &edgeproto.Report{ID: id, Worker: "w"}, info,
					func(*sednav1.FederatedLearningJob, edgeproto.WorkerReport, metav1.Time) ([]Event, error) {
						applied++
						return []Event{told}, tc.kindErr
					}))
			}
			_, refused := edgeproto.IsRefused(err)
			got := want{Refused: refused, Err: err != nil, Writes: len(server.writes), Applied: applied,
				EventsAtWrite: server.eventsAtWrite, Events: len(server.recorder.Events), Active: server.job.Status.Active}
			if nodes := server.job.Status.EdgeNodes; len(nodes) == 1 {
				got.Worker = nodes[0].Worker
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReferencesNameWhatIsMissingOnceInOrder(t *testing.T) {
	c := newCaches(t,
		&sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "ns"}},
		&sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "edge0", Namespace: "ns"}})
	r := NewReferences("ns", c.models, c.datasets)
	found := map[string]bool{
		"Model small":     r.Model("small") != nil,
		"Model big":       r.Model("big") != nil,
		"Dataset edge1":   r.Dataset("edge1") != nil,
		"Model big again": r.Model("big") != nil,
		"Dataset edge0":   r.Dataset("edge0") != nil,
	}
	want := map[string]bool{"Model small": true, "Model big": false, "Dataset edge1": false, "Model big again": false, "Dataset edge0": true}
	if diff := cmp.Diff(want, found); diff != "" {
		t.Errorf("resolved (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Model big", "Dataset edge1"}, r.Missing()); diff != "" {
		t.Errorf("missing (-want,+got):\n%s", diff)
	}
	if r.Err() != nil {
		t.Errorf("Err = %v", r.Err())
	}
}

// failingModels is a ModelLister whose reads fail; it only gets.
type failingModels struct{ sednalisters.ModelLister }

func (failingModels) Models(string) sednalisters.ModelNamespaceLister { return failingModels{} }

func (failingModels) Get(string) (*sednav1.Model, error) {
	return nil, apierrors.NewInternalError(errors.New("cache broken"))
}

func TestReferencesStopAtTheFirstFailedRead(t *testing.T) {
	c := newCaches(t, &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "edge0", Namespace: "ns"}})
	r := NewReferences("ns", failingModels{}, c.datasets)
	if m := r.Model("small"); m != nil {
		t.Errorf("a failed read resolved to %v", m)
	}
	if d := r.Dataset("edge0"); d != nil {
		t.Errorf("a read after a failed one resolved to %v", d)
	}
	if r.Err() == nil || len(r.Missing()) != 0 {
		t.Errorf("Err = %v, Missing = %v; want the failure and nothing missing", r.Err(), r.Missing())
	}
}

// Every kind says a missing reference once: in its condition, and one
// warning when it newly goes missing, not one per sync.
func TestSetReferencesResolvedWarnsOnceWhatGoesMissing(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "job", Namespace: "ns", Generation: 1}
	now := metav1.NewTime(time.Unix(100, 0))
	steps := []struct {
		missing    []string
		wantStatus corev1.ConditionStatus
		wantEvents int
	}{
		{missing: []string{"Model big"}, wantStatus: corev1.ConditionFalse, wantEvents: 1},
		{missing: []string{"Model big"}, wantStatus: corev1.ConditionFalse, wantEvents: 0},
		{missing: []string{"Model big", "Dataset edge1"}, wantStatus: corev1.ConditionFalse, wantEvents: 1},
		{missing: []string{"Model big", "Dataset edge1"}, wantStatus: corev1.ConditionFalse, wantEvents: 0},
		{wantStatus: corev1.ConditionTrue, wantEvents: 0},
		{wantStatus: corev1.ConditionTrue, wantEvents: 0},
		{missing: []string{"Model big"}, wantStatus: corev1.ConditionFalse, wantEvents: 1},
	}
	var conds []sednav1.JobCondition
	for i, s := range steps {
		var events []Event
		conds, events = SetReferencesResolved(owner, conds, s.missing, now)
		c := FindJobCondition(conds, ConditionReferencesResolved)
		if c == nil || c.Status != s.wantStatus || len(events) != s.wantEvents {
			t.Errorf("step %d (missing %v): condition %+v, events %v; want %s and %d events", i, s.missing, c, events, s.wantStatus, s.wantEvents)
		}
	}
}

func TestBaseEnvIsEveryWorkersInOneOrder(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "demo", Namespace: "ns"}
	model := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: sednav1.ModelSpec{URL: "/models/small.pb"}}
	podName := corev1.EnvVar{Name: "WORKER_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}
	nodeIP := corev1.EnvVar{Name: EnvNodeIP, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}
	cases := map[string]struct {
		env  BaseEnv
		want []corev1.EnvVar
	}{
		"a job's worker": {
			env: BaseEnv{Owner: owner, Worker: "demo-train-1-1", LogLevel: "INFO", DataPathPrefix: "/home/data",
				LocalController: LCAddress{Server: "http://lc:9100"}},
			want: []corev1.EnvVar{Env("NAMESPACE", "ns"), Env("JOB_NAME", "demo"), Env("WORKER_NAME", "demo-train-1-1"),
				Env("LOG_LEVEL", "INFO"), Env("DATA_PATH_PREFIX", "/home/data"), Env("LC_SERVER", "http://lc:9100")},
		},
		"a service's replica, with its model": {
			env: BaseEnv{Owner: owner, Service: true, Model: model, LogLevel: "DEBUG", DataPathPrefix: "/home/data",
				LocalController: LCAddress{Port: 9100}},
			want: []corev1.EnvVar{Env("NAMESPACE", "ns"), Env("SERVICE_NAME", "demo"), podName,
				Env("LOG_LEVEL", "DEBUG"), Env("DATA_PATH_PREFIX", "/home/data"),
				Env("MODEL_NAME", "small"), Env("MODEL_URL", "/home/data/models/small.pb"),
				nodeIP, Env("LC_SERVER", "http://$(NEREID_NODE_IP):9100")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.env.Env()); diff != "" {
				t.Errorf("env (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestIndexChildrenAddsTheOwnerIndexOnceToASharedInformer(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{})
	for range 2 { // two kinds' controllers share the informer
		indexers, err := IndexChildren(informer)
		if err != nil {
			t.Fatalf("IndexChildren: %v", err)
		}
		if indexers[0] != informer.GetIndexer() {
			t.Fatalf("IndexChildren returned another indexer than the informer's")
		}
	}
	job := testJob()
	if err := informer.GetIndexer().Add(childPod("mine", job, job.UID, nil)); err != nil {
		t.Fatal(err)
	}
	got, err := ListOwned[*corev1.Pod](informer.GetIndexer(), job)
	if err != nil || len(got) != 1 || got[0].Name != "mine" {
		t.Fatalf("ListOwned = %v, %v; want the pod mine", got, err)
	}
}
