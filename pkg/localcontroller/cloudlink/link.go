// Package cloudlink is the LocalController's end of the cloud–edge channel: a
// websocket over TLS to the GlobalManager's edge hub, speaking edgeproto.
//
// On every connection the link states what the local store holds (Hello, in
// as many frames as it takes), then persists each Upsert or Delete the
// GlobalManager sends before it acknowledges it (a run of them that came in
// together in one transaction), and forwards the worker reports of the
// on-disk outbox in ID order, removing each only once the GlobalManager has
// acknowledged it. Its reader never waits for its writer, so it keeps
// reading while the GlobalManager is not. A broken
// connection is retried with jittered exponential backoff; meanwhile the
// worker API keeps answering from the store, which is what edge autonomy
// means, and reports wait in the outbox.
package cloudlink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// pollPeriod is how often a session looks at the outbox even without a
// wake-up: a safety net for reports appended without Outbox().
const pollPeriod = time.Second

// Link is the LocalController's cloud link. Create it with New and run it
// with Run; Outbox and Status are safe to call at any time.
type Link struct {
	logger  klog.Logger
	cfg     Config
	st      *store.Store
	metrics *metrics

	// wake tells the running session that the outbox has a new report, so it
	// goes up at once rather than at the next poll.
	wake chan struct{}
	// pollPeriod is pollPeriod; tests lengthen it to show that wake works.
	pollPeriod time.Duration
	running    atomic.Bool

	mu     sync.Mutex
	status Status
	// helloLastID is the last report ID the current connection's Hello
	// stated (the session's writer reads it).
	helloLastID uint64
}

// Status is what the link can say about itself, for /healthz.
type Status struct {
	// Connected is true while a session with the GlobalManager is open.
	Connected bool
	// Since is when Connected last changed (zero before the first attempt
	// ended or succeeded).
	Since time.Time
	// LastHeard is when the last frame from the GlobalManager arrived (zero if
	// none has yet).
	LastHeard time.Time
	// Synced is true once the GlobalManager has sent the whole difference on
	// the current session: the store holds what concerns the node.
	Synced bool
	// LastError says why the last connection attempt failed or the last
	// session ended ("" if none has).
	LastError string
}

// String is a one-line summary, for a health endpoint's body.
func (s Status) String() string {
	var b strings.Builder
	if s.Connected {
		fmt.Fprintf(&b, "cloud link: connected since %s", s.Since.Format(time.RFC3339))
		if s.Synced {
			b.WriteString(", store in sync")
		} else {
			b.WriteString(", syncing")
		}
	} else {
		b.WriteString("cloud link: disconnected")
		if !s.Since.IsZero() {
			fmt.Fprintf(&b, " since %s", s.Since.Format(time.RFC3339))
		}
		b.WriteString(" (serving workers from the local store)")
	}
	if !s.LastHeard.IsZero() {
		fmt.Fprintf(&b, ", last heard from the GlobalManager %s", s.LastHeard.Format(time.RFC3339))
	}
	if !s.Connected && s.LastError != "" {
		fmt.Fprintf(&b, ", last error: %s", s.LastError)
	}
	return b.String()
}

// New returns a link that syncs st with the GlobalManager at cfg.URL. It
// registers its metrics with reg unless reg is nil.
func New(logger klog.Logger, cfg Config, st *store.Store, reg prometheus.Registerer) (*Link, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("cloud link configuration: %w", err)
	}
	if st == nil {
		return nil, errors.New("cloud link configuration: a store is required")
	}
	l := &Link{
		logger:     logger.WithName("cloudlink"),
		cfg:        cfg,
		st:         st,
		metrics:    newMetrics(st),
		wake:       make(chan struct{}, 1),
		pollPeriod: pollPeriod,
	}
	if reg != nil {
		for _, c := range l.metrics.collectors() {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering cloud link metrics: %w", err)
			}
		}
	}
	return l, nil
}

