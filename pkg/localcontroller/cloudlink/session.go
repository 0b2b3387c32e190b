package cloudlink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

const (
	// maxAckBatch bounds the versions one Ack carries, well under
	// MaxFrameBytes even with the longest names.
	maxAckBatch = 256
	// applyQueue is how many messages the reader hands on before it waits
	// for the store; past it the GlobalManager waits too, at the pace of
	// the disk.
	applyQueue = 1024
	// maxApplyBatch and maxApplyBytes bound the Upserts and Deletes persisted
	// in one store transaction.
	maxApplyBatch = 256
	maxApplyBytes = 8 << 20
	// closeWait bounds the write of a close frame.
	closeWait = time.Second
	// maxCloseText is what a close frame holds besides its code.
	maxCloseText = 123
)

// sessionError is why a session ended: a bounded reason for
// disconnects_total and, when this end closes a working connection, the close
// code that tells the GlobalManager why.
type sessionError struct {
	reason    string
	closeCode int // 0: send no close frame (the connection is broken or already closing)
	err       error
}

func (e *sessionError) Error() string { return e.err.Error() }
func (e *sessionError) Unwrap() error { return e.err }

func endSession(reason string, closeCode int, err error) *sessionError {
	return &sessionError{reason: reason, closeCode: closeCode, err: err}
}

// session dials the GlobalManager and runs one session until it ends, and
// returns why.
func (l *Link) session(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	conn, err := l.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		l.metrics.connectErrors.Inc()
		l.setConnected(false, err)
		return err
	}
	l.metrics.connects.Inc()
	l.setConnected(true, nil)
	logger.Info("Connected to the GlobalManager")

	err = l.converse(ctx, conn)
	var se *sessionError
	if !errors.As(err, &se) { // not reached: converse returns sessionErrors
		se = endSession(reasonRead, 0, err)
	}
	if se.closeCode != 0 {
		// Best effort: the GlobalManager's log then says why, and a broken
		// connection has nothing more to lose.
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(se.closeCode, clipCloseText(se.Error())), time.Now().Add(closeWait))
	}
	_ = conn.Close()
	l.metrics.disconnects.WithLabelValues(se.reason).Inc()
	l.setConnected(false, se)
	return se
}

// dial reads the CA and the token afresh, since both rotate, and opens the
// websocket.
func (l *Link) dial(ctx context.Context) (*websocket.Conn, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if l.cfg.CAFile != "" {
		pem, err := os.ReadFile(l.cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the GlobalManager's CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("reading the GlobalManager's CA: no PEM certificate in %s", l.cfg.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	raw, err := os.ReadFile(l.cfg.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("reading the ServiceAccount token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return nil, fmt.Errorf("reading the ServiceAccount token: %s is empty", l.cfg.TokenFile)
	}

	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		TLSClientConfig:  tlsConfig,
		HandshakeTimeout: l.cfg.HandshakeTimeout,
	}
	conn, resp, err := d.DialContext(ctx, l.cfg.URL, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		if resp != nil {
			// The GlobalManager's refusal (401, 403, …) says why in its body.
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
			_ = resp.Body.Close()
			err = fmt.Errorf("connecting to the GlobalManager: %w: HTTP %s: %s", err, resp.Status, strings.TrimSpace(string(body)))
			if after, ok := retryAfter(resp); ok {
				return nil, &busyError{after: after, err: err}
			}
			return nil, err
		}
		return nil, fmt.Errorf("connecting to the GlobalManager: %w", err)
	}
	return conn, nil
}

// busyError is the GlobalManager's answer that it is busy (503) and when to
// come back (Retry-After).
type busyError struct {
	after time.Duration
	err   error
}

func (e *busyError) Error() string { return e.err.Error() }
func (e *busyError) Unwrap() error { return e.err }

