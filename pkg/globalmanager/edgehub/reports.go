package edgehub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereid-ml/nereid/internal/lanes"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// A session's reports go through lanes, one per object they are about. The
// reports of a lane are applied in the order the LocalController sent them,
// and all that wait when the lane's last call ends go in its next call, so
// a node's burst about one object costs one status write; lanes run beside
// each other, so a report never waits for another object's write.
//
// Every session's lanes take turns to apply (writeTurns): a lane takes its
// reports when its turn comes, so while the API server is slower than the
// reports, they gather in their lane and go in one write, instead of each
// waiting in the API server's queue for a write of its own.

// maxReportLanes is how many objects' reports a session applies at once.
const maxReportLanes = 16

// writeTurns bounds the lanes applying reports at once, across sessions. A
// lane's call makes at most one status write at a time (the applier's writer
// of its object carries the reports of every lane that waits for it), so
// this bounds the status writes of reports in flight. Turns are given in the
// order they were asked for: a Go channel wakes its waiting senders in
// order.
type writeTurns struct {
	turns   chan struct{}
	waiting prometheus.Gauge // lanes waiting for a turn
}

func newWriteTurns(n int, waiting prometheus.Gauge) *writeTurns {
	return &writeTurns{turns: make(chan struct{}, n), waiting: waiting}
}

// turnsPerNode is how many of the shared turns one node's lanes hold at
// most: a node whose calls are slow (its objects' writes wait, or it sends
// many datasets' counts) slows only itself.
const turnsPerNode = 2

// laneTurn is a lane's turn, held or not: one of its node's turnsPerNode,
// then one of the shared turns. A lane holds at most one: it never waits
// for a turn while it holds one.
type laneTurn struct {
	turns *writeTurns
	node  chan struct{} // the node's turns
	held  bool
}

// take waits for a turn, unless one is held; it returns false if ctx ends
// first.
func (l *laneTurn) take(ctx context.Context) bool {
	if l.held {
		return true
	}
	if !acquire(ctx, l.node, nil) {
		return false
	}
	if !acquire(ctx, l.turns.turns, l.turns.waiting) {
		<-l.node
		return false
	}
	l.held = true
	return true
}

// acquire puts a token into sem, waiting (counted by waiting, if not nil)
// while it is full; it returns false if ctx ends first.
func acquire(ctx context.Context, sem chan struct{}, waiting prometheus.Gauge) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
	}
	if waiting != nil {
		waiting.Inc()
		defer waiting.Dec()
	}
	select {
	case sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// release gives the turn back, if held.
func (l *laneTurn) release() {
	if l.held {
		l.held = false
		<-l.turns.turns
		<-l.node
	}
}

// checkedReport is a report the hub has checked, waiting in its lane.
type checkedReport struct {
	r       *edgeproto.Report
	about   string                   // the object, for logs
	worker  *edgeproto.WorkerInfo    // a worker report's body,
	applier ReportApplier            // and its kind's applier
	ds      *edgeproto.DatasetReport // a dataset report's body
}

// reportLanes are a session's reports on their way to the appliers.
type reportLanes struct {
	waiting lanes.Lanes[string, *checkedReport] // by the object they are about
	slots   chan struct{}                       // one per running lane
	held    *heldReports                        // the reports read and not yet acknowledged
	turns   chan struct{}                       // one per turn the lanes hold (turnsPerNode)
	running sync.WaitGroup                      // the lanes' goroutines
	read    uint64                              // the reports read so far (the reader's)
}

// dispatchReport checks a report, in the reader, in the order the
// LocalController sent it, and hands it to the lane of its object, starting
// the lane's goroutine when it has none. It waits while reportQueue reports
// wait for their answers, or maxReportLanes lanes run: the LocalController's
// reports then wait in the connection. A report that cannot be applied now
// ends the connection (see doc.go): the LocalController resends it, and
// those after it, in order.
func (s *session) dispatchReport(r *edgeproto.Report) {
	ls := &s.reports
	if !ls.held.acquire(int64(len(r.Body))) {
		return // the session ends
	}
	key, c, err := s.check(r)
	if err != nil {
		s.answer(r, "", err)
		return
	}
	if !ls.waiting.Add(key, c) {
		return
	}
	select {
	case ls.slots <- struct{}{}:
	case <-s.ctx.Done():
		return
	}
	ls.running.Go(func() {
		defer func() { <-ls.slots }()
		s.runLane(key)
	})
}

// runLane applies what waits for key, call after call, until nothing does.
// Each call waits Config.ReportWindow, then for its turn, and only then
// takes what waits, so that it carries all that came meanwhile. After a
// report that cannot be applied now it stops the session and applies nothing
// more of the lane's object.
func (s *session) runLane(key string) {
	turn := &laneTurn{turns: s.hub.turns, node: s.reports.turns}
	for {
		if w := s.hub.cfg.ReportWindow; w > 0 {
			select {
			case <-s.hub.clock.After(w):
			case <-s.ctx.Done():
				return
			}
		}
		if !turn.take(s.ctx) {
			return
		}
		group := s.reports.waiting.Take(key)
		if len(group) == 0 {
			turn.release()
			return
		}
		err := s.applyGroup(group, turn)
		turn.release()
		if err != nil {
			var ce *closeError
			if errors.As(err, &ce) {
				s.logger.Info("Closing edge connection", "reason", ce.reason, "err", ce.err)
				s.stop(ce.code, ce.reason)
			}
			return
		}
	}
}

// applyBackoff are the waits between tries of reports whose applier fails
// with an error worth retrying; after the last the connection is closed.
var applyBackoff = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}

