package edgehub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/window"
)

// ReasonUnsendable is the reason of the Warning event on an object that cannot
// be sent to an edge node that needs it.
const ReasonUnsendable = "EdgeSyncFailed"

// workerNamesReserve is the room an Upsert keeps for its worker names (and
// its envelope): an object larger than MaxObjectFrameBytes less this cannot
// be sent to any node.
const workerNamesReserve = 64 << 10

// closeGrace is how long a closing connection waits for the peer to answer
// its close frame before the TCP connection is cut. The connections' read
// and write deadlines are counted on the wall clock (time.Now), not on the
// hub's clock: a net.Conn's deadline is an instant of the wall clock, and a
// test that moves the hub's clock must not cut connections. The timer that
// cuts a stopped session's connection is the hub's, as all its timers are;
// the read deadline still bounds a reader the timer has not yet freed.
const closeGrace = time.Second

// maxCloseReason is the most a close frame's reason holds (125 bytes of
// control frame payload less the 2-byte code).
const maxCloseReason = 123

// closeError ends a connection with a websocket close code and a reason; err,
// if set, is what is logged in full.
type closeError struct {
	code   int
	reason string
	err    error
}

func (e *closeError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.reason
}

func (e *closeError) Unwrap() error { return e.err }

// frameError is the closeError for a frame edgeproto.Decode refused.
func frameError(err error) *closeError {
	code := websocket.CloseInvalidFramePayloadData
	switch {
	case errors.Is(err, edgeproto.ErrTooLarge):
		code = websocket.CloseMessageTooBig
	case errors.Is(err, edgeproto.ErrUnknownVersion), errors.Is(err, edgeproto.ErrUnknownType):
		code = websocket.CloseUnsupportedData
	}
	return &closeError{code: code, reason: err.Error(), err: fmt.Errorf("decoding frame: %w", err)}
}

// readError is the error of a failed read: the peer's close (a
// *websocket.CloseError), or a closeError for a timeout, a frame over the read
// limit, or a broken connection.
func readError(err error, timeout time.Duration) error {
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		return ce // the peer's close: the caller tells it apart
	case errors.Is(err, websocket.ErrReadLimit):
		return &closeError{code: websocket.CloseMessageTooBig, reason: fmt.Sprintf("frame larger than %d bytes", edgeproto.MaxFrameBytes), err: err}
	case errors.As(err, &ne) && ne.Timeout():
		return &closeError{code: websocket.CloseGoingAway, reason: fmt.Sprintf("no message for %s", timeout), err: err}
	}
	return &closeError{code: websocket.CloseAbnormalClosure, reason: "connection lost", err: err}
}

// clipReason shortens a close reason to what a close frame holds, at a rune
// boundary.
func clipReason(s string) string { return edgeproto.Clip(s, maxCloseReason, "…") }

// closeConn sends a close frame, waits a little for the peer's answer, and
// closes conn. It is for connections that never became a session.
func closeConn(conn *websocket.Conn, code int, reason string) {
	deadline := time.Now().Add(closeGrace)
	_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, clipReason(reason)), deadline)
	_ = conn.SetReadDeadline(deadline)
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			break
		}
	}
	_ = conn.Close()
}

// session is one LocalController connection after its Hello. Its reader (the
// HTTP handler's goroutine) reads and applies frames; its writer owns the
// downstream state and is the only one writing data frames. The writer runs
// only while it has work (wake): an idle connection holds one goroutine, its
// reader's, not two.
type session struct {
	hub  *Hub
	node string
	id   *auth.Identity
	// token is the one the connection was authenticated with, checked
	// again every recheckPeriod (recheck.go); checkedAt is when it last
	// was (Unix nanoseconds).
	token     string
	checkedAt atomic.Int64
	conn      *websocket.Conn
	logger    klog.Logger
	hello     *edgeproto.Hello
	// link is the connection's handle on the node's Lease, set as it is
	// recorded, before it runs.
	link *links.Conn

	ctx      context.Context
	cancel   context.CancelFunc
	stopOnce sync.Once
	done     chan struct{} // closed once reader and writer have returned

	dirty chan struct{} // the node's set may have changed
	acks  chan []edgeproto.ObjectVersion
	// reports are the reports read and not yet acknowledged, and their
	// answers (package reports).
	reports *reports.Pipeline

	// What wakes the writer (wake): woken says it may have work, writing
	// that a writer goroutine runs; writers start only once run has begun
	// (opened: the session it replaces has ended, so that the two never
	// both send) and not after it returns (closed). Timers set heartbeatDue
	// and resendDue.
	wakeMu                         sync.Mutex
	woken, writing, opened, closed bool
	writers                        sync.WaitGroup
	heartbeatDue, resendDue        atomic.Bool
	unacked                        atomic.Int64 // the window's Inflight, as the writer last left it

	// The writer's own.
	begun, synced bool // the first sync is made; Synced is sent
	downstream    *window.Window
}