// retryAfter reads the Retry-After, in seconds (the GlobalManager sends no
// dates), of a 503 (busy reviewing tokens) or a 429 (this node connects too
// often).
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs <= 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// ready is a closed channel: a select case on it is always ready.
var ready = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// converse says Hello, then runs a reader, an applier and a writer (every
// write goes through the writer) until one fails or ctx is done. The reader
// waits only for the applier, and the applier only for the store: neither
// ever waits for the writer, so this end keeps reading whatever the
// GlobalManager's reader does, and the two ends cannot both wait for the
// other to read.
func (l *Link) converse(ctx context.Context, conn *websocket.Conn) error {
	conn.SetReadLimit(edgeproto.MaxObjectFrameBytes)
	hello, err := l.hello()
	if err != nil {
		return endSession(reasonHello, websocket.CloseInternalServerErr, err)
	}
	// All of the Hello goes before anything else: the GlobalManager takes
	// nothing but its parts until the last.
	for i, frame := range hello {
		t := edgeproto.TypeHello
		if i > 0 {
			t = edgeproto.TypeInventory
		}
		if err := l.writeFrame(conn, t, frame); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).V(2).Info("Said hello", "frames", len(hello))

	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	msgs := make(chan edgeproto.Message, applyQueue)
	acks := newAckQueue()
	var wg sync.WaitGroup
	wg.Go(func() { cancel(l.read(sctx, conn, msgs)) })
	wg.Go(func() { cancel(l.applyAll(sctx, msgs, acks)) })
	wg.Go(func() { cancel(l.write(sctx, conn, acks)) })
	<-sctx.Done()
	err = context.Cause(sctx)
	if ctx.Err() != nil {
		err = endSession(reasonShutdown, websocket.CloseGoingAway, errors.New("the LocalController is shutting down"))
	}
	// Closing unblocks the reader; the close frame goes first.
	var se *sessionError
	if errors.As(err, &se) && se.closeCode != 0 {
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(se.closeCode, clipCloseText(se.Error())), time.Now().Add(closeWait))
		se.closeCode = 0
	}
	_ = conn.Close()
	wg.Wait()
	return err
}

// hello encodes the Hello, in as many frames as it takes: the node, the
// store's identity and key (the report IDs are its), the last ID it gave,
// and every object the store holds.
func (l *Link) hello() ([][]byte, error) {
	// Read before any report is sent on the connection: every report sent
	// after is one held now or taken after, so the k-th has an ID of at
	// most lastID+k, as the GlobalManager checks.
	lastID, err := l.st.LastReportID()
	if err != nil {
		return nil, err
	}
	inv, err := l.st.Inventory()
	if err != nil {
		return nil, err
	}
	l.helloLastID = lastID
	h := &edgeproto.Hello{Node: l.cfg.Node, Store: l.st.Identity(), StoreKey: l.st.Key(), LastReportID: lastID,
		Inventory: make([]edgeproto.ObjectVersion, 0, len(inv))}
	for _, v := range inv {
		h.Inventory = append(h.Inventory, edgeproto.ObjectVersion{
			ObjectRef:       edgeproto.ObjectRef{Kind: v.Key.Kind, Namespace: v.Key.Namespace, Name: v.Key.Name},
			ResourceVersion: v.ResourceVersion,
			Digest:          v.Digest,
			Workers:         edgeproto.WorkersDigest(v.Workers),
		})
	}
	return edgeproto.EncodeHello(h)
}

