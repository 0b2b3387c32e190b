package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustAppend(t *testing.T, s *Store, data string) uint64 {
	t.Helper()
	id, err := s.AppendReport([]byte(data))
	if err != nil {
		t.Fatalf("AppendReport(%q): %v", data, err)
	}
	return id
}

func mustPending(t *testing.T, s *Store, afterID uint64, limit int) []Report {
	t.Helper()
	r, err := s.PendingReports(afterID, limit)
	if err != nil {
		t.Fatalf("PendingReports(%d, %d): %v", afterID, limit, err)
	}
	return r
}

func mustAck(t *testing.T, s *Store, ids ...uint64) {
	t.Helper()
	if err := s.AckReports(ids...); err != nil {
		t.Fatalf("AckReports(%v): %v", ids, err)
	}
}

func checkOutboxLen(t *testing.T, s *Store, wantCount int, wantBytes int64) {
	t.Helper()
	count, size, err := s.OutboxLen()
	if err != nil {
		t.Fatalf("OutboxLen: %v", err)
	}
	if count != wantCount || size != wantBytes {
		t.Errorf("OutboxLen() = %d reports, %d bytes; want %d, %d", count, size, wantCount, wantBytes)
	}
}

func TestReportIDsNeverReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lc.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	var ids []uint64
	for i := range 3 {
		ids = append(ids, mustAppend(t, s, fmt.Sprintf("r%d", i)))
	}
	// Acknowledging everything empties the outbox, but must not restart the sequence.
	mustAck(t, s, ids...)
	ids = append(ids, mustAppend(t, s, "after-ack"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openTestStore(t, path, Options{})
	ids = append(ids, mustAppend(t, s, "after-reopen"))
	if diff := cmp.Diff([]uint64{1, 2, 3, 4, 5}, ids); diff != "" {
		t.Errorf("report IDs (-want,+got):\n%s", diff)
	}
	want := []Report{{ID: 4, Data: []byte("after-ack")}, {ID: 5, Data: []byte("after-reopen")}}
	if diff := cmp.Diff(want, mustPending(t, s, 0, 0)); diff != "" {
		t.Errorf("PendingReports after reopen (-want,+got):\n%s", diff)
	}
	checkOutboxLen(t, s, 2, int64(len("after-ack")+len("after-reopen")))
}

func TestPendingReports(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
	for i := 1; i <= 5; i++ {
		mustAppend(t, s, fmt.Sprintf("r%d", i))
	}
	mustAck(t, s, 3)
	r := func(id uint64) Report { return Report{ID: id, Data: []byte(fmt.Sprintf("r%d", id))} }

	cases := map[string]struct {
		afterID uint64
		limit   int
		want    []Report
	}{
		"all":                        {afterID: 0, limit: 0, want: []Report{r(1), r(2), r(4), r(5)}},
		"negative limit is no limit": {afterID: 0, limit: -1, want: []Report{r(1), r(2), r(4), r(5)}},
		"limit":                      {afterID: 0, limit: 2, want: []Report{r(1), r(2)}},
		"after an ID":                {afterID: 1, limit: 0, want: []Report{r(2), r(4), r(5)}},
		"after an acknowledged ID":   {afterID: 3, limit: 0, want: []Report{r(4), r(5)}},
		"after and limit":            {afterID: 2, limit: 1, want: []Report{r(4)}},
		"after the last":             {afterID: 5, limit: 0, want: nil},
		"after the largest ID":       {afterID: ^uint64(0), limit: 0, want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, mustPending(t, s, tc.afterID, tc.limit)); diff != "" {
				t.Errorf("PendingReports(%d, %d) (-want,+got):\n%s", tc.afterID, tc.limit, diff)
			}
		})
	}
}

