package edgestatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/internal/testwait"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common/commontest"
)

// gatedServer is the API server's side of some jobs, safe for concurrent
// use, whose status writes can be held: while gate is set, a write waits for
// it to close (and says so on holding).
type gatedServer struct {
	mu      sync.Mutex
	jobs    map[string]*sednav1.FederatedLearningJob
	writes  map[string]int
	gate    chan struct{}
	holding chan string // the job whose write waits at the gate
	// Reads of the server (Get) and writes refused for a stale
	// resourceVersion; a write that succeeds bumps it.
	reads, conflicts int
	// invalid, when set, refuses a write it says is invalid, as the API
	// server refuses a status that breaks the schema.
	invalid func(*sednav1.FederatedLearningJob) bool
}

func newGatedServer(names ...string) *gatedServer {
	s := &gatedServer{jobs: map[string]*sednav1.FederatedLearningJob{}, writes: map[string]int{}, holding: make(chan string, 16)}
	for _, n := range names {
		j := commontest.Job()
		j.Name = n
		s.jobs[n] = j
	}
	return s
}

func (s *gatedServer) client(string) common.StatusClient[*sednav1.FederatedLearningJob] { return s }

func (s *gatedServer) Get(_ context.Context, name string, _ metav1.GetOptions) (*sednav1.FederatedLearningJob, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.jobs[name].DeepCopy(), nil
}

// Delete is not served: reports never delete a job.
func (s *gatedServer) Delete(context.Context, string, metav1.DeleteOptions) error {
	return errors.New("gatedServer serves no deletes")
}

func (s *gatedServer) UpdateStatus(_ context.Context, j *sednav1.FederatedLearningJob, _ metav1.UpdateOptions) (*sednav1.FederatedLearningJob, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		s.holding <- j.Name
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := s.jobs[j.Name]
	if s.invalid != nil && s.invalid(j) {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "sedna.io", Kind: "FederatedLearningJob"}, j.Name, nil)
	}
	if j.ResourceVersion != stored.ResourceVersion {
		s.conflicts++
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "federatedlearningjobs"}, j.Name, errors.New("stale"))
	}
	rv, _ := strconv.Atoi(stored.ResourceVersion)
	j = j.DeepCopy()
	j.ResourceVersion = strconv.Itoa(rv + 1)
	s.writes[j.Name]++
	s.jobs[j.Name] = j
	return j.DeepCopy(), nil
}

func (s *gatedServer) hold() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
	return s.gate
}

func (s *gatedServer) open(gate chan struct{}) {
	s.mu.Lock()
	s.gate = nil
	s.mu.Unlock()
	close(gate)
}

// nodesOf are the nodes job's status has heard from, sorted.
func (s *gatedServer) nodesOf(job string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var nodes []string
	for _, n := range s.jobs[job].Status.EdgeNodes {
		nodes = append(nodes, n.Name)
	}
	slices.Sort(nodes)
	return nodes
}

func (s *gatedServer) writesOf(job string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes[job]
}

func gatedReports(s *gatedServer) *EdgeReports[*sednav1.FederatedLearningJob] {
	return &EdgeReports[*sednav1.FederatedLearningJob]{
		Kind:      "federatedlearningjob",
		Client:    s.client,
		EdgeNodes: func(j *sednav1.FederatedLearningJob) *[]sednav1.EdgeNodeStatus { return &j.Status.EdgeNodes },
		Recorder:  record.NewFakeRecorder(1000),
		Clock:     testingclock.NewFakePassiveClock(time.Unix(1000, 0)),
	}
}

// waitingFor is how many reports about job wait for its next write.
func waitingFor(a *EdgeReports[*sednav1.FederatedLearningJob], job string) int {
	return a.writers.Waiting("ns/" + job)
}

// applyWorker is a.ApplyWorkers for one report.
func applyWorker(ctx context.Context, a *EdgeReports[*sednav1.FederatedLearningJob], from edgeproto.Source, r *edgeproto.Report, info *edgeproto.WorkerInfo,
	apply func(*sednav1.FederatedLearningJob, edgeproto.WorkerReport, metav1.Time) ([]common.Event, error)) error {
	return a.ApplyWorkers(ctx, from, []edgeproto.WorkerReport{{Report: r, Info: info}}, apply)[0]
}

