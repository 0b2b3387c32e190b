package edgehub

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Refusals are logged at a bounded rate: junk sent in a loop must not fill
// the GlobalManager's log. The first refusal of a reason (the label of
// connections_refused_total) is logged at once; the next ones within
// refusalLogPeriod are counted, and one line per reason and period says how
// many there were and what the last one was. The counter has them all.

// refusalLogPeriod is the most often a reason's refusals are logged.
const refusalLogPeriod = 10 * time.Second

// refusedConn is one refused connection, as logged.
type refusedConn struct {
	remote string
	status int
	reason string
	err    error
}

// refusalLog logs refused connections, a line per reason and period at most.
type refusalLog struct {
	clock clock.WithTicker

	mu      sync.Mutex
	reasons map[string]*refusalTally // by metric label: a fixed set
}

// refusalTally is what of a reason's refusals is not logged yet.
type refusalTally struct {
	logged time.Time // when its last line was written
	count  int       // refused since, not logged
	last   refusedConn
}

func newRefusalLog(clk clock.WithTicker) *refusalLog {
	return &refusalLog{clock: clk, reasons: make(map[string]*refusalTally)}
}

// refused logs r, refused with reason label metric, or counts it for the
// next line of its reason.
func (l *refusalLog) refused(logger klog.Logger, metric string, r refusedConn) {
	l.mu.Lock()
	t := l.reasons[metric]
	if t == nil {
		t = &refusalTally{}
		l.reasons[metric] = t
	}
	now := l.clock.Now()
	if t.count > 0 || now.Sub(t.logged) < refusalLogPeriod {
		t.count++
		t.last = r
		l.mu.Unlock()
		return
	}
	t.logged = now
	l.mu.Unlock()
	// The token is never logged; the reason says whose it was.
	logger.Info("Refused an edge connection", "refusal", metric, "remote", r.remote, "status", r.status, "reason", r.reason, "err", r.err)
}

// flush writes a line for each reason whose refusals were counted and whose
// last line is at least refusalLogPeriod old, or, with all, for each whose
// refusals were counted.
func (l *refusalLog) flush(logger klog.Logger, all bool) {
	type line struct {
		metric string
		count  int
		since  time.Duration
		last   refusedConn
	}
	var lines []line
	l.mu.Lock()
	now := l.clock.Now()
	for metric, t := range l.reasons {
		if t.count > 0 && (all || now.Sub(t.logged) >= refusalLogPeriod) {
			lines = append(lines, line{metric: metric, count: t.count, since: now.Sub(t.logged), last: t.last})
			t.count, t.logged, t.last = 0, now, refusedConn{}
		}
	}
	l.mu.Unlock()
	for _, ln := range lines {
		logger.Info("Refused edge connections", "refusal", ln.metric, "count", ln.count, "in", ln.since.Round(time.Second),
			"lastRemote", ln.last.remote, "lastStatus", ln.last.status, "lastReason", ln.last.reason, "lastErr", ln.last.err)
	}
}

// run flushes the log every refusalLogPeriod until ctx ends.
func (l *refusalLog) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	t := l.clock.NewTicker(refusalLogPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			l.flush(logger, true)
			return
		case <-t.C():
			l.flush(logger, false)
		}
	}
}
