package edgehub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nereid-ml/nereid/internal/testwait"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
)

// longName is a name as long as Kubernetes allows (a DNS subdomain, 253).
func longName(prefix string, i int) string {
	s := fmt.Sprintf("%s-%06d-", prefix, i)
	return s + strings.Repeat("x", 253-len(s))
}

// manyDatasets are n Datasets on node, at resourceVersion 1, named by name.
func manyDatasets(n int, node string, name func(int) string) []runtime.Object {
	objs := make([]runtime.Object, n)
	for i := range objs {
		objs[i] = edgehubtest.Dataset(name(i), node)
	}
	return objs
}

func shortName(i int) string { return fmt.Sprintf("d-%06d", i) }

// bulkConfig resends only after the default 5 s, so that a test machine
// busy with other tests does not make a resend of what is merely slow.
func bulkConfig() Config {
	cfg := testConfig
	cfg.ResendAfter = DefaultResendAfter
	return cfg
}

// writer sends, from its own goroutine, Acks of the versions the test hands
// it, up to 256 in one, and the other messages it is handed: a
// LocalController's writer. Like the LocalController's before the hub had a
// window, the test's reader waits once 1024 versions wait for the writer: the
// hub must keep such a peer going, by reading its Acks while it sends,
// however long the difference.
type writer struct {
	acks  chan edgeproto.ObjectVersion
	other chan edgeproto.Message
}

func (c *client) startWriter() writer {
	w := writer{acks: make(chan edgeproto.ObjectVersion, 1024), other: make(chan edgeproto.Message, 16)}
	done := make(chan struct{})
	c.t.Cleanup(func() { close(done) })
	send := func(m edgeproto.Message) bool {
		frame, err := edgeproto.Encode(m)
		if err != nil {
			panic(err) // a bug of the test
		}
		// An error ends the connection; the test sees that on its reads.
		return c.conn.WriteMessage(websocket.TextMessage, frame) == nil
	}
	go func() {
		for {
			var m edgeproto.Message
			select {
			case <-done:
				return
			case m = <-w.other:
			case v := <-w.acks:
				ack := &edgeproto.Ack{Objects: []edgeproto.ObjectVersion{v}}
			batch:
				for len(ack.Objects) < 256 {
					select {
					case v := <-w.acks:
						ack.Objects = append(ack.Objects, v)
					default:
						break batch
					}
				}
				m = ack
			}
			if !send(m) {
				return
			}
		}
	}()
	return w
}

// untilSyncedAcking returns the messages up to Synced, summarized, and has
// w acknowledge every Upsert and Delete as it comes.
func (c *client) untilSyncedAcking(w writer) []string {
	c.t.Helper()
	var got []string
	for {
		m := c.must(10 * time.Second)
		switch m := m.(type) {
		case *edgeproto.Upsert:
			w.acks <- m.ObjectVersion
		case *edgeproto.Delete:
			w.acks <- m.ObjectVersion
		case *edgeproto.Synced:
			return got
		}
		got = append(got, summary(m))
	}
}

// diffSorted is cmp.Diff of two lists as sets, quick when they are equal:
// cmp takes seconds over tens of thousands of entries.
func diffSorted(want, got []string) string {
	want, got = slices.Sorted(slices.Values(want)), slices.Sorted(slices.Values(got))
	if slices.Equal(want, got) {
		return ""
	}
	return cmp.Diff(want, got)
}