// report applies one report of node's worker about job, with kind as the
// kind's part (nil: none), and sends its result to done.
func report(ctx context.Context, a *EdgeReports[*sednav1.FederatedLearningJob], job, node string, kind func(*sednav1.FederatedLearningJob, edgeproto.WorkerReport, metav1.Time) ([]common.Event, error), done chan<- error) {
	info := &edgeproto.WorkerInfo{Name: "w-" + node, Namespace: "ns", OwnerName: job, Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning}
	go func() {
		done <- applyWorker(ctx, a, edgeproto.Source{Node: node, Store: "s"}, &edgeproto.Report{ID: 1, Worker: info.Name}, info, kind)
	}()
}

// Reports about one object that arrive while its write is in flight go
// into its next write, all of them, each answered after it.
func TestEdgeReportsCoalesceWhileAWriteIsInFlight(t *testing.T) {
	server := newGatedServer("job")
	a, gate, done := writeHeld(t, server, "edge-000", 100)

	const more = 50
	var want []string
	for i := 1; i <= more; i++ {
		report(t.Context(), a, "job", fmt.Sprintf("edge-%03d", i), nil, done)
	}
	testwait.Eventually(t, 10*time.Second, "the reports to wait for the write in flight", func(context.Context) (bool, error) { return waitingFor(a, "job") == more, nil })
	select {
	case err := <-done:
		t.Fatalf("a report was answered (%v) before its write", err)
	default:
	}
	server.open(gate)
	for range more + 1 {
		if err := <-done; err != nil {
			t.Errorf("report: %v", err)
		}
	}
	for i := 0; i <= more; i++ {
		want = append(want, fmt.Sprintf("edge-%03d", i))
	}
	if got := server.nodesOf("job"); !slices.Equal(got, want) {
		t.Errorf("the status heard from %d nodes %v; want all %d", len(got), got, len(want))
	}
	if w := server.writesOf("job"); w != 2 {
		t.Errorf("%d status writes for %d reports; want 2 (the first, then the %d that waited for it)", w, more+1, more)
	}
	writersEnd(t, a)
}

// writersEnd waits until no writer of a runs.
func writersEnd(t *testing.T, a *EdgeReports[*sednav1.FederatedLearningJob]) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, "the writers to end", func(context.Context) (bool, error) { return a.writers.Running() == 0, nil })
}

// kindChange is a kind's part of applying a report (ApplyWorkers' apply).
type kindChange = func(*sednav1.FederatedLearningJob, edgeproto.WorkerReport, metav1.Time) ([]common.Event, error)

// writeHeld has a report of node about job "job" written, through a new
// applier, and holds the write: reports that come meanwhile wait for the
// next. It returns the applier, the gate that lets the write go on, and the
// channel (of buffer results) the held report's result comes on.
func writeHeld(t *testing.T, server *gatedServer, node string, buffer int) (*EdgeReports[*sednav1.FederatedLearningJob], chan struct{}, chan error) {
	t.Helper()
	a := gatedReports(server)
	gate := server.hold()
	done := make(chan error, buffer)
	report(t.Context(), a, "job", node, nil, done)
	<-server.holding
	return a, gate, done
}

