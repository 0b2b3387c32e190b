package dijob

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// lazyCaches are caches a GlobalManager that runs no DIJob does without:
// the first DIJob a sync acts on starts them, and every sync waits for them
// to be filled before it reads them.
type lazyCaches struct {
	// what they hold, in the log and in the error of a sync that gave up
	// waiting ("the caches of the cluster's nodes and pods, which the
	// allocator places DIJobs by").
	what string
	// start starts them (nil: they are started elsewhere); synced says
	// when they are filled.
	start  func()
	synced []cache.InformerSynced

	startOnce sync.Once
	started   chan struct{} // closed once they are started
	filled    atomic.Bool   // they have synced
}

func newLazyCaches(what string, start func(), synced []cache.InformerSynced) *lazyCaches {
	return &lazyCaches{what: what, start: start, synced: synced, started: make(chan struct{})}
}

// cachesWait is how long a sync waits for lazy caches before it gives up
// and the job is synced again with backoff.
const cachesWait = 30 * time.Second

// ready starts the caches the first time it is called, and waits until
// they are filled, at most cachesWait. A nil *lazyCaches is ready.
func (l *lazyCaches) ready(ctx context.Context) error {
	if l == nil || l.filled.Load() {
		return nil
	}
	l.startOnce.Do(func() {
		klog.FromContext(ctx).Info("Starting caches a DIJob needs", "caches", l.what)
		if l.start != nil {
			l.start()
		}
		close(l.started)
	})
	ctx, cancel := context.WithTimeout(ctx, cachesWait)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), l.synced...) {
		return fmt.Errorf("%s are not filled after %s (can the GlobalManager list them?): %w", l.what, cachesWait, context.Cause(ctx))
	}
	l.filled.Store(true)
	return nil
}

// isFilled says whether the caches were filled; a nil *lazyCaches is.
func (l *lazyCaches) isFilled() bool {
	return l == nil || l.filled.Load()
}