func TestAckReportsIsIdempotent(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
	for _, d := range []string{"aa", "bbb", "cccc"} {
		mustAppend(t, s, d)
	}
	mustAck(t, s, 2)
	// Repeated, absent, never-assigned and duplicated IDs change nothing more.
	mustAck(t, s, 2)
	mustAck(t, s, 2, 99, 0, 2)
	mustAck(t, s)

	want := []Report{{ID: 1, Data: []byte("aa")}, {ID: 3, Data: []byte("cccc")}}
	if diff := cmp.Diff(want, mustPending(t, s, 0, 0)); diff != "" {
		t.Errorf("PendingReports (-want,+got):\n%s", diff)
	}
	checkOutboxLen(t, s, 2, 6)
}

func TestAppendReportAtBoundFailsAndKeepsWhatIsBuffered(t *testing.T) {
	cases := map[string]struct {
		opts Options
		// fill is appended first and must all fit; then over must fail with
		// ErrOutboxFull; after acknowledging ackID, afterAck must fit.
		fill     []string
		over     string
		ackID    uint64
		afterAck string
	}{
		"report count": {
			opts:     Options{MaxOutboxReports: 4}, // one kept for the LocalController's own
			fill:     []string{"a", "b", "c"},
			over:     "d",
			ackID:    2,
			afterAck: "d",
		},
		"bytes": {
			opts:     Options{MaxOutboxBytes: 20},
			fill:     []string{"12345678", "90123456", "78"}, // exactly the workers' 18 bytes
			over:     "x",
			ackID:    1,
			afterAck: "wxyz",
		},
		"bytes, a report that would pass the bound": {
			opts:     Options{MaxOutboxBytes: 20},
			fill:     []string{"12345678", "90123456"},
			over:     "abc",
			ackID:    2,
			afterAck: "abcdef",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lc.db")
			s, err := Open(path, tc.opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			var want []Report
			var wantBytes int64
			for _, d := range tc.fill {
				want = append(want, Report{ID: mustAppend(t, s, d), Data: []byte(d)})
				wantBytes += int64(len(d))
			}

			id, err := s.AppendReport([]byte(tc.over))
			if !errors.Is(err, ErrOutboxFull) {
				t.Fatalf("AppendReport at the bound = %d, %v; want ErrOutboxFull", id, err)
			}
			t.Logf("error at the bound: %v", err)
			if diff := cmp.Diff(want, mustPending(t, s, 0, 0)); diff != "" {
				t.Errorf("PendingReports after a refused append (-want,+got):\n%s", diff)
			}
			checkOutboxLen(t, s, len(want), wantBytes)

			// The bound holds across a restart: the counters come back from the file.
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s = openTestStore(t, path, tc.opts)
			if _, err := s.AppendReport([]byte(tc.over)); !errors.Is(err, ErrOutboxFull) {
				t.Fatalf("AppendReport at the bound after reopen: %v, want ErrOutboxFull", err)
			}
			checkOutboxLen(t, s, len(want), wantBytes)

			mustAck(t, s, tc.ackID)
			newID := mustAppend(t, s, tc.afterAck)
			if last := want[len(want)-1].ID; newID <= last {
				t.Errorf("ID after ack = %d, want above %d", newID, last)
			}
			var got []uint64
			for _, r := range mustPending(t, s, 0, 0) {
				got = append(got, r.ID)
			}
			var wantIDs []uint64
			for _, r := range want {
				if r.ID != tc.ackID {
					wantIDs = append(wantIDs, r.ID)
				}
			}
			wantIDs = append(wantIDs, newID)
			if diff := cmp.Diff(wantIDs, got); diff != "" {
				t.Errorf("pending IDs after ack and append (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestAppendReportLargerThanBound(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{MaxOutboxBytes: 4})
	_, err := s.AppendReport([]byte("12345"))
	if !errors.Is(err, ErrReportTooLarge) || errors.Is(err, ErrOutboxFull) {
		t.Fatalf("AppendReport of 5 bytes with a 4-byte bound: %v, want ErrReportTooLarge (not ErrOutboxFull)", err)
	}
	checkOutboxLen(t, s, 0, 0)
}

func TestOptionsDefaults(t *testing.T) {
	got := Options{}.withDefaults()
	want := Options{MaxOutboxReports: 100000, MaxOutboxBytes: 64 << 20, LockTimeout: DefaultLockTimeout}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want,+got):\n%s", diff)
	}
}

func TestConcurrentAppendReportLosesNothing(t *testing.T) {
	const (
		goroutines = 16
		perG       = 25
	)
	s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got = map[uint64]string{}
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				data := fmt.Sprintf("g%d-%d", g, i)
				id, err := s.AppendReport([]byte(data))
				if err != nil {
					t.Errorf("AppendReport(%s): %v", data, err)
					return
				}
				mu.Lock()
				if prev, dup := got[id]; dup {
					t.Errorf("ID %d given to both %s and %s", id, prev, data)
				}
				got[id] = data
				mu.Unlock()
			}
		})
	}
	// Readers and acks of nothing run alongside, as the cloud link would.
	for range 4 {
		wg.Go(func() {
			for range perG {
				if _, err := s.PendingReports(0, 10); err != nil {
					t.Errorf("PendingReports: %v", err)
				}
				if err := s.AckReports(1 << 40); err != nil {
					t.Errorf("AckReports: %v", err)
				}
			}
		})
	}
	wg.Wait()

	if len(got) != goroutines*perG {
		t.Fatalf("%d distinct IDs, want %d", len(got), goroutines*perG)
	}
	pending := mustPending(t, s, 0, 0)
	stored := map[uint64]string{}
	var total int64
	for i, r := range pending {
		if i > 0 && r.ID <= pending[i-1].ID {
			t.Errorf("PendingReports out of order: %d after %d", r.ID, pending[i-1].ID)
		}
		stored[r.ID] = string(r.Data)
		total += int64(len(r.Data))
	}
	if diff := cmp.Diff(got, stored); diff != "" {
		t.Errorf("stored reports vs. IDs returned (-want,+got):\n%s", diff)
	}
	checkOutboxLen(t, s, goroutines*perG, total)
}

