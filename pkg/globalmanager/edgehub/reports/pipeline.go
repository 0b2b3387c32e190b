package reports

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/lanes"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// A session's reports go through lanes, one per object they are about. The
// reports of a lane are applied in the order the LocalController sent them,
// and all that wait when the lane's last call ends go in its next call, so
// a node's burst about one object costs one status write; lanes run beside
// each other, so a report never waits for another object's write.

// maxReportLanes is how many objects' reports a session applies at once.
const maxReportLanes = 16

// reportQueue is how many reports the reader hands on before it waits for
// their acknowledgements to be sent: enough that object acks read behind a
// burst of reports are not held up by the reports' status writes (which
// would make the writer resend objects the LocalController already has).
const reportQueue = 1024

// maxHeldReportBytes bounds the bodies of a session's reports read and not
// yet acknowledged: a thousand reports of a MiB each would otherwise be held
// for one node.
const maxHeldReportBytes = 16 << 20

// Checked is a report the hub has checked, on its way to its applier.
type Checked struct {
	Report  *edgeproto.Report
	About   string                   // the object, for logs
	Worker  *edgeproto.WorkerInfo    // a worker report's body,
	Applier ReportApplier            // and its kind's applier
	Dataset *edgeproto.DatasetReport // a dataset report's body
}

// Config is what one connection's Pipeline needs.
type Config struct {
	// Source is where the connection's reports come from; LastReportID is
	// the last ID its Hello stated.
	Source       Source
	LastReportID uint64
	// Check checks a report against what the node runs, and returns the key
	// of the object it is about (one lane per key) and the report checked;
	// an error refuses it. It is called in the order the reports came.
	Check func(r *edgeproto.Report) (key string, c *Checked, err error)
	// Datasets applies the dataset counts Check lets through.
	Datasets DatasetApplier
	// Turns are shared by every connection's lanes; Window is how long a
	// lane's call waits for more of the node's reports before its turn.
	Turns  *Turns
	Window time.Duration
	Clock  clock.Clock
	// Applied and Refused count the reports answered, when not nil.
	Applied, Refused prometheus.Counter
	// Answered is told that answers wait (Answers): the writer's wake-up.
	Answered func()
	// GiveUp ends the connection when a report cannot be applied now and
	// was tried again enough: reason is for the close frame, err for the
	// log. The LocalController resends it, and those after it, in order.
	GiveUp func(reason string, err error)
}

// Result is a report to acknowledge: applied, or refused with a reason.
type Result struct {
	ID      uint64
	Refused bool
	Reason  string
	size    int64 // of the report's body, held until the ack is sent
}

// Pipeline is one connection's reports on their way to the appliers, and
// their answers on their way back: one lane per object, a bounded number
// read and not yet acknowledged.
type Pipeline struct {
	cfg     Config
	ctx     context.Context
	logger  klog.Logger
	waiting lanes.Lanes[string, *Checked] // by the object they are about
	slots   chan struct{}                 // one per running lane
	held    *heldReports                  // the reports read and not yet acknowledged
	turns   chan struct{}                 // one per turn the lanes hold (turnsPerNode)
	running sync.WaitGroup                // the lanes' goroutines
	read    uint64                        // the reports read so far (the reader's)

	// answered are the reports' answers waiting for the writer's
	// acknowledgement; ready says there are some. An answer never waits
	// for the writer: a lane gives its turn back at once, however slowly
	// the node reads.
	answeredMu sync.Mutex
	answered   []Result
	ready      chan struct{}
}

// NewPipeline returns the pipeline of a connection whose life is ctx.
func NewPipeline(ctx context.Context, cfg Config) *Pipeline {
	return &Pipeline{cfg: cfg, ctx: ctx, logger: klog.FromContext(ctx),
		slots: make(chan struct{}, maxReportLanes), held: newHeldReports(ctx, reportQueue, maxHeldReportBytes),
		turns: make(chan struct{}, turnsPerNode), ready: make(chan struct{}, 1)}
}