func newSession(ctx context.Context, h *Hub, id *auth.Identity, conn *websocket.Conn, hello *edgeproto.Hello, logger klog.Logger) *session {
	ctx, cancel := context.WithCancel(ctx)
	s := &session{
		hub: h, node: id.Node, id: id, conn: conn, logger: logger, hello: hello,
		ctx: klog.NewContext(ctx, logger), cancel: cancel,
		done:  make(chan struct{}),
		dirty: make(chan struct{}, 1),
		acks:  make(chan []edgeproto.ObjectVersion, 16),
	}
	s.downstream = window.New(window.Config{
		Size: h.cfg.SendWindow, ResendAfter: h.cfg.ResendAfter, Compare: h.compareRefs,
		Desired: func() window.Set { return h.sets.Of(s.node) }, Held: hello.Inventory, Out: s, Clock: h.clock,
		Resent: h.metrics.resends.Inc, Acked: func(d time.Duration) { h.metrics.ackLatency.Observe(d.Seconds()) },
	})
	s.reports = reports.NewPipeline(s.ctx, reports.Config{
		Source: s.source(), LastReportID: hello.LastReportID, Check: s.checkReport, Datasets: h.datasets,
		Turns: h.turns, Window: h.cfg.ReportWindow, Clock: h.clock,
		Applied: h.metrics.reportsApplied, Refused: h.metrics.reportsRefused, Answered: s.wake,
		GiveUp: func(reason string, err error) {
			s.logger.Info("Closing edge connection", "reason", reason, "err", err)
			s.stop(websocket.CloseTryAgainLater, reason)
		},
	})
	s.checkedAt.Store(h.clock.Now().UnixNano())
	return s
}

// source is where the session's reports come from.
func (s *session) source() reports.Source {
	return reports.Source{Node: s.node, Store: s.hello.Store}
}

// markDirty asks the writer to compare the node's set with what was sent.
func (s *session) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
	s.wake()
}

// wake says the writer has work: it starts a writer goroutine unless one
// runs (which then looks again) or the session has ended.
func (s *session) wake() {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	s.woken = true
	if s.writing || !s.opened || s.closed || s.ctx.Err() != nil {
		return
	}
	s.writing = true
	s.writers.Add(1)
	go s.writeWhileWoken()
}

// writeWhileWoken writes until nothing woke it since it last looked. A write
// that fails stops the session, and no writer starts again.
func (s *session) writeWhileWoken() {
	defer s.writers.Done()
	for {
		s.wakeMu.Lock()
		if !s.woken {
			s.writing = false
			s.wakeMu.Unlock()
			return
		}
		s.woken = false
		s.wakeMu.Unlock()
		if err := s.write(); err != nil {
			s.logger.Error(err, "Closing edge connection: writing failed")
			s.stop(websocket.CloseInternalServerErr, "writing failed")
			return
		}
	}
}

