package store

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
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
	if err := s.ApplyObjects([]ObjectChange{
		{Key: a, ResourceVersion: "1", Workers: []edgeproto.Worker{{Name: "a-0", IPs: []string{"127.64.0.1"}}, {Name: "a-1"}}, Data: []byte(`{}`)},
		{Key: b, ResourceVersion: "1", Workers: []edgeproto.Worker{{Name: "b-0", IPs: []string{"127.64.0.2"}}}, Data: []byte(`{}`)},
	}); err != nil {
		t.Fatal(err)
	}
	check("stored", "127.64.0.1", want{true, true})
	check("stored", "::ffff:127.64.0.2", want{true, true})
	check("stored", "127.64.0.3", want{false, true})
	// a-1 gets its address; a-0 leaves the node.
	if err := s.PutObject(a, "2", []edgeproto.Worker{{Name: "a-1", IPs: []string{"127.64.0.3"}}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	check("a replaced", "127.64.0.1", want{false, false})
	check("a replaced", "127.64.0.3", want{true, false})
	if !s.WaitWorkerAt(t.Context(), "a-1", addr("127.64.0.3")) || s.WaitWorkerAt(t.Context(), "a-1", addr("127.64.0.2")) {
		t.Errorf("a-1 is at 127.64.0.3 only")
	}
	if err := s.DeleteObject(b); err != nil {
		t.Fatal(err)
	}
	check("b deleted", "127.64.0.2", want{false, false})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, path, Options{})
	check("reopened", "127.64.0.3", want{true, false})
	check("reopened", "127.64.0.2", want{false, false})
}

// A caller naming a worker whose address has not come yet waits for it, and
// is admitted if it comes from it; a caller naming no worker waits for nothing.
func TestWaitWorkerAtWaitsForAStartingWorkersAddress(t *testing.T) {
	s := openTestStore(t, filepath.Join(t.TempDir(), "lc.db"), Options{})
	job := Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "job"}
	if err := s.PutObject(job, "1", []edgeproto.Worker{{Name: "job-0"}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if s.WaitWorkerAt(t.Context(), "job-9", netip.MustParseAddr("127.64.0.1")) {
		t.Errorf("job-9 is no worker, but was admitted")
	}
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("a name that is no worker waited %s", waited)
	}
	done := make(chan bool)
	go func() { done <- s.WaitWorkerAt(t.Context(), "job-0", netip.MustParseAddr("127.64.0.1")) }()
	select {
	case got := <-done:
		t.Fatalf("WaitWorkerAt returned %v before job-0 had an address", got)
	case <-time.After(100 * time.Millisecond):
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
}
