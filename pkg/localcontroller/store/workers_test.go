package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// The index of workers by address follows every write of the objects, and
// is rebuilt from the file when the store opens again.
func TestWorkerIndexFollowsTheStoredObjects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lc.db")
	s := openTestStore(t, path, Options{})
	a := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "a"}
	b := Key{Kind: "JointInferenceService", Namespace: "ns", Name: "b"}
	addr := netip.MustParseAddr
	type want struct{ known, awaiting bool }
	check := func(step string, at string, w want) {
		t.Helper()
		known, awaiting := s.AddressAdmission(addr(at))
		if known != w.known || awaiting != w.awaiting {
			t.Errorf("%s: AddressAdmission(%s) = known %v, awaiting %v; want %v, %v", step, at, known, awaiting, w.known, w.awaiting)
		}
	}
	owners := func(step, worker string, want ...Key) {
		t.Helper()
		got := s.WorkerOwners(worker)
		slices.SortFunc(got, func(x, y Key) int { return strings.Compare(x.String(), y.String()) })
		if !slices.Equal(got, want) {
			t.Errorf("%s: WorkerOwners(%s) = %v, want %v", step, worker, got, want)
		}
	}
	if err := s.ApplyObjects([]ObjectChange{
		{Key: a, ResourceVersion: "1", Workers: []edgeproto.Worker{{Name: "a-0", IPs: []string{"127.64.0.1"}}, {Name: "a-1"}}, Data: []byte(`{}`)},
		{Key: b, ResourceVersion: "1", Workers: []edgeproto.Worker{{Name: "b-0", IPs: []string{"127.64.0.2"}}}, Data: []byte(`{}`)},
	}); err != nil {
		t.Fatal(err)
	}
	check("stored", "127.64.0.1", want{true, true})
	check("stored", "::ffff:127.64.0.2", want{true, true})
	check("stored", "127.64.0.3", want{false, true})
	owners("stored", "a-0", a)
	owners("stored", "a-1", a)
	// A pod two objects name is each one's.
	if err := s.PutObject(b, "1", []edgeproto.Worker{{Name: "a-0", IPs: []string{"127.64.0.1"}}, {Name: "b-0", IPs: []string{"127.64.0.2"}}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	owners("named twice", "a-0", a, b)
	if err := s.PutObject(b, "1", []edgeproto.Worker{{Name: "b-0", IPs: []string{"127.64.0.2"}}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	owners("named once again", "a-0", a)
	// a-1 gets its address; a-0 leaves the node.
	if err := s.PutObject(a, "2", []edgeproto.Worker{{Name: "a-1", IPs: []string{"127.64.0.3"}}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	check("a replaced", "127.64.0.1", want{false, false})
	check("a replaced", "127.64.0.3", want{true, false})
	owners("a replaced", "a-0")
	if !s.WaitWorkerAt(t.Context(), "a-1", addr("127.64.0.3")) || s.WaitWorkerAt(t.Context(), "a-1", addr("127.64.0.2")) {
		t.Errorf("a-1 is at 127.64.0.3 only")
	}
	if err := s.DeleteObject(b); err != nil {
		t.Fatal(err)
	}
	check("b deleted", "127.64.0.2", want{false, false})
	owners("b deleted", "b-0")
	// A worker that is done is awaited by no one and is no caller's.
	if err := s.PutObject(b, "2", []edgeproto.Worker{{Name: "b-0", Done: true}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	check("b-0 done", "127.64.0.2", want{false, false})
	owners("b-0 done", "b-0")
	if s.WaitWorkerAt(t.Context(), "b-0", addr("127.64.0.2")) {
		t.Errorf("a worker that is done was admitted")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, path, Options{})
	check("reopened", "127.64.0.3", want{true, false})
	check("reopened", "127.64.0.2", want{false, false})
	owners("reopened", "a-1", a)
}

// A caller naming a worker whose address has not come yet waits for it, and
// is admitted if it comes from it; a caller naming no worker waits for nothing.
// In a synctest bubble a wait that never ends is a deadlock the test reports,
// and synctest.Wait shows the waiting caller blocked, not merely slow.
func TestWaitWorkerAtWaitsForAStartingWorkersAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
		job := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "job"}
		if err := s.PutObject(job, "1", []edgeproto.Worker{{Name: "job-0"}}, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if s.WaitWorkerAt(t.Context(), "job-9", netip.MustParseAddr("127.64.0.1")) {
			t.Errorf("job-9 is no worker, but was admitted")
		}
		done := make(chan bool)
		go func() { done <- s.WaitWorkerAt(t.Context(), "job-0", netip.MustParseAddr("127.64.0.1")) }()
		synctest.Wait()
		select {
		case got := <-done:
			t.Fatalf("WaitWorkerAt returned %v before job-0 had an address", got)
		default:
		}
		if err := s.PutObject(job, "2", []edgeproto.Worker{{Name: "job-0", IPs: []string{"127.64.0.1"}}}, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if !<-done {
			t.Errorf("job-0 came from its address once it was sent, but was refused")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := s.PutObject(job, "3", []edgeproto.Worker{{Name: "job-0"}}, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if s.WaitWorkerAt(ctx, "job-0", netip.MustParseAddr("127.64.0.1")) {
			t.Errorf("admitted after the wait ended with no address")
		}
	})
}

// One worker fills no more than half the workers' share of the outbox while
// other workers are on the node; each then has its fair part, and the
// counts survive a restart and follow acknowledgements.
func TestAWorkerHoldsOnlyItsShareOfTheOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lc.db")
	s := openTestStore(t, path, Options{MaxOutboxReports: 20}) // workers' share: 18, half of it 9
	job := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "job"}
	three := []edgeproto.Worker{{Name: "a", IPs: []string{"10.0.0.1"}}, {Name: "b", IPs: []string{"10.0.0.2"}}, {Name: "c"}}
	if err := s.PutObject(job, "1", three, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	fill := func(worker string) (taken int, ids []uint64, last error) {
		for range 30 {
			id, err := s.AppendWorkerReport(worker, []byte(`{"worker":"`+worker+`"}`))
			if err != nil {
				return taken, ids, err
			}
			taken++
			ids = append(ids, id)
		}
		return taken, ids, nil
	}
	takenA, idsA, err := fill("a")
	if takenA != 9 || !errors.Is(err, ErrOutboxFull) || !strings.Contains(err.Error(), "worker a holds 9 reports") {
		t.Errorf("worker a alone: %d taken, then %v; want 9 (half the workers' share) then its share refused", takenA, err)
	}
	if taken, _, err := fill("b"); taken != 6 || !strings.Contains(fmt.Sprint(err), "worker b holds 6") {
		t.Errorf("worker b: %d taken, then %v; want 6 (18 ÷ 3 workers)", taken, err)
	}
	takenC, idsC, err := fill("c")
	if takenC != 3 || !errors.Is(err, ErrOutboxFull) {
		t.Errorf("worker c: %d taken, then %v; want the 3 left of the share", takenC, err)
	}
	// The LocalController's own reports still go: its part is kept.
	if _, err := s.AppendReportWithState([]byte(`{}`), "", nil); err != nil {
		t.Errorf("the LocalController's own report: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, path, Options{MaxOutboxReports: 20})
	if err := s.AckReports(idsC...); err != nil { // room under the share
		t.Fatal(err)
	}
	if _, err := s.AppendWorkerReport("a", []byte(`{}`)); !strings.Contains(fmt.Sprint(err), "worker a holds 9") {
		t.Errorf("worker a after a restart: %v, want its 9 reports counted again", err)
	}
	if err := s.AckReports(idsA...); err != nil {
		t.Fatal(err)
	}
	if taken, _, _ := fill("a"); taken != 6 {
		t.Errorf("worker a once its reports were acknowledged: %d taken, want 6 (its share, the outbox over half full with b's)", taken)
	}
}

// A node with one worker lets it fill the whole workers' share.
func TestALoneWorkerMayFillTheWorkersShare(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{MaxOutboxReports: 20})
	job := Key{Kind: "JointInferenceService", Namespace: "ns", Name: "ji"}
	if err := s.PutObject(job, "1", []edgeproto.Worker{{Name: "only", IPs: []string{"10.0.0.1"}}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	taken := 0
	for ; taken < 30; taken++ {
		if _, err := s.AppendWorkerReport("only", []byte(`{}`)); err != nil {
			break
		}
	}
	if taken != 18 {
		t.Errorf("a lone worker took %d reports, want the workers' share, 18", taken)
	}
}