// reportsBehindAWrite has a report of edge-0 about job "job" written, and
// while its write is held, one report of each of nodes wait for the next
// write (applied by kinds[node], nil for none); it returns each one's
// result once the writes are done.
func reportsBehindAWrite(t *testing.T, server *gatedServer, nodes []string, kinds map[string]kindChange) map[string]error {
	t.Helper()
	a, gate, first := writeHeld(t, server, "edge-0", 1)
	waiting := map[string]chan error{}
	for _, node := range nodes {
		waiting[node] = make(chan error, 1)
		report(t.Context(), a, "job", node, kinds[node], waiting[node])
		testwait.Eventually(t, 10*time.Second, "the report to wait", func(context.Context) (bool, error) { return waitingFor(a, "job") == len(waiting), nil })
	}
	server.open(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	results := map[string]error{}
	for node, ch := range waiting {
		results[node] = <-ch
	}
	return results
}

// A report its kind refuses is left out of the write that carries the
// others, and refused alone.
func TestEdgeReportsRefusedOneOfAWriteLeavesTheOthers(t *testing.T) {
	server := newGatedServer("job")
	refuse := func(*sednav1.FederatedLearningJob, edgeproto.WorkerReport, metav1.Time) ([]common.Event, error) {
		return nil, edgeproto.Refuse("not the current worker")
	}
	results := reportsBehindAWrite(t, server, []string{"edge-1", "edge-2", "edge-3"}, map[string]kindChange{"edge-2": refuse})
	for node, err := range results {
		_, refused := edgeproto.IsRefused(err)
		if node == "edge-2" && !refused {
			t.Errorf("%s: %v; want its refusal", node, err)
		}
		if node != "edge-2" && err != nil {
			t.Errorf("%s: %v; want it applied", node, err)
		}
	}
	if got, want := server.nodesOf("job"), []string{"edge-0", "edge-1", "edge-3"}; !slices.Equal(got, want) {
		t.Errorf("the status heard from %v; want %v (the refused report's record is not written)", got, want)
	}
	if w := server.writesOf("job"); w != 2 {
		t.Errorf("%d writes; want 2", w)
	}
}

// A report about one object never waits behind another object's write.
func TestEdgeReportsOfAnotherObjectDoNotWait(t *testing.T) {
	server := newGatedServer("slow", "fast")
	a := gatedReports(server)
	gate := server.hold()
	slow := make(chan error, 1)
	report(t.Context(), a, "slow", "edge-0", nil, slow)
	<-server.holding
	server.mu.Lock()
	server.gate = nil // only the write in flight waits
	server.mu.Unlock()

	fast := make(chan error, 1)
	report(t.Context(), a, "fast", "edge-0", nil, fast)
	select {
	case err := <-fast:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a report about another object waited behind a write in flight")
	}
	close(gate)
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
}

// A report whose caller gives up (its connection closed) still goes into
// the write, which the others wait for; the caller hears its context's end.
func TestEdgeReportsCallerThatGivesUpDoesNotStopTheWrite(t *testing.T) {
	server := newGatedServer("job")
	a := gatedReports(server)
	gate := server.hold()
	first := make(chan error, 1)
	report(t.Context(), a, "job", "edge-0", nil, first)
	<-server.holding

	ctx, cancel := context.WithCancel(t.Context())
	gaveUp, stayed := make(chan error, 1), make(chan error, 1)
	report(ctx, a, "job", "edge-1", nil, gaveUp)
	report(t.Context(), a, "job", "edge-2", nil, stayed)
	testwait.Eventually(t, 10*time.Second, "both reports to wait", func(context.Context) (bool, error) { return waitingFor(a, "job") == 2, nil })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("the report whose context ended: %v; want context.Canceled", err)
	}
	server.open(gate)
	for _, ch := range []chan error{first, stayed} {
		if err := <-ch; err != nil {
			t.Error(err)
		}
	}
	if got, want := server.nodesOf("job"), []string{"edge-0", "edge-1", "edge-2"}; !slices.Equal(got, want) {
		t.Errorf("the status heard from %v; want %v", got, want)
	}
}

// counts are the server's reads and conflicts so far.
func (s *gatedServer) counts() (reads, conflicts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads, s.conflicts
}

// cachedAs makes a's writes start from cache (the object by name; none is
// not found).
func cachedAs(a *EdgeReports[*sednav1.FederatedLearningJob], cache map[string]*sednav1.FederatedLearningJob) {
	a.Cached = func(_, name string) (*sednav1.FederatedLearningJob, error) {
		if j, ok := cache[name]; ok {
			return j, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "federatedlearningjobs"}, name)
	}
}

// A write starts from the cache when it is current, and the next batch of
// the same writer from what the previous one wrote: no read of the server.
func TestEdgeReportsWriteFromTheCacheAndThenFromTheirLastWrite(t *testing.T) {
	server := newGatedServer("job")
	a := gatedReports(server)
	cachedAs(a, map[string]*sednav1.FederatedLearningJob{"job": server.jobs["job"].DeepCopy()})
	gate := server.hold()
	done := make(chan error, 10)
	report(t.Context(), a, "job", "edge-0", nil, done)
	<-server.holding
	for i := 1; i < 3; i++ {
		report(t.Context(), a, "job", fmt.Sprintf("edge-%d", i), nil, done)
	}
	testwait.Eventually(t, 10*time.Second, "two reports waiting for the next write", func(context.Context) (bool, error) { return waitingFor(a, "job") == 2, nil })
	server.open(gate)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if reads, conflicts := server.counts(); reads != 0 || conflicts != 0 {
		t.Errorf("%d reads and %d conflicts; want none: the cache was current, then the first write's result", reads, conflicts)
	}
	if w := server.writesOf("job"); w != 2 {
		t.Errorf("%d writes; want 2", w)
	}
	if got, want := server.nodesOf("job"), []string{"edge-0", "edge-1", "edge-2"}; !slices.Equal(got, want) {
		t.Errorf("the status heard from %v; want %v", got, want)
	}
}

