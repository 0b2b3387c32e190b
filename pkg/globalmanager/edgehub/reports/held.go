package reports

import (
	"context"
	"sync"
)

// heldReports bounds a session's reports read and not yet acknowledged:
// at most maxReports of them, and maxBytes of their bodies. The reader waits
// while one more would pass either, except that a report goes when no bytes
// are held (so that one larger than maxBytes still goes), and stops waiting
// when the session ends.
type heldReports struct {
	ctx                  context.Context
	mu                   sync.Mutex
	cond                 *sync.Cond
	reports, bytes       int64
	maxReports, maxBytes int64
}

// newHeldReports bounds reports to maxReports and maxBytes; its waits end
// with ctx.
func newHeldReports(ctx context.Context, maxReports, maxBytes int64) *heldReports {
	h := &heldReports{ctx: ctx, maxReports: maxReports, maxBytes: maxBytes}
	h.cond = sync.NewCond(&h.mu)
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.cond.Broadcast()
	})
	return h
}

// acquire holds one more report, of n bytes, waiting for room; false when
// ctx ended first.
func (h *heldReports) acquire(n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.reports >= h.maxReports || (h.bytes > 0 && h.bytes+n > h.maxBytes) {
		if h.ctx.Err() != nil {
			return false
		}
		h.cond.Wait()
	}
	h.reports++
	h.bytes += n
	return h.ctx.Err() == nil
}

// release lets go of a report of n bytes, acknowledged.
func (h *heldReports) release(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports--
	h.bytes -= n
	h.cond.Broadcast()
}