// Run connects to the GlobalManager and keeps reconnecting, with jittered
// exponential backoff, until ctx is done; then it closes the session and
// returns nil. Every failure short of that is logged and retried, since the
// LocalController serves its workers from the store while the cloud is away.
// Run may be called once.
func (l *Link) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return errors.New("cloud link is already running")
	}
	logger := l.logger.WithValues("url", l.cfg.URL)
	attempt := 0
	for {
		start := l.cfg.Clock.Now()
		err := l.session(klog.NewContext(ctx, logger))
		if ctx.Err() != nil {
			return nil
		}
		// A session that lasted is not part of a run of failures, nor one
		// the GlobalManager ended going away (it shuts down: the next one
		// listens in seconds): the next wait starts again from BackoffMin.
		if l.cfg.Clock.Since(start) >= l.cfg.BackoffMax || goingAway(err) {
			attempt = 0
		}
		delay := retryDelay(l.cfg.BackoffMin, l.cfg.BackoffMax, attempt, err)
		attempt++
		logger.Info("Cloud link down; the worker API keeps serving from the local store", "err", err, "retryIn", delay, "attempt", attempt)
		t := l.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// refusedBackoffMax caps the wait after a connection nothing accepted (the
// GlobalManager's address refuses it: the process is restarting): such a try
// costs the GlobalManager nothing, and the new process should not wait for
// links that backed off while it started.
const refusedBackoffMax = 2 * time.Second

// retryDelay is the wait before connection attempt n+1 after n consecutive
// failures, the last with err: backoff, capped lower when nothing accepted
// the connection, and what the GlobalManager asked when it was busy.
func retryDelay(minDelay, maxDelay time.Duration, n int, err error) time.Duration {
	// A GlobalManager too busy to authenticate says when to come back: then,
	// spread over half as long again so that a storm of nodes does not
	// return in step, rather than a wait that grows with each refusal.
	var busy *busyError
	if errors.As(err, &busy) {
		after := min(max(busy.after, minDelay), maxDelay)
		return min(after+rand.N(after/2+1), maxDelay)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		maxDelay = max(minDelay, min(maxDelay, refusedBackoffMax))
	}
	return backoff(minDelay, maxDelay, n)
}

// goingAway says whether err ends a session the GlobalManager closed going
// away, as it does when it shuts down. Counting it as one more failure would
// make the LocalControllers of a GlobalManager restarted twice in a row (a
// rollout, a leader handed on) wait up to BackoffMax for the new one. The hub
// also closes going away a connection it heard nothing on for its read
// timeout; the next try then comes as soon, within the hub's per-node pace.
func goingAway(err error) bool {
	var closeErr *websocket.CloseError
	return errors.As(err, &closeErr) && closeErr.Code == websocket.CloseGoingAway
}

// backoff is the wait before connection attempt n+1 after n consecutive
// failures: min·2ⁿ capped at max, then jittered down by up to half so that
// the LocalControllers of many nodes do not reconnect in step after a
// GlobalManager restart.
func backoff(minDelay, maxDelay time.Duration, n int) time.Duration {
	d := minDelay
	for i := 0; i < n && d < maxDelay; i++ {
		if d > maxDelay/2 {
			d = maxDelay
			break
		}
		d *= 2
	}
	d = min(d, maxDelay)
	return d/2 + rand.N(d/2+1)
}

// Outbox is where the worker API and the LocalController's managers append
// reports: the store's outbox, plus a wake-up of the running session so the
// report goes up at once.
func (l *Link) Outbox() Outbox {
	return Outbox{l}
}

// Outbox appends to the store's outbox and wakes the link.
type Outbox struct{ l *Link }

// AppendReport appends a worker's report (see store.Store.AppendReport).
func (o Outbox) AppendReport(data []byte) (uint64, error) {
	return o.woken(o.l.st.AppendReport(data))
}

// AppendWorkerReport appends a report of a named worker, held to its share
// (see store.Store.AppendWorkerReport).
func (o Outbox) AppendWorkerReport(worker string, data []byte) (uint64, error) {
	return o.woken(o.l.st.AppendWorkerReport(worker, data))
}

// AppendReportWithState appends a report of the LocalController's own and
// sets a state in one transaction (see store.Store.AppendReportWithState).
func (o Outbox) AppendReportWithState(data []byte, stateKey string, state []byte) (uint64, error) {
	return o.woken(o.l.st.AppendReportWithState(data, stateKey, state))
}

// woken wakes the link when a report was appended.
func (o Outbox) woken(id uint64, err error) (uint64, error) {
	if err == nil {
		o.l.wakeUp()
	}
	return id, err
}

func (l *Link) wakeUp() {
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Status returns the link's current state.
func (l *Link) Status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status
}

func (l *Link) setConnected(connected bool, lastErr error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status.Connected != connected || l.status.Since.IsZero() {
		l.status.Since = l.cfg.Clock.Now()
	}
	l.status.Connected = connected
	l.status.Synced = false
	if lastErr != nil {
		l.status.LastError = lastErr.Error()
	}
	l.metrics.synced.Set(0)
	if connected {
		l.metrics.connected.Set(1)
	} else {
		l.metrics.connected.Set(0)
	}
}

func (l *Link) heard() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status.LastHeard = l.cfg.Clock.Now()
}

func (l *Link) setSynced() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.status.Synced = true
	l.metrics.synced.Set(1)
	l.metrics.syncs.Inc()
}
