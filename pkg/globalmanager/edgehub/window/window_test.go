package window

import (
	"cmp"
	"fmt"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
)

const resendAfter = 5 * time.Second

// out is a Sender that records what it sends as "upsert a@1", "delete a@1".
type out struct {
	sent       []string
	unsendable map[string]bool // "a@1" cannot be sent
	betweens   int
}

func (o *out) Upsert(ref edgeproto.ObjectRef, d desired.Object) (bool, error) {
	name := ref.Name + "@" + d.Version.Digest
	if o.unsendable[name] {
		return false, nil
	}
	o.sent = append(o.sent, "upsert "+name)
	return true, nil
}

func (o *out) Delete(ref edgeproto.ObjectRef, v desired.Version) error {
	o.sent = append(o.sent, "delete "+ref.Name+"@"+v.Digest)
	return nil
}

func (o *out) Between() error { o.betweens++; return nil }

// take returns what was sent since it was last called.
func (o *out) take() []string {
	sent := o.sent
	o.sent = nil
	return sent
}

// node is a window under test, the node's set it sends, and the clock.
type node struct {
	*Window
	set     Set
	out     *out
	clock   *testingclock.FakePassiveClock
	resends int
}

func ref(name string) edgeproto.ObjectRef {
	return edgeproto.ObjectRef{Kind: "Model", Namespace: "default", Name: name}
}

func version(digest string) desired.Version {
	return desired.Version{ResourceVersion: "rv-" + digest, Digest: digest}
}

// newNode is a window of size whose LocalController holds held, as
// name → digest.
func newNode(size int, held map[string]string) *node {
	n := &node{set: Set{}, out: &out{unsendable: map[string]bool{}}, clock: testingclock.NewFakePassiveClock(time.Now())}
	var hello []edgeproto.ObjectVersion
	for name, digest := range held {
		v := version(digest)
		hello = append(hello, edgeproto.ObjectVersion{ObjectRef: ref(name), ResourceVersion: v.ResourceVersion, Digest: v.Digest})
	}
	n.Window = New(Config{
		Size: size, ResendAfter: resendAfter, Clock: n.clock, Held: hello, Out: n.out,
		Compare: func(a, b edgeproto.ObjectRef) int { return cmp.Compare(a.Name, b.Name) },
		Desired: func() Set { return n.set },
		Resent:  func() { n.resends++ },
	})
	return n
}

// want sets the node's set, as name → digest.
func (n *node) want(objects map[string]string) {
	clear(n.set)
	for name, digest := range objects {
		n.set[ref(name)] = desired.Object{Version: version(digest)}
	}
}

// ack acknowledges name at digest.
func (n *node) ack(names ...string) {
	var acks []edgeproto.ObjectVersion
	for _, nd := range names {
		var name, digest string
		if _, err := fmt.Sscanf(nd, "%1s@%s", &name, &digest); err != nil {
			panic(err)
		}
		v := version(digest)
		acks = append(acks, edgeproto.ObjectVersion{ObjectRef: ref(name), ResourceVersion: v.ResourceVersion, Digest: v.Digest})
	}
	n.Ack(acks)
}

func TestWindowSendsTheDifferenceInOrderUpsertsBeforeDeletes(t *testing.T) {
	n := newNode(10, map[string]string{"a": "1", "b": "1", "c": "1"})
	n.want(map[string]string{"b": "1", "c": "2", "e": "1", "d": "1"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"upsert c@2", "upsert d@1", "upsert e@1", "delete a@1"}
	if diff := gocmp.Diff(want, n.out.take()); diff != "" {
		t.Errorf("sent (-want,+got):\n%s", diff)
	}
	if n.Inflight() != 4 || n.Queued() != 0 {
		t.Errorf("inflight %d, queued %d; want 4, 0", n.Inflight(), n.Queued())
	}
	if n.out.betweens != 4 {
		t.Errorf("Between ran %d times, want once after each send", n.out.betweens)
	}
}

func TestWindowSendsNoMoreThanItsSizeUnacknowledged(t *testing.T) {
	n := newNode(2, nil)
	n.want(map[string]string{"a": "1", "b": "1", "c": "1", "d": "1", "e": "1"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"upsert a@1", "upsert b@1"}, n.out.take()); diff != "" {
		t.Errorf("sent (-want,+got):\n%s", diff)
	}
	if !n.Full() || n.Queued() != 3 {
		t.Fatalf("full %v, queued %d; want full with 3 queued", n.Full(), n.Queued())
	}
	if err := n.Fill(); err != nil {
		t.Fatal(err)
	}
	if got := n.out.take(); len(got) != 0 {
		t.Errorf("a full window sent %v", got)
	}

	n.ack("a@1")
	if err := n.Fill(); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"upsert c@1"}, n.out.take()); diff != "" {
		t.Errorf("an Ack made room for one; sent (-want,+got):\n%s", diff)
	}
	n.ack("b@1", "c@1")
	if err := n.Fill(); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"upsert d@1", "upsert e@1"}, n.out.take()); diff != "" {
		t.Errorf("sent (-want,+got):\n%s", diff)
	}
	if n.Queued() != 0 || n.Held() != 3 {
		t.Errorf("queued %d, held %d; want 0, 3", n.Queued(), n.Held())
	}
}