func TestAppendReportWithStateCommitsBoth(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendReportWithState([]byte(`{"a":1}`), "cycle/ns/job", []byte(`{"prepared":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok, err := s.GetState("cycle/ns/job")
	if err != nil || !ok || string(got) != `{"prepared":3}` {
		t.Fatalf("state after reopen = %q, %v, %v; want the value stored with the report", got, ok, err)
	}
	reports, err := s.PendingReports(0, 0)
	if err != nil || len(reports) != 1 {
		t.Fatalf("reports after reopen = %v, %v; want the one appended", reports, err)
	}
	if err := s.DeleteState("cycle/ns/job"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.GetState("cycle/ns/job"); ok {
		t.Fatal("state still there after DeleteState")
	}
}

// Workers fill at most their share of the outbox: the rest is kept for the
// LocalController's own reports (a round's trigger, a deploy, a dataset's
// count), which a worker filling the outbox must not stop.
func TestWorkersLeaveTheLocalControllerItsShareOfTheOutbox(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{MaxOutboxReports: 20, MaxOutboxBytes: 1 << 20})
	for i := range 18 {
		if _, err := s.AppendReport([]byte("worker")); err != nil {
			t.Fatalf("worker report %d of the workers' 18: %v", i+1, err)
		}
	}
	if _, err := s.AppendReport([]byte("worker")); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("a worker report past the workers' share: %v, want ErrOutboxFull", err)
	}
	for i := range 2 {
		if _, err := s.AppendReportWithState([]byte("own"), "k", []byte("v")); err != nil {
			t.Fatalf("the LocalController's own report %d in its share: %v", i+1, err)
		}
	}
	if _, err := s.AppendReportWithState([]byte("own"), "k", []byte("v")); !errors.Is(err, ErrOutboxFull) {
		t.Errorf("an own report past the whole outbox: %v, want ErrOutboxFull", err)
	}
}