// read hands the GlobalManager's messages to the applier, in order, so that
// the versions of one object are stored in the order they were sent.
func (l *Link) read(ctx context.Context, conn *websocket.Conn, msgs chan<- edgeproto.Message) error {
	// readSince is when the read under way began, in UnixNano on the
	// link's clock; 0 while the reader hands a message on.
	var readSince atomic.Int64
	defer l.watchReads(conn, &readSince)()
	for {
		readSince.Store(l.cfg.Clock.Now().UnixNano())
		_, frame, err := conn.ReadMessage()
		readSince.Store(0)
		if err != nil {
			return l.readError(err)
		}
		l.heard()
		msg, err := edgeproto.Decode(frame)
		if err != nil {
			return endSession(reasonBadFrame, closeCodeFor(err), fmt.Errorf("bad frame from the GlobalManager: %w", err))
		}
		switch msg.(type) {
		case *edgeproto.Upsert, *edgeproto.Delete, *edgeproto.Synced, *edgeproto.ReportAck:
		case *edgeproto.Heartbeat:
			continue // its arrival has already restarted the read timeout
		default:
			return endSession(reasonUnexpected, websocket.CloseProtocolError,
				fmt.Errorf("the GlobalManager sent a %s message, which only a LocalController sends", msg.Type()))
		}
		select {
		case msgs <- msg:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// watchReads ends conn's reads once a read has waited ReadTimeout on the
// link's clock since *readSince (0: no read under way): a timer of the
// clock rather than a socket deadline, so that tests step it. It returns a
// func that stops the watch and waits for it.
func (l *Link) watchReads(conn *websocket.Conn, readSince *atomic.Int64) (stop func()) {
	t := l.cfg.Clock.NewTimer(l.cfg.ReadTimeout)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C():
			}
			since := readSince.Load()
			if since == 0 {
				t.Reset(l.cfg.ReadTimeout)
				continue
			}
			if idle := l.cfg.Clock.Since(time.Unix(0, since)); idle < l.cfg.ReadTimeout {
				t.Reset(l.cfg.ReadTimeout - idle)
				continue
			}
			// A deadline already passed fails the read under way, and any
			// after it, with a timeout (readError). Socket deadlines are on
			// the wall clock.
			_ = conn.SetReadDeadline(time.Now())
			return
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

func (l *Link) readError(err error) error {
	var closeErr *websocket.CloseError
	var netErr net.Error
	switch {
	case errors.As(err, &closeErr):
		return endSession(reasonPeerClosed, 0, fmt.Errorf("the GlobalManager closed the connection: %w", err))
	case errors.As(err, &netErr) && netErr.Timeout():
		return endSession(reasonTimeout, websocket.CloseGoingAway,
			fmt.Errorf("nothing heard from the GlobalManager for %s", l.cfg.ReadTimeout))
	case errors.Is(err, websocket.ErrReadLimit):
		// gorilla has already sent the close frame.
		return endSession(reasonBadFrame, 0, fmt.Errorf("bad frame from the GlobalManager: over %d bytes: %w", edgeproto.MaxObjectFrameBytes, err))
	}
	return endSession(reasonRead, 0, fmt.Errorf("reading from the GlobalManager: %w", err))
}

// closeCodeFor is the close code that tells the GlobalManager what was wrong
// with its frame.
func closeCodeFor(decodeErr error) int {
	switch {
	case errors.Is(decodeErr, edgeproto.ErrTooLarge):
		return websocket.CloseMessageTooBig
	case errors.Is(decodeErr, edgeproto.ErrMalformed):
		return websocket.CloseInvalidFramePayloadData
	}
	return websocket.CloseProtocolError // unknown version or type
}

// applyAll applies the GlobalManager's messages in order. It persists a run
// of Upserts and Deletes that have come in together in one store transaction
// (one fsync, not one each), and queues their acknowledgements once it is
// committed: what the GlobalManager counts as delivered must survive a
// LocalController restart.
func (l *Link) applyAll(ctx context.Context, msgs <-chan edgeproto.Message, acks *ackQueue) error {
	var (
		batch []edgeproto.Message
		size  int
	)
	take := func(m edgeproto.Message) {
		batch = append(batch, m)
		if u, ok := m.(*edgeproto.Upsert); ok {
			size += len(u.Object)
		}
	}
	for {
		batch, size = batch[:0], 0
		select {
		case m := <-msgs:
			take(m)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	more:
		for len(batch) < maxApplyBatch && size < maxApplyBytes {
			select {
			case m := <-msgs:
				take(m)
			default:
				break more
			}
		}
		if err := l.apply(ctx, batch, acks); err != nil {
			return err
		}
		clear(batch)
	}
}

// apply acts on messages from the GlobalManager, in order.
func (l *Link) apply(ctx context.Context, msgs []edgeproto.Message, acks *ackQueue) error {
	logger := klog.FromContext(ctx)
	var (
		changes  []store.ObjectChange
		versions []edgeproto.ObjectVersion
		upserts  int
	)
	// persist commits the run of Upserts and Deletes so far.
	persist := func() error {
		if len(changes) == 0 {
			return nil
		}
		if err := l.st.ApplyObjects(changes); err != nil {
			return endSession(reasonStore, websocket.CloseInternalServerErr, err)
		}
		l.metrics.objectsApplied.WithLabelValues(opUpsert).Add(float64(upserts))
		l.metrics.objectsApplied.WithLabelValues(opDelete).Add(float64(len(changes) - upserts))
		if logger.V(4).Enabled() {
			for i, v := range versions {
				logger.V(4).Info("Stored object", "object", v.String(), "deleted", changes[i].Delete)
			}
		}
		acks.add(versions...)
		changes, versions, upserts = changes[:0], nil, 0
		return nil
	}
	for _, msg := range msgs {
		switch m := msg.(type) {
		case *edgeproto.Upsert:
			changes = append(changes, store.ObjectChange{Key: storeKey(m.ObjectRef), ResourceVersion: m.ResourceVersion, Digest: m.Digest,
				Workers: m.WorkerPods, Data: m.Object})
			versions = append(versions, m.ObjectVersion)
			upserts++
			continue
		case *edgeproto.Delete:
			changes = append(changes, store.ObjectChange{Key: storeKey(m.ObjectRef), Delete: true})
			versions = append(versions, m.ObjectVersion)
			continue
		}
		// Whatever else comes applies after the objects before it.
		if err := persist(); err != nil {
			return err
		}
		switch m := msg.(type) {
		case *edgeproto.Synced:
			l.setSynced()
			logger.Info("Store in sync with the GlobalManager")
		case *edgeproto.ReportAck:
			if err := l.st.AckReports(m.IDs...); err != nil {
				return endSession(reasonStore, websocket.CloseInternalServerErr, err)
			}
			l.metrics.reportsAcked.Add(float64(len(m.IDs)))
			l.metrics.reportsRefused.Add(float64(len(m.Refused)))
			for _, r := range m.Refused {
				// logr has no warning level; V(0) is never filtered out. The
				// report is gone for good, so it must be visible.
				logger.Info("Warning: the GlobalManager refused a worker report; removed from the outbox", "id", r.ID, "reason", r.Reason)
			}
			logger.V(4).Info("Reports acknowledged", "ids", m.IDs)
		}
	}
	return persist()
}

func storeKey(r edgeproto.ObjectRef) store.Key {
	return store.Key{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

// ackQueue holds the versions persisted and not yet acknowledged. The
// applier adds to it without ever waiting for the writer; what it holds is
// bounded by what the GlobalManager sends unacknowledged (its window).
type ackQueue struct {
	mu       sync.Mutex
	versions []edgeproto.ObjectVersion
	ready    chan struct{} // holds a token while versions is not empty
}

func newAckQueue() *ackQueue {
	return &ackQueue{ready: make(chan struct{}, 1)}
}

func (q *ackQueue) add(vs ...edgeproto.ObjectVersion) {
	if len(vs) == 0 {
		return
	}
	q.mu.Lock()
	q.versions = append(q.versions, vs...)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default: // the writer is already told
	}
}

// take returns what is queued, in the order it was persisted, and empties
// the queue.
func (q *ackQueue) take() []edgeproto.ObjectVersion {
	q.mu.Lock()
	defer q.mu.Unlock()
	vs := q.versions
	q.versions = nil
	return vs
}

// write is the session's only writer: acknowledgements, heartbeats and the
// outbox's reports.
func (l *Link) write(ctx context.Context, conn *websocket.Conn, acks *ackQueue) error {
	heartbeat := l.cfg.Clock.NewTicker(l.cfg.HeartbeatPeriod)
	defer heartbeat.Stop()
	poll := l.cfg.Clock.NewTicker(l.pollPeriod)
	defer poll.Stop()
	// lastSent lives only as long as the session: a new session sends the
	// whole outbox again, since anything still in it was not acknowledged.
	var lastSent uint64
	more := true
	for {
		var next <-chan struct{}
		if more {
			next = ready
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-acks.ready:
			for vs := acks.take(); len(vs) > 0; {
				n := min(len(vs), maxAckBatch)
				if err := l.send(conn, &edgeproto.Ack{Objects: vs[:n]}); err != nil {
					return err
				}
				vs = vs[n:]
			}
		case <-heartbeat.C():
			if err := l.send(conn, &edgeproto.Heartbeat{Time: l.cfg.Clock.Now(), Outbox: l.outboxFill()}); err != nil {
				return err
			}
		case <-l.wake:
			more = true
		case <-poll.C():
			more = true
		case <-next:
			// One batch at a time, so that acknowledgements and heartbeats
			// go out between the batches of a long outbox.
			var err error
			if more, err = l.sendReports(ctx, conn, &lastSent); err != nil {
				return err
			}
		}
	}
}

// sendReports sends the next batch of reports after *lastSent, in ID order,
// and says whether there may be more.
func (l *Link) sendReports(ctx context.Context, conn *websocket.Conn, lastSent *uint64) (bool, error) {
	reports, err := l.st.PendingReports(*lastSent, l.cfg.ReportBatch)
	if err != nil {
		return false, endSession(reasonStore, websocket.CloseInternalServerErr, err)
	}
	for _, r := range reports {
		frame, err := reportFrame(r)
		if err != nil {
			// It could never be sent; left in place it would hold up every
			// report after it, forever.
			klog.FromContext(ctx).Error(err, "Dropping a corrupt report from the outbox", "id", r.ID)
			if err := l.st.AckReports(r.ID); err != nil {
				return false, endSession(reasonStore, websocket.CloseInternalServerErr, err)
			}
			l.metrics.reportsDropped.Inc()
			*lastSent = r.ID
			if r.ID > l.helloLastID {
				// The GlobalManager takes the k-th report of a connection
				// only with an ID of at most the Hello's last ID plus k: a
				// report taken after the Hello and never sent would have it
				// refuse the ones after it. A new connection states the IDs
				// afresh.
				return false, endSession(reasonEncode, websocket.CloseTryAgainLater,
					fmt.Errorf("report %d, taken after the hello, dropped from the outbox; connecting again", r.ID))
			}
			continue
		}
		if err := l.writeFrame(conn, edgeproto.TypeReport, frame); err != nil {
			return false, err
		}
		*lastSent = r.ID
		l.metrics.reportsSent.Inc()
	}
	return len(reports) == l.cfg.ReportBatch, nil
}

// reportFrame turns a stored report (an edgeproto.OutboxRecord) into the
// frame of that report with its outbox ID.
func reportFrame(r store.Report) ([]byte, error) {
	rep, err := edgeproto.ReportFromOutbox(r.ID, r.Data)
	if err != nil {
		return nil, err
	}
	frame, err := edgeproto.Encode(rep)
	if err != nil {
		return nil, fmt.Errorf("encoding stored report %d: %w", r.ID, err)
	}
	return frame, nil
}

func (l *Link) send(conn *websocket.Conn, msg edgeproto.Message) error {
	frame, err := edgeproto.Encode(msg)
	if err != nil { // a bug of this end: the GlobalManager is not to blame
		return endSession(reasonEncode, websocket.CloseInternalServerErr, err)
	}
	return l.writeFrame(conn, msg.Type(), frame)
}

// writeFrame writes one frame. The write deadline is ReadTimeout, the time
// the GlobalManager waits for a frame, on the wall clock: it bounds a write
// the kernel holds, which no other clock could release.
func (l *Link) writeFrame(conn *websocket.Conn, t edgeproto.Type, frame []byte) error {
	if err := conn.SetWriteDeadline(time.Now().Add(l.cfg.ReadTimeout)); err != nil {
		return endSession(reasonWrite, 0, err)
	}
	if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		return endSession(reasonWrite, 0, fmt.Errorf("writing %s to the GlobalManager: %w", t, err))
	}
	return nil
}

// clipCloseText shortens s to what a close frame holds, at a rune boundary.
func clipCloseText(s string) string { return edgeproto.Clip(s, maxCloseText, "") }

// outboxFill is what the outbox holds and its bounds, for the GlobalManager
// to show on the node's Lease.
func (l *Link) outboxFill() *edgeproto.OutboxFill {
	reports, bytes, err := l.st.OutboxLen()
	if err != nil {
		return nil
	}
	maxReports, maxBytes := l.st.OutboxBounds()
	return &edgeproto.OutboxFill{Reports: reports, Bytes: bytes, MaxReports: maxReports, MaxBytes: maxBytes}
}
