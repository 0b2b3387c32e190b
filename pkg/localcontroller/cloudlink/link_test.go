package cloudlink

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/internal/testwait"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

func TestLinkHelloStatesNodeStoreAndInventory(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	model, job := version("Model", "m", "7"), version("FederatedLearningJob", "fl", "42")
	for _, v := range []edgeproto.ObjectVersion{model, job} {
		if err := l.st.PutObject(storeKey(v.ObjectRef), v.ResourceVersion, nil, object(v)); err != nil {
			t.Fatal(err)
		}
	}
	start(t, l)

	c := gm.accept(t)
	hello := recvAs[*edgeproto.Hello](t, c)
	want := &edgeproto.Hello{Node: "edge-1", Store: l.st.Identity(), StoreKey: l.st.Key(), Inventory: []edgeproto.ObjectVersion{job, model}} // in key order
	if diff := cmp.Diff(want, hello); diff != "" {
		t.Errorf("Hello (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"token-1"}, gm.seenTokens()); diff != "" {
		t.Errorf("bearer tokens (-want,+got):\n%s", diff)
	}
	testwait.Eventually(t, testWait, "Status().Connected", func(context.Context) (bool, error) { return l.Status().Connected, nil })
	if got := testutil.ToFloat64(l.metrics.connected); got != 1 {
		t.Errorf("connected = %v, want 1", got)
	}
}

func TestLinkPersistsObjectsBeforeAcknowledgingThem(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	start(t, l)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)

	// holds checks, when the GM gets the Ack of v, that the store already has
	// exactly v.
	holds := func(v edgeproto.ObjectVersion) {
		t.Helper()
		o, found, err := l.st.GetObject(storeKey(v.ObjectRef))
		if err != nil || !found {
			t.Fatalf("acknowledged %s, but the store has none (err %v)", v, err)
		}
		if o.ResourceVersion != v.ResourceVersion || !bytes.Equal(o.Data, object(v)) {
			t.Errorf("acknowledged %s, but the store has %s: %s", v, o.ResourceVersion, o.Data)
		}
	}
	job1, model := version("FederatedLearningJob", "fl", "1"), version("Model", "m", "5")
	c.send(t, &edgeproto.Upsert{ObjectVersion: job1, Object: object(job1)},
		&edgeproto.Upsert{ObjectVersion: model, Object: object(model)}, &edgeproto.Synced{})
	c.recvAcks(t, holds, job1, model)
	testwait.Eventually(t, testWait, "Status().Synced", func(context.Context) (bool, error) { return l.Status().Synced, nil })

	// Versions of one object are applied in the order they were sent.
	job2, job3 := version("FederatedLearningJob", "fl", "2"), version("FederatedLearningJob", "fl", "3")
	c.send(t, &edgeproto.Upsert{ObjectVersion: job2, Object: object(job2)}, &edgeproto.Upsert{ObjectVersion: job3, Object: object(job3)})
	c.recvAcks(t, nil, job2, job3)
	holds(job3)

	if got := testutil.ToFloat64(l.metrics.objectsApplied.WithLabelValues(opUpsert)); got != 4 {
		t.Errorf("objects_applied_total{op=upsert} = %v, want 4", got)
	}
	if got := testutil.ToFloat64(l.metrics.syncs); got != 1 {
		t.Errorf("syncs_total = %v, want 1", got)
	}
}

func TestLinkDeletesWhatTheGlobalManagerDeletes(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	stale, kept := version("FederatedLearningJob", "gone", "4"), version("Model", "m", "5")
	for _, v := range []edgeproto.ObjectVersion{stale, kept} {
		if err := l.st.PutObject(storeKey(v.ObjectRef), v.ResourceVersion, nil, object(v)); err != nil {
			t.Fatal(err)
		}
	}
	start(t, l)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)

	// The difference from the inventory, deletions included.
	c.send(t, &edgeproto.Delete{ObjectVersion: stale}, &edgeproto.Synced{})
	c.recvAcks(t, func(v edgeproto.ObjectVersion) {
		if _, found, err := l.st.GetObject(storeKey(v.ObjectRef)); err != nil || found {
			t.Errorf("acknowledged the Delete of %s, but the store still has it (err %v)", v, err)
		}
	}, stale)
	inv, err := l.st.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if len(inv) != 1 || inv[0].Key != storeKey(kept.ObjectRef) {
		t.Errorf("inventory after the Delete = %+v, want only %s", inv, kept)
	}
	if got := testutil.ToFloat64(l.metrics.objectsApplied.WithLabelValues(opDelete)); got != 1 {
		t.Errorf("objects_applied_total{op=delete} = %v, want 1", got)
	}
}

