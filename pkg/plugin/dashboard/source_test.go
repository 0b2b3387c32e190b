package dashboard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// Tabs polling at once share one read while it is fresh; a failed read is
// not kept; once stale, the next request reads again.
func TestTabsShareOneSnapshotReadWhileItIsFresh(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	reads, fail := 0, false
	r := newSharedRead(clk, time.Second, func(context.Context) (*view.Snapshot, error) {
		reads++
		if fail {
			return nil, errors.New("the API server is down")
		}
		return &view.Snapshot{Taken: clk.Now()}, nil
	})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := r.get(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if reads != 1 {
		t.Fatalf("20 tabs at once read %d times, want 1", reads)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	fail = true
	if _, err := r.get(t.Context()); err == nil {
		t.Fatal("a stale snapshot was served when its read failed, want the error")
	}
	fail = false
	snap, err := r.get(t.Context())
	if err != nil || reads != 3 || !snap.Taken.Equal(clk.Now()) {
		t.Fatalf("after a failed read: snapshot %v, err %v, %d reads; want a new read (3)", snap, err, reads)
	}
}