func TestWindowAckOfAnotherVersionSettlesNothing(t *testing.T) {
	n := newNode(10, nil)
	n.want(map[string]string{"a": "1"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	// A newer version replaces the one in flight at once: it takes no more
	// room.
	n.want(map[string]string{"a": "2"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"upsert a@1", "upsert a@2"}, n.out.take()); diff != "" {
		t.Errorf("sent (-want,+got):\n%s", diff)
	}
	n.ack("a@1")
	if n.Inflight() != 1 || n.Held() != 0 {
		t.Fatalf("after the Ack of a@1: inflight %d, held %d; want a@2 still in flight", n.Inflight(), n.Held())
	}
	n.ack("a@2")
	if n.Inflight() != 0 || n.Held() != 1 {
		t.Fatalf("after the Ack of a@2: inflight %d, held %d; want a held", n.Inflight(), n.Held())
	}
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if got := n.out.take(); len(got) != 0 {
		t.Errorf("what is held was sent again: %v", got)
	}

	// A Delete settled by its Ack: no longer held.
	n.want(nil)
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	n.ack("a@2")
	if n.Inflight() != 0 || n.Held() != 0 {
		t.Errorf("after the Delete's Ack: inflight %d, held %d; want 0, 0", n.Inflight(), n.Held())
	}
}

func TestWindowQueueIsPlannedAfreshSoTwoEditsGoOutAsOne(t *testing.T) {
	n := newNode(1, nil)
	n.want(map[string]string{"a": "1", "b": "1", "c": "1"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	// b edited twice and c gone while they waited for room.
	n.want(map[string]string{"a": "1", "b": "2"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	n.want(map[string]string{"a": "1", "b": "3"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	n.ack("a@1")
	if err := n.Fill(); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"upsert a@1", "upsert b@3"}, n.out.take()); diff != "" {
		t.Errorf("sent (-want,+got):\n%s", diff)
	}
	if n.Queued() != 0 {
		t.Errorf("queued %d, want 0: c left the set before it was sent", n.Queued())
	}
}

func TestWindowObjectThatCannotBeSentIsNotTriedAgainAtThatVersion(t *testing.T) {
	n := newNode(10, nil)
	n.out.unsendable["a@1"] = true
	n.want(map[string]string{"a": "1", "b": "1"})
	for range 2 {
		if err := n.Sync(nil); err != nil {
			t.Fatal(err)
		}
	}
	if diff := gocmp.Diff([]string{"upsert b@1"}, n.out.take()); diff != "" {
		t.Errorf("sent (-want,+got):\n%s", diff)
	}
	n.want(map[string]string{"a": "2", "b": "1"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"upsert a@2"}, n.out.take()); diff != "" {
		t.Errorf("the next version is tried; sent (-want,+got):\n%s", diff)
	}
}

func TestWindowResendsWhatTheLocalControllerWentPastOrMayHaveLost(t *testing.T) {
	tests := map[string]struct {
		// steps run after a@1 is sent; b@1 is sent by the step "send b".
		steps      []string
		wantResent []string
	}{
		"nothing settled for ResendAfter": {
			steps:      []string{"wait"},
			wantResent: []string{"upsert a@1"},
		},
		"not waited long enough": {
			steps: []string{"wait less"},
		},
		"a later one acknowledged": {
			steps:      []string{"send b", "ack b", "wait"},
			wantResent: []string{"upsert a@1"},
		},
		// Behind a full window on a slow disk: b waits for what was sent
		// before it, and Acks still come.
		"waiting behind earlier ones": {
			steps: []string{"wait half", "send b", "wait half", "ack a", "wait half"},
		},
		"edited while it waited": {
			steps:      []string{"wait", "edit a"},
			wantResent: []string{"upsert a@2"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n := newNode(10, nil)
			n.want(map[string]string{"a": "1"})
			if err := n.Sync(nil); err != nil {
				t.Fatal(err)
			}
			for _, step := range tc.steps {
				switch step {
				case "wait":
					n.clock.SetTime(n.clock.Now().Add(resendAfter))
				case "wait less":
					n.clock.SetTime(n.clock.Now().Add(resendAfter - time.Millisecond))
				case "wait half":
					n.clock.SetTime(n.clock.Now().Add(resendAfter / 2))
				case "send b":
					n.want(map[string]string{"a": "1", "b": "1"})
					if err := n.Sync(nil); err != nil {
						t.Fatal(err)
					}
				case "ack a":
					n.ack("a@1")
				case "ack b":
					n.ack("b@1")
				case "edit a":
					n.set[ref("a")] = desired.Object{Version: version("2")}
				}
			}
			n.out.take()
			if err := n.Resend(); err != nil {
				t.Fatal(err)
			}
			if diff := gocmp.Diff(tc.wantResent, n.out.take()); diff != "" {
				t.Errorf("resent (-want,+got):\n%s", diff)
			}
			wantResends := 0
			if len(tc.wantResent) > 0 && tc.wantResent[0] == "upsert a@1" {
				wantResends = 1
			}
			if n.resends != wantResends {
				t.Errorf("%d resends counted, want %d", n.resends, wantResends)
			}
		})
	}
}

func TestWindowResendsALostDeleteAgain(t *testing.T) {
	n := newNode(10, map[string]string{"a": "1"})
	if err := n.Sync(nil); err != nil {
		t.Fatal(err)
	}
	n.clock.SetTime(n.clock.Now().Add(resendAfter))
	if err := n.Resend(); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"delete a@1", "delete a@1"}, n.out.take()); diff != "" {
		t.Errorf("sent (-want,+got):\n%s", diff)
	}
	if n.resends != 1 {
		t.Errorf("%d resends counted, want 1", n.resends)
	}
}