func TestLinkSendsReportsInOrderAndForgetsAcknowledgedOnes(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, func(c *Config) { c.ReportBatch = 2 }) // the outbox takes two batches
	start(t, l)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)

	var want []edgeproto.Report
	for i := range 3 {
		stored, r := workerReport(t, "fl-trainworker-0", i)
		id, err := l.Outbox().AppendReport(stored)
		if err != nil {
			t.Fatal(err)
		}
		r.ID = id
		want = append(want, r)
	}
	for _, w := range want {
		got := recvAs[*edgeproto.Report](t, c)
		if diff := cmp.Diff(&w, got); diff != "" {
			t.Errorf("report (-want,+got):\n%s", diff)
		}
	}

	c.send(t, &edgeproto.ReportAck{IDs: []uint64{1, 2}, Refused: []edgeproto.RefusedReport{{ID: 2, Reason: "ownerKind is wrong"}}})
	// The counters move after the store: once they have, so has the outbox.
	testwait.Eventually(t, testWait, "the acknowledgement is counted", func(context.Context) (bool, error) { return testutil.ToFloat64(l.metrics.reportsAcked) == 2, nil })
	left, err := l.st.PendingReports(0, 0)
	if err != nil || len(left) != 1 || left[0].ID != 3 {
		t.Errorf("outbox = %+v (err %v), want report 3", left, err)
	}
	for name, tc := range map[string]struct {
		got  float64
		want float64
	}{
		"reports_sent_total":    {testutil.ToFloat64(l.metrics.reportsSent), 3},
		"reports_acked_total":   {testutil.ToFloat64(l.metrics.reportsAcked), 2},
		"reports_refused_total": {testutil.ToFloat64(l.metrics.reportsRefused), 1},
		"outbox_reports":        {testutil.ToFloat64(l.metrics.outboxReports), 1},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", name, tc.got, tc.want)
		}
	}
}

func TestLinkReconnectsAndResendsUnacknowledgedReports(t *testing.T) {
	gm := newFakeGM(t)
	const backoffMin = 200 * time.Millisecond
	l := newTestLink(t, gm, func(c *Config) { c.BackoffMin, c.BackoffMax = backoffMin, time.Second })
	// Two reports from before a restart, one while connected.
	for i := range 2 {
		stored, _ := workerReport(t, "w", i)
		if _, err := l.st.AppendReport(stored); err != nil {
			t.Fatal(err)
		}
	}
	start(t, l)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)
	stored, _ := workerReport(t, "w", 2)
	if _, err := l.Outbox().AppendReport(stored); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2, 3} {
		if got := recvAs[*edgeproto.Report](t, c); got.ID != id {
			t.Fatalf("report ID %d, want %d", got.ID, id)
		}
	}
	c.send(t, &edgeproto.ReportAck{IDs: []uint64{1}})
	testwait.Eventually(t, testWait, "report 1 leaves the outbox", func(context.Context) (bool, error) {
		n, _, _ := l.st.OutboxLen()
		return n == 2, nil
	})

	// Cut the connection: reports 2 and 3 were sent but never acknowledged.
	_ = c.c.Close()
	cut := time.Now()
	c = gm.accept(t)
	if waited := time.Since(cut); waited < backoffMin/2 {
		t.Errorf("reconnected after %s, want a backoff of at least %s", waited, backoffMin/2)
	}
	recvAs[*edgeproto.Hello](t, c)
	for _, id := range []uint64{2, 3} {
		if got := recvAs[*edgeproto.Report](t, c); got.ID != id {
			t.Fatalf("after reconnecting: report ID %d, want %d", got.ID, id)
		}
	}
	c.send(t, &edgeproto.ReportAck{IDs: []uint64{2, 3}})
	testwait.Eventually(t, testWait, "the outbox empties", func(context.Context) (bool, error) {
		n, _, _ := l.st.OutboxLen()
		return n == 0, nil
	})
	if got := testutil.ToFloat64(l.metrics.connects); got != 2 {
		t.Errorf("connects_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(l.metrics.disconnects.WithLabelValues(reasonRead)) +
		testutil.ToFloat64(l.metrics.disconnects.WithLabelValues(reasonPeerClosed)); got != 1 {
		t.Errorf("disconnects_total{reason=read_error|peer_closed} = %v, want 1", got)
	}
}

func TestLinkSendsANewReportWithoutWaitingForThePoll(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	l.pollPeriod = time.Hour
	// In the outbox before the session: sent by the session's first batch.
	stored, _ := workerReport(t, "w", 0)
	if _, err := l.st.AppendReport(stored); err != nil {
		t.Fatal(err)
	}
	start(t, l)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)
	if got := recvAs[*edgeproto.Report](t, c); got.ID != 1 {
		t.Fatalf("report ID %d, want 1", got.ID)
	}

	// Appended behind the link's back: nothing wakes it, the poll is an hour.
	stored, _ = workerReport(t, "w", 1)
	if _, err := l.st.AppendReport(stored); err != nil {
		t.Fatal(err)
	}
	_ = c.c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		_, frame, err := c.c.ReadMessage()
		if err != nil {
			break // the deadline: nothing but heartbeats came
		}
		if m, _ := edgeproto.Decode(frame); m != nil && m.Type() == edgeproto.TypeReport {
			t.Fatalf("report sent without a wake-up: %s", frame)
		}
	}
	// gorilla's connection is unusable after a read timeout; reconnect.
	_ = c.c.Close()
	c = gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)
	for _, id := range []uint64{1, 2} {
		if got := recvAs[*edgeproto.Report](t, c); got.ID != id {
			t.Fatalf("report ID %d, want %d", got.ID, id)
		}
	}

	// Through Outbox(): it goes up at once.
	stored, _ = workerReport(t, "w", 2)
	if _, err := l.Outbox().AppendReport(stored); err != nil {
		t.Fatal(err)
	}
	if got := recvAs[*edgeproto.Report](t, c); got.ID != 3 {
		t.Fatalf("report ID %d, want 3", got.ID)
	}
}