// A cache behind the server makes the write conflict; the report is then
// applied to a read of the server, once, and nothing it did not hear of is
// lost.
func TestEdgeReportsFromAStaleCacheConflictAndApplyToTheServers(t *testing.T) {
	server := newGatedServer("job")
	a := gatedReports(server)
	stale := server.jobs["job"].DeepCopy()
	cachedAs(a, map[string]*sednav1.FederatedLearningJob{"job": stale})
	done := make(chan error, 10)
	report(t.Context(), a, "job", "edge-0", nil, done)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The cache has not seen edge-0's write: edge-1's report conflicts,
	// and the same report sent again is not counted twice. Each comes once
	// the writer of the one before has ended (a report that comes while it
	// runs starts from its last write, not from the cache).
	for range 2 {
		writersEnd(t, a)
		report(t.Context(), a, "job", "edge-1", nil, done)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if reads, conflicts := server.counts(); conflicts != 2 || reads != 2 {
		t.Errorf("%d reads and %d conflicts; want 2 of each (each later write from the stale cache)", reads, conflicts)
	}
	if w := server.writesOf("job"); w != 2 {
		t.Errorf("%d writes; want 2: edge-1's resend changes nothing", w)
	}
	if got, want := server.nodesOf("job"), []string{"edge-0", "edge-1"}; !slices.Equal(got, want) {
		t.Errorf("the status heard from %v; want %v", got, want)
	}
	server.mu.Lock()
	defer server.mu.Unlock()
	for _, n := range server.jobs["job"].Status.EdgeNodes {
		if n.ReportsApplied != 1 {
			t.Errorf("%s: %d reports applied; want 1", n.Name, n.ReportsApplied)
		}
	}
}

// That a report changes nothing is decided on the server's object, not the
// cache's: here the cache holds an object of the same name, since deleted,
// that counted the report, and the new one gets it.
func TestEdgeReportsNothingToWriteIsDecidedOnTheServersObject(t *testing.T) {
	server := newGatedServer("job")
	a := gatedReports(server)
	old := server.jobs["job"].DeepCopy()
	old.ResourceVersion = "7"
	old.Status.EdgeNodes = []sednav1.EdgeNodeStatus{{Name: "edge-0", Store: "s", LastReportID: 1, ReportsApplied: 1}}
	cachedAs(a, map[string]*sednav1.FederatedLearningJob{"job": old})
	done := make(chan error, 1)
	report(t.Context(), a, "job", "edge-0", nil, done)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := server.nodesOf("job"); !slices.Equal(got, []string{"edge-0"}) {
		t.Errorf("the status heard from %v; want edge-0", got)
	}
	if reads, _ := server.counts(); reads != 1 {
		t.Errorf("%d reads; want 1", reads)
	}
}

// A report whose change fails for a while holds back the later reports of
// its node in the same write: written, they would record the node's later
// report id as applied, and the retried report would then be acknowledged
// as applied without its change. Another node's report in that write is
// applied.
func TestEdgeReportsAFailedReportHoldsBackItsNodesLaterOnes(t *testing.T) {
	server := newGatedServer("job")
	a, gate, first := writeHeld(t, server, "edge-9", 1)

	var mu sync.Mutex
	failing, applied := true, map[uint64]int{}
	kind := func(_ *sednav1.FederatedLearningJob, wr edgeproto.WorkerReport, _ metav1.Time) ([]common.Event, error) {
		mu.Lock()
		defer mu.Unlock()
		if wr.Report.ID == 5 && failing {
			return nil, errors.New("the Model's status write timed out")
		}
		applied[wr.Report.ID]++
		return nil, nil
	}
	info := &edgeproto.WorkerInfo{Name: "w-edge-0", Namespace: "ns", OwnerName: "job", Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning}
	reports := []edgeproto.WorkerReport{{Report: &edgeproto.Report{ID: 5, Worker: info.Name}, Info: info}, {Report: &edgeproto.Report{ID: 6, Worker: info.Name}, Info: info}}
	from := edgeproto.Source{Node: "edge-0", Store: "s"}
	results := make(chan []error, 1)
	go func() { results <- a.ApplyWorkers(t.Context(), from, reports, kind) }()
	testwait.Eventually(t, 10*time.Second, "edge-0's reports to wait", func(context.Context) (bool, error) { return waitingFor(a, "job") == 2, nil })
	other := make(chan error, 1)
	report(t.Context(), a, "job", "edge-1", nil, other)
	testwait.Eventually(t, 10*time.Second, "edge-1's report to wait", func(context.Context) (bool, error) { return waitingFor(a, "job") == 3, nil })
	server.open(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-other; err != nil {
		t.Errorf("another node's report in the same write: %v, want it applied", err)
	}
	errs := <-results
	for i, err := range errs {
		if _, refused := edgeproto.IsRefused(err); err == nil || refused {
			t.Errorf("edge-0's report %d: %v; want an error worth retrying", reports[i].Report.ID, err)
		}
	}
	if got := server.nodesOf("job"); slices.Contains(got, "edge-0") {
		t.Errorf("the status heard from %v; want nothing of edge-0 written", got)
	}

	// The hub tries them again, in order.
	mu.Lock()
	failing = false
	mu.Unlock()
	for i, err := range a.ApplyWorkers(t.Context(), from, reports, kind) {
		if err != nil {
			t.Errorf("report %d tried again: %v", reports[i].Report.ID, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if applied[5] != 1 || applied[6] != 1 {
		t.Errorf("the kind's change ran for report 5 %d times, for 6 %d times; want once each", applied[5], applied[6])
	}
}

// A write the API server refuses for good (an invalid status) because of
// one node's report does not refuse the other nodes' reports it carried:
// each node's reports are written alone, and only the one at fault is
// refused.
func TestEdgeReportsOneNodesInvalidChangeDoesNotRefuseTheOthers(t *testing.T) {
	server := newGatedServer("job")
	server.invalid = func(j *sednav1.FederatedLearningJob) bool {
		return slices.ContainsFunc(j.Status.EdgeNodes, func(n sednav1.EdgeNodeStatus) bool { return n.Name == "edge-bad" })
	}
	for node, err := range reportsBehindAWrite(t, server, []string{"edge-1", "edge-bad", "edge-2"}, nil) {
		if node == "edge-bad" && !common.IsPermanent(err) {
			t.Errorf("%s: %v; want the API server's refusal", node, err)
		}
		if node != "edge-bad" && err != nil {
			t.Errorf("%s: %v; want it applied", node, err)
		}
	}
	if got, want := server.nodesOf("job"), []string{"edge-0", "edge-1", "edge-2"}; !slices.Equal(got, want) {
		t.Errorf("the status heard from %v; want %v", got, want)
	}
}

// Every kind applies what the edge reports by one rule: EdgeReports'.
func TestEdgeReportsApplyEachReportOnceAndTellAfterTheWrite(t *testing.T) {
	from := edgeproto.Source{Node: "edge-0", Store: "store-1"}
	told := common.Event{Type: corev1.EventTypeNormal, Reason: "Round", Message: "round 2 trains"}
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
			server := commontest.NewStatusServer(commontest.Job())
			server.Conflicts = tc.conflicts
			a := &EdgeReports[*sednav1.FederatedLearningJob]{
				Kind:      "federatedlearningjob",
				Client:    func(string) common.StatusClient[*sednav1.FederatedLearningJob] { return server },
				EdgeNodes: func(j *sednav1.FederatedLearningJob) *[]sednav1.EdgeNodeStatus { return &j.Status.EdgeNodes },
				Recorder:  server.Recorder,
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
					func(*sednav1.FederatedLearningJob, edgeproto.WorkerReport, metav1.Time) ([]common.Event, error) {
						applied++
						return []common.Event{told}, tc.kindErr
					}))
			}
			_, refused := edgeproto.IsRefused(err)
			got := want{Refused: refused, Err: err != nil, Writes: len(server.Writes), Applied: applied,
				EventsAtWrite: server.EventsAtWrite, Events: len(server.Recorder.Events), Active: server.Job.Status.Active}
			if nodes := server.Job.Status.EdgeNodes; len(nodes) == 1 {
				got.Worker = nodes[0].Worker
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