// applyGroup applies a lane's group of reports, trying those that fail with
// an error that is not a refusal again a little later, and answers each. An
// error no retry can mend (common.IsPermanent) becomes a refusal: resent forever,
// the report would hold up every later report of its object. The reports of
// a group share a write, so when that write is refused for good, each is
// applied again alone, to refuse only the one at fault. It applies in the
// lane's turn, and gives the turn back while it waits to try again.
func (s *session) applyGroup(group []*checkedReport, turn *laneTurn) error {
	about := group[0].about
	for try := 0; ; try++ {
		errs := s.apply(group)
		if len(group) > 1 && slices.ContainsFunc(errs, common.IsPermanent) {
			for _, c := range group {
				if err := s.applyGroup([]*checkedReport{c}, turn); err != nil {
					return err
				}
			}
			return nil
		}
		var again []*checkedReport
		var last error
		for i, c := range group {
			err := errs[i]
			if common.IsPermanent(err) {
				err = edgeproto.Refuse("the API server refuses the status write for good: %s", err.Error())
			}
			if _, refused := edgeproto.IsRefused(err); err != nil && !refused {
				again, last = append(again, c), err
				continue
			}
			s.answer(c.r, about, err)
		}
		if len(again) == 0 {
			return nil
		}
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		if try == len(applyBackoff) {
			return &closeError{code: websocket.CloseTryAgainLater,
				reason: fmt.Sprintf("report %d could not be applied, send it again", again[0].r.ID),
				err:    fmt.Errorf("applying report %d of worker %s about %s: %w", again[0].r.ID, edgeproto.ClipName(again[0].r.Worker), about, last)}
		}
		s.logger.V(2).Info("Applying reports failed, trying again", "about", about, "reports", len(again), "err", last)
		// Other lanes have the turn meanwhile.
		turn.release()
		select {
		case <-s.hub.clock.After(applyBackoff[try]):
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		if !turn.take(s.ctx) {
			return s.ctx.Err()
		}
		group = again
	}
}

// apply hands a group of reports about one object to its applier, and
// returns each one's result.
func (s *session) apply(group []*checkedReport) []error {
	if group[0].ds != nil {
		return applyInOrder(len(group), func(i int) error {
			return s.hub.datasets.ApplyDatasetReport(s.ctx, s.source(), group[i].r, group[i].ds)
		})
	}
	reports := make([]edgeproto.WorkerReport, len(group))
	for i, c := range group {
		reports[i] = edgeproto.WorkerReport{Report: c.r, Info: c.worker}
	}
	return group[0].applier.ApplyReports(s.ctx, s.source(), reports)
}

// answer hands a report's acknowledgement to the writer, without waiting
// for it: applied when err is nil, else refused with err's reason.
func (s *session) answer(r *edgeproto.Report, about string, err error) {
	result := reportResult{id: r.ID, size: int64(len(r.Body))}
	if err != nil {
		reason, _ := edgeproto.IsRefused(err)
		if reason == "" {
			reason = err.Error()
		}
		result.refused, result.reason = true, clipRefusal(reason)
		s.hub.metrics.reportsRefused.Inc()
		s.logger.Info("Refused a report", "report", r.ID, "worker", edgeproto.ClipName(r.Worker), "reason", result.reason)
	} else {
		s.hub.metrics.reportsApplied.Inc()
		s.logger.V(4).Info("Applied a report", "report", r.ID, "worker", edgeproto.ClipName(r.Worker), "about", about)
	}
	s.answeredMu.Lock()
	s.answered = append(s.answered, result)
	s.answeredMu.Unlock()
	select {
	case s.resultsReady <- struct{}{}:
	default: // the writer has yet to take the earlier ones, and these with them
	}
	s.wake()
}

// check checks a report and returns the key of the object it is about and
// the report checked; an error refuses it. The reader calls it, in the
// order the reports came.
func (s *session) check(r *edgeproto.Report) (string, *checkedReport, error) {
	// The k-th report of the connection is one the store held at the Hello
	// or one taken since, so its ID is at most the Hello's last ID plus k.
	// An ID past that would record the store's later IDs as applied, and
	// they would be acknowledged without effect: it is refused, for good.
	s.reports.read++
	if limit := s.hello.LastReportID + s.reports.read; r.ID > limit {
		return "", nil, edgeproto.Refuse("report ID %d cannot be real: the store had given IDs up to %d when the connection began, and this is its report %d since",
			r.ID, s.hello.LastReportID, s.reports.read)
	}
	switch r.Kind {
	case edgeproto.ReportWorker:
		return s.checkWorker(r)
	case edgeproto.ReportDataset:
		return s.checkDataset(r)
	}
	return "", nil, edgeproto.Refuse("unknown report kind %q", clipRefusal(string(r.Kind)))
}

// checkWorker checks a worker's report, for its kind's applier.
func (s *session) checkWorker(r *edgeproto.Report) (string, *checkedReport, error) {
	info, err := edgeproto.ParseWorkerInfo(r.Body)
	if err != nil {
		return "", nil, edgeproto.Refuse("invalid worker report: %s", err.Error())
	}
	if info.Name != r.Worker {
		// The worker API takes a report only under its body's name; the
		// status records r.Worker, so the two must be the one checked.
		return "", nil, edgeproto.Refuse("the report is of worker %s, its body names %s", edgeproto.ClipName(r.Worker), edgeproto.ClipName(info.Name))
	}
	o := info.Owner()
	obj, k, ok := s.hub.concerns(s.node, o)
	if !ok {
		return "", nil, edgeproto.Refuse("node %s has no worker in %s %s/%s", s.node, o.Kind, o.Namespace, o.Name)
	}
	if err := s.hub.checkWorker(s.node, k, obj, info.Name, r.From, r.ReceivedAt); err != nil {
		return "", nil, err
	}
	a := s.hub.appliers[o.Kind]
	if a == nil {
		return "", nil, edgeproto.Refuse("the GlobalManager applies no reports of kind %s", o.Kind)
	}
	about := o.String()
	return "worker/" + about, &checkedReport{r: r, about: about, worker: info, applier: a}, nil
}

// checkDataset checks a LocalController's count of a Dataset, for the
// dataset applier.
func (s *session) checkDataset(r *edgeproto.Report) (string, *checkedReport, error) {
	d, err := edgeproto.ParseDatasetReport(r.Body)
	if err != nil {
		return "", nil, edgeproto.Refuse("invalid dataset report: %s", err.Error())
	}
	ref := d.Ref()
	if _, _, ok := s.hub.concerns(s.node, ref); !ok {
		return "", nil, edgeproto.Refuse("dataset %s/%s is not on node %s", ref.Namespace, ref.Name, s.node)
	}
	if s.hub.datasets == nil {
		return "", nil, edgeproto.Refuse("the GlobalManager applies no dataset reports")
	}
	about := ref.String()
	return "dataset/" + about, &checkedReport{r: r, about: about, ds: d}, nil
}

// clipRefusal keeps a refusal's reason to a log line.
func clipRefusal(s string) string { return edgeproto.Clip(s, 1024, "…") }

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