func TestLinkRefusesAServerSignedByAnotherCA(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	writeCert(t, l.cfg.CAFile+".other", otherCA(t))
	l.cfg.CAFile += ".other"
	start(t, l)

	testwait.Eventually(t, testWait, "three failed attempts", func(context.Context) (bool, error) { return testutil.ToFloat64(l.metrics.connectErrors) >= 3, nil })
	if st := l.Status(); st.Connected || !strings.Contains(st.LastError, "certificate") {
		t.Errorf("Status() = %+v, want disconnected for a certificate error", st)
	}
	if tokens := gm.seenTokens(); len(tokens) != 0 {
		t.Errorf("the token went to a server the CA does not vouch for: %d requests", len(tokens))
	}
	select {
	case <-gm.conns:
		t.Fatal("the link connected to a server the CA does not vouch for")
	default:
	}

	// A rotated CA file is read on the next attempt.
	writeCert(t, l.cfg.CAFile, gm.srv.Certificate().Raw)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)
}

func TestLinkReadsTheTokenAgainOnEveryConnection(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	writeFile(t, l.cfg.TokenFile, "expired")
	start(t, l)

	testwait.Eventually(t, testWait, "refused attempts", func(context.Context) (bool, error) { return testutil.ToFloat64(l.metrics.connectErrors) >= 2, nil })
	if st := l.Status(); st.Connected || !strings.Contains(st.LastError, "401") {
		t.Errorf("Status() = %+v, want disconnected by a 401", st)
	}
	writeFile(t, l.cfg.TokenFile, "token-1\n")
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)

	// The kubelet rotates the projected token; the next connection uses it.
	gm.allow("token-2")
	writeFile(t, l.cfg.TokenFile, "token-2")
	_ = c.c.Close()
	c = gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)

	tokens := gm.seenTokens()
	if got := tokens[len(tokens)-2:]; !cmp.Equal(got, []string{"token-1", "token-2"}) {
		t.Errorf("last tokens = %q, want token-1 then token-2", got)
	}
	for _, tok := range tokens[:len(tokens)-2] {
		if tok != "expired" {
			t.Errorf("tokens before the first connection = %q, want only the expired one", tokens)
			break
		}
	}
}