func TestHelloOfThirtyThousandLongNamesIsAnsweredWithTheDifference(t *testing.T) {
	// edge-a has 20,000 Datasets. Its LocalController holds 15,000 of them
	// up to date, 2,500 at an older version, lacks 2,500, and holds 12,500
	// that were deleted meanwhile.
	name := func(i int) string { return longName("d", i) }
	f := newFixture(t, bulkConfig(), manyDatasets(20_000, "edge-a", name)...)
	var want []string
	hello := &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID}
	for i := range 20_000 {
		switch {
		case i < 15_000:
			hello.Inventory = append(hello.Inventory, version("Dataset", name(i), "1"))
		case i < 17_500:
			hello.Inventory = append(hello.Inventory, version("Dataset", name(i), "0"))
			want = append(want, "upsert Dataset default/"+name(i)+"@1 (sedna.io/v1alpha1 Dataset)")
		default:
			want = append(want, "upsert Dataset default/"+name(i)+"@1 (sedna.io/v1alpha1 Dataset)")
		}
	}
	for i := range 12_500 {
		hello.Inventory = append(hello.Inventory, version("Dataset", longName("gone", i), "7"))
		want = append(want, "delete Dataset default/"+longName("gone", i)+"@7")
	}
	if len(hello.Inventory) != 30_000 {
		t.Fatalf("the inventory has %d entries, want 30,000", len(hello.Inventory))
	}

	c := f.open("edge-a")
	w := c.startWriter()
	if frames := c.sendHello(hello); frames < 10 {
		t.Fatalf("the hello took %d frames; the test means it to take many", frames)
	}
	if diff := diffSorted(want, c.untilSyncedAcking(w)); diff != "" {
		t.Errorf("answer to the hello (-want,+got):\n%s", diff)
	}
	if got := f.metric("resends_total"); got != 0 {
		t.Errorf("resends_total = %v, want 0", got)
	}
}