// Ready has a value when answers wait to be taken (Answers).
func (p *Pipeline) Ready() <-chan struct{} { return p.ready }

// Answers takes the answers so far, in the order they came.
func (p *Pipeline) Answers() []Result {
	p.answeredMu.Lock()
	defer p.answeredMu.Unlock()
	results := p.answered
	p.answered = nil
	return results
}

// Acknowledged lets go of the reports of results, acknowledged: the reader
// may read as many again.
func (p *Pipeline) Acknowledged(results []Result) {
	for _, r := range results {
		p.held.release(r.size)
	}
}

// Wait waits for the lanes to return, once the connection's context ended.
func (p *Pipeline) Wait() { p.running.Wait() }

// Dispatch checks a report, in the reader, in the order the
// LocalController sent it, and hands it to the lane of its object, starting
// the lane's goroutine when it has none. It waits while reportQueue reports
// wait for their answers, or maxReportLanes lanes run: the LocalController's
// reports then wait in the connection. A report that cannot be applied now
// ends the connection (see doc.go): the LocalController resends it, and
// those after it, in order.
func (p *Pipeline) Dispatch(r *edgeproto.Report) {
	if !p.held.acquire(int64(len(r.Body))) {
		return // the session ends
	}
	key, c, err := p.check(r)
	if err != nil {
		p.answer(r, "", err)
		return
	}
	if !p.waiting.Add(key, c) {
		return
	}
	select {
	case p.slots <- struct{}{}:
	case <-p.ctx.Done():
		return
	}
	p.running.Go(func() {
		defer func() { <-p.slots }()
		p.runLane(key)
	})
}

// check refuses a report whose ID cannot be real, then has Config.Check
// check it.
func (p *Pipeline) check(r *edgeproto.Report) (string, *Checked, error) {
	// The k-th report of the connection is one the store held at the Hello
	// or one taken since, so its ID is at most the Hello's last ID plus k.
	// An ID past that would record the store's later IDs as applied, and
	// they would be acknowledged without effect: it is refused, for good.
	p.read++
	if limit := p.cfg.LastReportID + p.read; r.ID > limit {
		return "", nil, edgeproto.Refuse("report ID %d cannot be real: the store had given IDs up to %d when the connection began, and this is its report %d since",
			r.ID, p.cfg.LastReportID, p.read)
	}
	return p.cfg.Check(r)
}

// giveUp is why a lane stops: a report that cannot be applied now.
type giveUp struct {
	reason string
	err    error
}

func (g *giveUp) Error() string { return g.reason + ": " + g.err.Error() }

// runLane applies what waits for key, call after call, until nothing does.
// Each call waits Config.ReportWindow, then for its turn, and only then
// takes what waits, so that it carries all that came meanwhile. After a
// report that cannot be applied now it stops the session and applies nothing
// more of the lane's object.
func (p *Pipeline) runLane(key string) {
	turn := &laneTurn{turns: p.cfg.Turns, node: p.turns}
	for {
		// A lane with nothing left ends here, before it waits for a turn
		// it would not use.
		if p.waiting.Idle(key) {
			return
		}
		if w := p.cfg.Window; w > 0 {
			select {
			case <-p.cfg.Clock.After(w):
			case <-p.ctx.Done():
				return
			}
		}
		if !turn.take(p.ctx) {
			return
		}
		group := p.waiting.Take(key)
		if len(group) == 0 {
			turn.release()
			return
		}
		err := p.applyGroup(group, turn)
		turn.release()
		if err != nil {
			var g *giveUp
			if errors.As(err, &g) {
				p.cfg.GiveUp(g.reason, g.err)
			}
			return
		}
	}
}

// applyBackoff are the waits between tries of reports whose applier fails
// with an error worth retrying; after the last the connection is closed.
var applyBackoff = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}