func TestLinkClosesTheConnectionOnABadFrame(t *testing.T) {
	cases := map[string]struct {
		frame      []byte
		wantCode   int
		wantReason string
		// cutOff: the link refuses the frame from its header and closes
		// while the fake GM still writes it, so the GM's write may fail and
		// the TCP reset may beat the close frame.
		cutOff bool
	}{
		"not JSON": {
			frame: []byte("hello?"), wantCode: websocket.CloseInvalidFramePayloadData, wantReason: reasonBadFrame,
		},
		"another protocol version": {
			frame: []byte(`{"v":2,"type":"synced","payload":{}}`), wantCode: websocket.CloseProtocolError, wantReason: reasonBadFrame,
		},
		"an unknown type": {
			frame: []byte(`{"v":1,"type":"bogus","payload":{}}`), wantCode: websocket.CloseProtocolError, wantReason: reasonBadFrame,
		},
		"an upsert without its object": {
			frame:    []byte(`{"v":1,"type":"upsert","payload":{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"1"}}`),
			wantCode: websocket.CloseInvalidFramePayloadData, wantReason: reasonBadFrame,
		},
		"a message only a LocalController sends": {
			frame:    []byte(`{"v":1,"type":"ack","payload":{"objects":[{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"1"}]}}`),
			wantCode: websocket.CloseProtocolError, wantReason: reasonUnexpected,
		},
		"a heartbeat over MaxFrameBytes": {
			frame:    []byte(`{"v":1,"type":"heartbeat","payload":{"time":"2026-11-23T00:00:00Z","pad":"` + strings.Repeat("x", edgeproto.MaxFrameBytes) + `"}}`),
			wantCode: websocket.CloseMessageTooBig, wantReason: reasonBadFrame,
		},
		"a frame over MaxObjectFrameBytes": {
			frame: bytes.Repeat([]byte(" "), edgeproto.MaxObjectFrameBytes+1), wantCode: websocket.CloseMessageTooBig, wantReason: reasonBadFrame,
			cutOff: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gm := newFakeGM(t)
			l := newTestLink(t, gm, nil)
			start(t, l)
			c := gm.accept(t)
			recvAs[*edgeproto.Hello](t, c)

			if tc.cutOff {
				_ = c.c.SetWriteDeadline(time.Now().Add(testWait))
				_ = c.c.WriteMessage(websocket.TextMessage, tc.frame)
			} else {
				c.sendRaw(t, tc.frame)
			}
			ce, _ := c.closeReason(t)
			if (ce == nil && !tc.cutOff) || (ce != nil && ce.Code != tc.wantCode) {
				t.Errorf("close = %v, want code %d", ce, tc.wantCode)
			}
			// The link carries on: it reconnects and says Hello again.
			c = gm.accept(t)
			recvAs[*edgeproto.Hello](t, c)
			if got := testutil.ToFloat64(l.metrics.disconnects.WithLabelValues(tc.wantReason)); got != 1 {
				t.Errorf("disconnects_total{reason=%s} = %v, want 1", tc.wantReason, got)
			}
		})
	}
}

func TestLinkDropsCorruptStoredReports(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	good1, _ := workerReport(t, "w", 1)
	good2, _ := workerReport(t, "w", 2)
	noWorker, err := json.Marshal(edgeproto.Report{Body: json.RawMessage(`{}`), ReceivedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{[]byte("not JSON"), good1, noWorker, good2} {
		if _, err := l.st.AppendReport(data); err != nil {
			t.Fatal(err)
		}
	}
	start(t, l)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)
	for _, id := range []uint64{2, 4} {
		if got := recvAs[*edgeproto.Report](t, c); got.ID != id {
			t.Fatalf("report ID %d, want %d", got.ID, id)
		}
	}
	c.send(t, &edgeproto.ReportAck{IDs: []uint64{2, 4}})
	testwait.Eventually(t, testWait, "the outbox empties", func(context.Context) (bool, error) {
		n, _, _ := l.st.OutboxLen()
		return n == 0, nil
	})
	if got := testutil.ToFloat64(l.metrics.reportsDropped); got != 2 {
		t.Errorf("reports_dropped_total = %v, want 2", got)
	}
}

// The link sends a heartbeat each HeartbeatPeriod and drops a connection on
// which nothing came for ReadTimeout; heartbeats from the GM keep one up past
// it. Time is a fake clock the test steps once the link has done what the
// last step called for.
func TestLinkDropsASilentConnectionAndSendsHeartbeats(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	gm := newFakeGM(t)
	l := newTestLink(t, gm, func(c *Config) {
		c.HeartbeatPeriod, c.ReadTimeout, c.Clock = time.Second, 10*time.Second, clk
	})
	start(t, l)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)
	testwait.Eventually(t, testWait, "the session's heartbeat and poll tickers and its read timeout", func(context.Context) (bool, error) {
		return clk.Waiters() == 3, nil
	})

	// The fake GM says nothing at all: a heartbeat each period until
	// ReadTimeout, then the close.
	periods := int(l.cfg.ReadTimeout / l.cfg.HeartbeatPeriod)
	for i := 1; i < periods; i++ {
		clk.Step(l.cfg.HeartbeatPeriod)
		if got := c.recvFrame(t); got.Type() != edgeproto.TypeHeartbeat {
			t.Fatalf("%s after %d heartbeat periods of silence, want a heartbeat", got.Type(), i)
		}
	}
	clk.Step(l.cfg.HeartbeatPeriod)
	ce, _ := c.closeReason(t)
	if ce == nil || ce.Code != websocket.CloseGoingAway {
		t.Errorf("close = %v, want code %d", ce, websocket.CloseGoingAway)
	}
	// Past the backoff, the link connects again. (The fake clock's tickers
	// outlive their Stop, so the steps go on until it has, rather than once
	// a count of timers says it waits.)
	testwait.Eventually(t, testWait, "the link connects again", func(context.Context) (bool, error) {
		if testutil.ToFloat64(l.metrics.connects) == 2 {
			return true, nil
		}
		clk.Step(l.cfg.BackoffMax)
		return false, nil
	})
	c = gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)
	if got := testutil.ToFloat64(l.metrics.disconnects.WithLabelValues(reasonTimeout)); got != 1 {
		t.Errorf("disconnects_total{reason=timeout} = %v, want 1", got)
	}

	// Heartbeats from the GM keep the link up past the read timeout.
	for range 3 * 5 {
		clk.Step(l.cfg.ReadTimeout / 5)
		c.send(t, &edgeproto.Heartbeat{Time: clk.Now()})
		testwait.Eventually(t, testWait, "the link hears the GM's heartbeat", func(context.Context) (bool, error) {
			return l.Status().LastHeard.Equal(clk.Now()), nil
		})
	}
	if !l.Status().Connected || testutil.ToFloat64(l.metrics.connects) != 2 {
		t.Errorf("the link dropped a connection that heartbeats kept alive: %+v", l.Status())
	}
}

