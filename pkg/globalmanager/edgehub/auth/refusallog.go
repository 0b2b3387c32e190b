package auth

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

// RefusedConn is one refused connection, as logged.
type RefusedConn struct {
	Remote string
	Status int
	Reason string
	Err    error
}

// RefusalLog logs refused connections, a line per reason and period at most.
type RefusalLog struct {
	clock clock.WithTicker

	mu      sync.Mutex
	reasons map[string]*refusalTally // by metric label: a fixed set
}

// refusalTally is what of a reason's refusals is not logged yet.
type refusalTally struct {
	logged time.Time // when its last line was written
	count  int       // refused since, not logged
	last   RefusedConn
}

func NewRefusalLog(clk clock.WithTicker) *RefusalLog {
	return &RefusalLog{clock: clk, reasons: make(map[string]*refusalTally)}
}

// Refused logs r, refused with reason label metric, or counts it for the
// next line of its reason.
func (l *RefusalLog) Refused(logger klog.Logger, metric string, r RefusedConn) {
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
	logger.Info("Refused an edge connection", "refusal", metric, "remote", r.Remote, "status", r.Status, "reason", r.Reason, "err", r.Err)
}

// flush writes a line for each reason whose refusals were counted and whose
// last line is at least refusalLogPeriod old, or, with all, for each whose
// refusals were counted.
func (l *RefusalLog) flush(logger klog.Logger, all bool) {
	type line struct {
		metric string
		count  int
		since  time.Duration
		last   RefusedConn
	}
	var lines []line
	l.mu.Lock()
	now := l.clock.Now()
	for metric, t := range l.reasons {
		if t.count > 0 && (all || now.Sub(t.logged) >= refusalLogPeriod) {
			lines = append(lines, line{metric: metric, count: t.count, since: now.Sub(t.logged), last: t.last})
			t.count, t.logged, t.last = 0, now, RefusedConn{}
		}
	}
	l.mu.Unlock()
	for _, ln := range lines {
		logger.Info("Refused edge connections", "refusal", ln.metric, "count", ln.count, "in", ln.since.Round(time.Second),
			"lastRemote", ln.last.Remote, "lastStatus", ln.last.Status, "lastReason", ln.last.Reason, "lastErr", ln.last.Err)
	}
}

// Run flushes the log every refusalLogPeriod until ctx ends.
func (l *RefusalLog) Run(ctx context.Context) {
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