func TestBulkSyncOfTwentyThousandObjectsKeepsAcksAndReportsFlowing(t *testing.T) {
	f := newFixture(t, bulkConfig(), append(append(edgeObjects(), workers()...), manyDatasets(20_000, "edge-a", shortName)...)...)
	var want []string
	for _, v := range f.inventory("edge-a") {
		want = append(want, fmt.Sprintf("upsert %s (sedna.io/v1alpha1 %s)", v, v.Kind))
	}
	if len(want) != 20_006 {
		t.Fatalf("the hub wants %d objects on edge-a, want 20,006", len(want))
	}

	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	w := c.startWriter()
	// Reports go up while the difference comes down: their ReportAcks
	// must not wait for the end of it.
	body := `{"name":"w-fl","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
	const reports = 5
	for id := range uint64(reports) {
		w.other <- &edgeproto.Report{ID: id + 1, Worker: "w-fl", Body: []byte(body), ReceivedAt: time.Now()}
	}
	start := time.Now()
	var upserts []string
	acked := 0
	for _, s := range c.untilSyncedAcking(w) {
		if strings.HasPrefix(s, "reportAck ") {
			acked += len(strings.Fields(strings.Trim(strings.TrimPrefix(s, "reportAck "), "[]")))
			continue
		}
		upserts = append(upserts, s)
	}
	t.Logf("20,006 objects synced in %s", time.Since(start))
	if diff := diffSorted(want, upserts); diff != "" {
		t.Errorf("upserts (-want,+got):\n%s", diff)
	}
	if acked != reports {
		t.Errorf("%d reports acknowledged before Synced, want %d", acked, reports)
	}
	if got := f.metric("resends_total"); got != 0 {
		t.Errorf("resends_total = %v, want 0", got)
	}
	testwait.Eventually(t, 5*time.Second, "every object acknowledged", func(context.Context) (bool, error) {
		n := f.hubUnacked("edge-a")
		return n == 0, nil
	})
}

// hubUnacked is how many objects the hub has sent to node and not seen
// acknowledged.
func (f *fixture) hubUnacked(node string) int {
	return f.hub.links.Unacked(node)
}

func TestSendWindowBoundsWhatIsUnacknowledged(t *testing.T) {
	cfg := bulkConfig()
	cfg.SendWindow = 100
	f := newFixture(t, cfg, manyDatasets(250, "edge-a", shortName)...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})

	// received reads what comes until a quiet moment.
	received := func() (got []edgeproto.ObjectVersion, synced bool) {
		t.Helper()
		for {
			m, err := c.recv(500 * time.Millisecond)
			switch {
			case err == errQuiet:
				return got, synced
			case err != nil:
				t.Fatal(err)
			case m.Type() == edgeproto.TypeSynced:
				synced = true
			default:
				got = append(got, m.(*edgeproto.Upsert).ObjectVersion)
			}
		}
	}
	var (
		sent   []int
		synced bool
	)
	first, _ := received()
	sent = append(sent, len(first))
	c.send(&edgeproto.Ack{Objects: first[:40]})
	second, _ := received()
	sent = append(sent, len(second))
	c.send(&edgeproto.Ack{Objects: append(first[40:], second...)})
	third, _ := received()
	sent = append(sent, len(third))
	// Synced goes once the last of the difference is sent, before it is
	// acknowledged.
	c.send(&edgeproto.Ack{Objects: third})
	last, synced := received()
	sent = append(sent, len(last))
	if diff := cmp.Diff([]int{100, 40, 100, 10}, sent); diff != "" {
		t.Errorf("sent between Acks (-want,+got):\n%s", diff)
	}
	if !synced {
		t.Errorf("no Synced after the last of the difference")
	}
}

func TestHelloStreamOutOfOrderClosesTheConnection(t *testing.T) {
	ref := func(name string) edgeproto.ObjectVersion { return version("Model", name, "1") }
	// tooMany are the parts of an inventory one entry over MaxInventory.
	var tooMany []edgeproto.Message
	const part = 10_000
	for i := 0; i <= edgeproto.MaxInventory; i += part {
		var inv []edgeproto.ObjectVersion
		for j := i; j < min(i+part, edgeproto.MaxInventory+1); j++ {
			inv = append(inv, ref(shortName(j)))
		}
		if i == 0 {
			tooMany = append(tooMany, &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: inv, More: true})
		} else {
			tooMany = append(tooMany, &edgeproto.Inventory{Inventory: inv, More: true})
		}
	}
	tooMany[len(tooMany)-1].(*edgeproto.Inventory).More = false

	tests := map[string]struct {
		msgs       []edgeproto.Message
		afterSync  bool // the last message goes after Synced
		wantCode   int
		wantReason string
	}{
		"an inventory before the hello": {msgs: []edgeproto.Message{&edgeproto.Inventory{Inventory: []edgeproto.ObjectVersion{ref("a")}}},
			wantCode: websocket.ClosePolicyViolation, wantReason: "the first message must be hello, not inventory"},
		"a heartbeat while the hello's inventory is due": {
			msgs:     []edgeproto.Message{&edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, More: true}, &edgeproto.Heartbeat{Time: time.Now()}},
			wantCode: websocket.ClosePolicyViolation, wantReason: "heartbeat while the hello's inventory was due"},
		"an inventory after the hello ended": {
			msgs:      []edgeproto.Message{&edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID}, &edgeproto.Inventory{Inventory: []edgeproto.ObjectVersion{ref("a")}}},
			afterSync: true,
			wantCode:  websocket.ClosePolicyViolation, wantReason: "unexpected inventory message from a LocalController: its hello has ended"},
		"a ref in the hello and in an inventory": {
			msgs: []edgeproto.Message{&edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: []edgeproto.ObjectVersion{ref("a")}, More: true},
				&edgeproto.Inventory{Inventory: []edgeproto.ObjectVersion{ref("a")}}},
			wantCode: websocket.CloseInvalidFramePayloadData, wantReason: "Model default/a is listed twice"},
		"an inventory one entry over MaxInventory": {msgs: tooMany,
			wantCode: websocket.CloseMessageTooBig, wantReason: "an inventory of more than 200000 entries"},
	}
	f := newFixture(t, testConfig, edgeObjects()...)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := f.open("edge-a")
			for i, m := range tc.msgs {
				if tc.afterSync && i == len(tc.msgs)-1 {
					c.untilSynced()
				}
				c.send(m)
			}
			ce := c.closed()
			if ce.Code != tc.wantCode || !strings.Contains(ce.Text, tc.wantReason) {
				t.Errorf("closed with %d %q, want %d with %q", ce.Code, ce.Text, tc.wantCode, tc.wantReason)
			}
		})
	}
}