// every sets due and wakes the writer every period until the session stops
// or stop is called; while skip says there is nothing to do, it only waits
// for the next period.
func (s *session) every(period time.Duration, due *atomic.Bool, skip func() bool) (stop func()) {
	var mu sync.Mutex
	mu.Lock()
	defer mu.Unlock()
	stopped := false
	var t clock.Timer
	t = s.hub.clock.AfterFunc(period, func() {
		if s.ctx.Err() != nil {
			return
		}
		if skip == nil || !skip() {
			due.Store(true)
			s.wake()
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(period)
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// stop ends the session with a close frame; the reader returns when the peer
// answers it, or when the connection is cut closeGrace later.
func (s *session) stop(code int, reason string) {
	s.stopOnce.Do(func() {
		s.cancel()
		_ = s.conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(code, clipReason(reason)), time.Now().Add(closeGrace))
		s.hub.clock.AfterFunc(closeGrace, func() { _ = s.conn.Close() })
	})
}

// revoke ends a session whose identity no longer holds, saying why.
func (s *session) revoke(reason, message string) {
	if s.ctx.Err() != nil {
		return
	}
	s.hub.metrics.revoked.WithLabelValues(reason).Inc()
	s.logger.Info("Closing edge connection: its identity no longer holds", "reason", message)
	s.stop(websocket.ClosePolicyViolation, message)
}

// revokePodDeleted ends a session whose LocalController Pod was deleted.
func (s *session) revokePodDeleted() {
	s.revoke(auth.RevokedPodDeleted, fmt.Sprintf("the LocalController's Pod %s was deleted", s.id.Pod))
}

// run serves the session until it stops.
func (s *session) run() {
	// A token past its expiry (or its rotation) proves nothing: the
	// LocalController reconnects with the one the kubelet has rotated in.
	if !s.id.Expires.IsZero() {
		expiry := s.hub.clock.AfterFunc(s.id.Expires.Sub(s.hub.clock.Now()), func() {
			s.revoke(auth.RevokedTokenExpired, "the LocalController's token expired; reconnect with the rotated token")
		})
		defer expiry.Stop()
	}
	cfg := s.hub.cfg
	defer s.every(cfg.HeartbeatPeriod, &s.heartbeatDue, nil)()
	// Resends are looked for only while something waits for its Ack.
	defer s.every(max(cfg.ResendAfter/4, 10*time.Millisecond), &s.resendDue, func() bool { return s.unacked.Load() == 0 })()
	s.wakeMu.Lock()
	s.opened = true
	s.wakeMu.Unlock()
	s.wake() // the difference that answers the Hello
	err := s.read()
	var ce *closeError
	var peer *websocket.CloseError
	switch {
	case s.ctx.Err() != nil:
		// Stopped by the hub (replaced, shutting down) or by the writer.
	case errors.As(err, &peer):
		s.logger.V(2).Info("Edge connection closed by the LocalController", "code", peer.Code, "reason", peer.Text)
	case errors.As(err, &ce):
		s.logger.Info("Closing edge connection", "reason", ce.reason, "err", ce.err)
		s.stop(ce.code, ce.reason)
		// Give the peer the time to read the close frame and answer it: a
		// connection cut with unread input is reset, and the peer may lose
		// the frame. After a frame over the limit the websocket reader is
		// spent, and the rest of that frame is read off the TCP connection.
		_ = s.conn.SetReadDeadline(time.Now().Add(closeGrace))
		if errors.Is(ce.err, websocket.ErrReadLimit) {
			_, _ = io.Copy(io.Discard, s.conn.NetConn())
		} else {
			for {
				if _, _, err := s.conn.ReadMessage(); err != nil {
					break
				}
			}
		}
	}
	s.stop(websocket.CloseNormalClosure, "")
	s.wakeMu.Lock()
	s.closed = true
	s.wakeMu.Unlock()
	s.writers.Wait()
	s.reports.Wait()
	_ = s.conn.Close()
}

// read reads frames until the connection ends, and returns why.
func (s *session) read() error {
	timeout := s.hub.cfg.ReadTimeout
	for {
		_ = s.conn.SetReadDeadline(time.Now().Add(timeout))
		_, frame, err := s.conn.ReadMessage()
		if err != nil {
			return readError(err, timeout)
		}
		if s.ctx.Err() != nil {
			continue // closing: only the peer's close frame matters now
		}
		s.hub.links.Heard(s.link)
		msg, err := edgeproto.Decode(frame)
		if err != nil {
			return frameError(err)
		}
		s.hub.metrics.receivedMessage(msg.Type())
		switch m := msg.(type) {
		case *edgeproto.Heartbeat:
			if m.Outbox != nil {
				s.hub.links.SetOutbox(s.link, *m.Outbox)
			}
		case *edgeproto.Ack:
			select {
			case s.acks <- m.Objects:
				s.wake()
			case <-s.ctx.Done():
			}
		case *edgeproto.Report:
			s.reports.Dispatch(m)
		case *edgeproto.Inventory:
			return &closeError{code: websocket.ClosePolicyViolation,
				reason: "unexpected inventory message from a LocalController: its hello has ended"}
		default:
			return &closeError{code: websocket.ClosePolicyViolation,
				reason: fmt.Sprintf("unexpected %s message from a LocalController", msg.Type())}
		}
	}
}

// write sends the difference that answers the Hello (on its first call), as
// the window allows, then Synced, then changes, resends, report
// acknowledgements and heartbeats, until none is ready; wake calls it again
// when one is.
func (s *session) write() error {
	var err error
	if !s.begun {
		s.begun = true
		err = s.downstream.Sync(nil)
	}
	for {
		if err == nil && !s.synced && s.downstream.Queued() == 0 {
			// Everything of the difference is sent, if not yet acknowledged:
			// the LC applies frames in order, so by the time it reads Synced
			// its store holds the node's set.
			err = s.send(&edgeproto.Synced{})
			s.synced = true
			s.logger.V(2).Info("Edge node synced", "held", s.downstream.Held(), "inflight", s.downstream.Inflight())
		}
		if err != nil {
			if s.ctx.Err() != nil {
				return nil // the connection was closed under the write
			}
			return err
		}
		s.hub.links.SetUnacked(s.link, s.downstream.Inflight())
		s.unacked.Store(int64(s.downstream.Inflight()))

		// A heartbeat or resend that is due goes first: a stream of changes
		// or Acks must not hold them back.
		switch {
		case s.ctx.Err() != nil:
			return nil
		case s.heartbeatDue.Swap(false):
			err = s.send(&edgeproto.Heartbeat{Time: s.hub.clock.Now()})
			continue
		case s.resendDue.Swap(false):
			err = s.downstream.Resend()
			continue
		}
		select {
		case <-s.dirty:
			err = s.downstream.Sync(nil)
		case acks := <-s.acks:
			s.downstream.Ack(acks)
		case <-s.reports.Ready():
			err = s.ackReports()
		default:
			if s.downstream.Queued() == 0 || s.downstream.Full() {
				return nil
			}
			err = s.downstream.Fill()
		}
	}
}

// send writes one message.
func (s *session) send(m edgeproto.Message) error {
	frame, err := edgeproto.Encode(m)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", m.Type(), err)
	}
	return s.sendFrame(m.Type(), frame)
}

func (s *session) sendFrame(t edgeproto.Type, frame []byte) error {
	// A LocalController that reads nothing for a read timeout is gone.
	_ = s.conn.SetWriteDeadline(time.Now().Add(s.hub.cfg.ReadTimeout))
	if err := s.conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		return fmt.Errorf("sending %s: %w", t, err)
	}
	s.hub.metrics.sentMessage(t)
	return nil
}

// ackReports acknowledges the reports answered so far, in one ReportAck.
func (s *session) ackReports() error {
	results := s.reports.Answers()
	if len(results) == 0 {
		return nil
	}
	// The reader may read as many reports again once these are sent.
	defer s.reports.Acknowledged(results)
	acks := reports.Acks(results)
	var last uint64
	for _, ack := range acks {
		for _, id := range ack.IDs {
			last = max(last, id)
		}
	}
	// Recorded before it is sent: a LocalController that reconnects as soon
	// as it reads the ack states that ID in its Hello, which the record
	// bounds (checkReportIDClaim). The reports are applied either way.
	s.hub.links.ReportAcked(s.link, last)
	for _, ack := range acks {
		if err := s.send(ack); err != nil {
			return err
		}
	}
	return nil
}

// The session is an auth.Conn, for the confirmation of its token.

// Identity is who the session's connection was admitted as.
func (s *session) Identity() *auth.Identity { return s.id }

// Ended says whether the session has ended.
func (s *session) Ended() bool { return s.ctx.Err() != nil }

// Revoke ends the session: what admitted it no longer holds.
func (s *session) Revoke(reason, message string) { s.revoke(reason, message) }

// Logger is the session's.
func (s *session) Logger() klog.Logger { return s.logger }