func TestLinkSaysGoodbyeWhenStopped(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)

	cancel()
	ce, _ := c.closeReason(t)
	if ce == nil || ce.Code != websocket.CloseGoingAway {
		t.Errorf("close = %v, want code %d", ce, websocket.CloseGoingAway)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(testWait):
		t.Fatal("Run did not return")
	}
	if st := l.Status(); st.Connected {
		t.Errorf("Status() = %+v after Run returned", st)
	}
}

// A GlobalManager that goes away (it shuts down) ends no run of failures: the
// link tries again within BackoffMin, not after the wait the failures before
// had built up, so that a GlobalManager restarted twice in a row (a rollout,
// a leader handed on) does not wait up to BackoffMax for its nodes.
func TestLinkTriesAgainAtOnceWhenTheGlobalManagerGoesAway(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	gm := newFakeGM(t)
	l := newTestLink(t, gm, func(c *Config) {
		c.BackoffMin, c.BackoffMax, c.Clock = time.Second, 30*time.Second, clk
		c.HeartbeatPeriod, c.ReadTimeout = 10*time.Second, time.Minute
	})
	writeFile(t, l.cfg.TokenFile, "expired")
	start(t, l)
	// Six refusals in a row: the next wait would be 16 s or more.
	for n := 1; n <= 6; n++ {
		testwait.Eventually(t, testWait, "another refused attempt", func(context.Context) (bool, error) {
			return testutil.ToFloat64(l.metrics.connectErrors) >= float64(n), nil
		})
		if n < 6 {
			clk.Step(l.cfg.BackoffMax)
		}
	}
	writeFile(t, l.cfg.TokenFile, "token-1\n")
	clk.Step(l.cfg.BackoffMax)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)

	// The GlobalManager shuts down, as its hub does.
	closing := websocket.FormatCloseMessage(websocket.CloseGoingAway, "the GlobalManager is shutting down")
	if err := c.c.WriteControl(websocket.CloseMessage, closing, time.Now().Add(testWait)); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, testWait, "the link sees the close", func(context.Context) (bool, error) {
		return testutil.ToFloat64(l.metrics.disconnects.WithLabelValues(reasonPeerClosed)) == 1, nil
	})
	// Steps of 100 ms, each once the link had time to act on the last:
	// it dials again within BackoffMin (a step or two lost before it set
	// its timer are allowed for).
	stepped := time.Duration(0)
	for testutil.ToFloat64(l.metrics.connects) < 2 {
		if stepped > 2*l.cfg.BackoffMin {
			t.Fatalf("the link had not tried again %s after the GlobalManager went away; want within BackoffMin (%s)", stepped, l.cfg.BackoffMin)
		}
		clk.Step(100 * time.Millisecond)
		stepped += 100 * time.Millisecond
		time.Sleep(20 * time.Millisecond)
	}
	recvAs[*edgeproto.Hello](t, gm.accept(t))
}