// RetryWaits are the waits between the tries of a report whose applier
// fails with an error worth retrying; after the last the connection is
// closed.
func RetryWaits() []time.Duration { return slices.Clone(applyBackoff) }

// applyGroup applies a lane's group of reports, trying those that fail with
// an error that is not a refusal again a little later, and answers each. An
// error no retry can mend (common.IsPermanent) becomes a refusal: resent forever,
// the report would hold up every later report of its object. The reports of
// a group share a write, so when that write is refused for good, each is
// applied again alone, to refuse only the one at fault. It applies in the
// lane's turn, and gives the turn back while it waits to try again.
func (p *Pipeline) applyGroup(group []*Checked, turn *laneTurn) error {
	about := group[0].About
	for try := 0; ; try++ {
		errs := p.apply(group)
		if len(group) > 1 && slices.ContainsFunc(errs, common.IsPermanent) {
			for _, c := range group {
				if err := p.applyGroup([]*Checked{c}, turn); err != nil {
					return err
				}
			}
			return nil
		}
		var again []*Checked
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
			p.answer(c.Report, about, err)
		}
		if len(again) == 0 {
			return nil
		}
		if p.ctx.Err() != nil {
			return p.ctx.Err()
		}
		if try == len(applyBackoff) {
			first := again[0].Report
			return &giveUp{reason: fmt.Sprintf("report %d could not be applied, send it again", first.ID),
				err: fmt.Errorf("applying report %d of worker %s about %s: %w", first.ID, edgeproto.ClipName(first.Worker), about, last)}
		}
		p.logger.V(2).Info("Applying reports failed, trying again", "about", about, "reports", len(again), "err", last)
		// Other lanes have the turn meanwhile.
		turn.release()
		select {
		case <-p.cfg.Clock.After(applyBackoff[try]):
		case <-p.ctx.Done():
			return p.ctx.Err()
		}
		if !turn.take(p.ctx) {
			return p.ctx.Err()
		}
		group = again
	}
}

// apply hands a group of reports about one object to its applier, and
// returns each one's result.
func (p *Pipeline) apply(group []*Checked) []error {
	if group[0].Dataset != nil {
		return ApplyInOrder(len(group), func(i int) error {
			return p.cfg.Datasets.ApplyDatasetReport(p.ctx, p.cfg.Source, group[i].Report, group[i].Dataset)
		})
	}
	reports := make([]edgeproto.WorkerReport, len(group))
	for i, c := range group {
		reports[i] = edgeproto.WorkerReport{Report: c.Report, Info: c.Worker}
	}
	return group[0].Applier.ApplyReports(p.ctx, p.cfg.Source, reports)
}

// answer hands a report's acknowledgement to the writer, without waiting
// for it: applied when err is nil, else refused with err's reason.
func (p *Pipeline) answer(r *edgeproto.Report, about string, err error) {
	result := Result{ID: r.ID, size: int64(len(r.Body))}
	if err != nil {
		reason, _ := edgeproto.IsRefused(err)
		if reason == "" {
			reason = err.Error()
		}
		result.Refused, result.Reason = true, ClipRefusal(reason)
		count(p.cfg.Refused)
		p.logger.Info("Refused a report", "report", r.ID, "worker", edgeproto.ClipName(r.Worker), "reason", result.Reason)
	} else {
		count(p.cfg.Applied)
		p.logger.V(4).Info("Applied a report", "report", r.ID, "worker", edgeproto.ClipName(r.Worker), "about", about)
	}
	p.answeredMu.Lock()
	p.answered = append(p.answered, result)
	p.answeredMu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default: // the writer has yet to take the earlier ones, and these with them
	}
	if p.cfg.Answered != nil {
		p.cfg.Answered()
	}
}

// count adds one to c, unless it is nil.
func count(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}

// ClipRefusal keeps a refusal's reason to a log line.
func ClipRefusal(s string) string { return edgeproto.Clip(s, 1024, "…") }
