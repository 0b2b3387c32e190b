package edgeproto

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// longestNamespace and longName make entries as long as Kubernetes allows: a
// namespace is a DNS label (63), a name a DNS subdomain (253).
var longestNamespace = strings.Repeat("n", 63)

func longName(i int) string {
	prefix := fmt.Sprintf("object-%06d-", i)
	return prefix + strings.Repeat("x", 253-len(prefix))
}

// inventory returns n entries; long makes them as long as they can be.
func inventory(n int, long bool) []ObjectVersion {
	inv := make([]ObjectVersion, n)
	for i := range inv {
		if long {
			inv[i] = ObjectVersion{ObjectRef: ObjectRef{"IncrementalLearningJob", longestNamespace, longName(i)}, ResourceVersion: fmt.Sprint(1_000_000 + i)}
		} else {
			inv[i] = ObjectVersion{ObjectRef: ObjectRef{"Dataset", "ns", fmt.Sprint("d-", i)}, ResourceVersion: fmt.Sprint(i + 1)}
		}
	}
	return inv
}

// assemble decodes frames in order and feeds them to a HelloStream, which
// must return the Hello at the last frame and not before.
func assemble(t *testing.T, frames [][]byte) *Hello {
	t.Helper()
	var s HelloStream
	for i, frame := range frames {
		m, err := Decode(frame)
		if err != nil {
			t.Fatalf("Decode(frame %d): %v", i, err)
		}
		h, err := s.Add(m)
		if err != nil {
			t.Fatalf("Add(frame %d): %v", i, err)
		}
		if last := i == len(frames)-1; (h != nil) != last {
			t.Fatalf("Add(frame %d of %d) returned hello %v", i, len(frames), h != nil)
		}
		if i == len(frames)-1 {
			return h
		}
	}
	return nil
}

func TestEncodeHelloSplitsWhatHelloStreamJoins(t *testing.T) {
	cases := map[string]struct {
		inventory  []ObjectVersion
		wantFrames int
	}{
		"an empty store": {wantFrames: 1},
		"ten thousand short entries fit in a frame": {inventory: inventory(10_000, false), wantFrames: 1},
		"a hundred thousand of the longest entries": {inventory: inventory(100_000, true), wantFrames: 39},
		"the most entries a hello may have":         {inventory: inventory(MaxInventory, false), wantFrames: 16},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hello := &Hello{Node: "edge-1", Store: storeID, StoreKey: storeKey, Inventory: tc.inventory}
			frames, err := EncodeHello(hello)
			if err != nil {
				t.Fatalf("EncodeHello: %v", err)
			}
			if len(frames) != tc.wantFrames {
				t.Errorf("%d frames, want %d", len(frames), tc.wantFrames)
			}
			for i, frame := range frames {
				// Every frame but the last is as full as a frame can be:
				// less than one more entry (and its comma) short of the limit.
				if len(frame) > MaxFrameBytes || (i < len(frames)-1 && len(frame) < MaxFrameBytes-500) {
					t.Errorf("frame %d of %d is %d bytes", i, len(frames), len(frame))
				}
			}
			got := assemble(t, frames)
			// cmp.Diff takes seconds over 100,000 entries; it only says what differs.
			if want := (&Hello{Node: "edge-1", Store: storeID, StoreKey: storeKey, Inventory: tc.inventory}); !reflect.DeepEqual(want, got) {
				diff := cmp.Diff(want, got)
				t.Errorf("the hello put together (-want,+got):\n%s", diff)
			}
			if hello.More || len(hello.Inventory) != len(tc.inventory) {
				t.Errorf("EncodeHello changed its argument")
			}
		})
	}
}

func TestEncodeHelloSetsMoreOnAllButTheLastFrame(t *testing.T) {
	frames, err := EncodeHello(&Hello{Node: "edge-1", Store: storeID, StoreKey: storeKey, Inventory: inventory(30_000, true)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, frame := range frames {
		m, err := Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		switch m := m.(type) {
		case *Hello:
			got = append(got, fmt.Sprintf("hello more=%v", m.More))
		case *Inventory:
			got = append(got, fmt.Sprintf("inventory more=%v", m.More))
		}
	}
	want := []string{"hello more=true", "inventory more=true", "inventory more=true", "inventory more=true",
		"inventory more=true", "inventory more=true", "inventory more=true", "inventory more=true",
		"inventory more=true", "inventory more=true", "inventory more=true", "inventory more=false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frames (-want,+got):\n%s", diff)
	}
}

func TestEncodeHelloRefuses(t *testing.T) {
	inv := inventory(20_000, true)
	twice := append(append([]ObjectVersion(nil), inv...), inv[0]) // the copy lands in another frame
	huge := ObjectVersion{ObjectRef: ObjectRef{"Model", "ns", strings.Repeat("m", MaxFrameBytes)}, ResourceVersion: "1"}
	cases := map[string]struct {
		hello    *Hello
		want     error
		wantText string
	}{
		"nil":                                  {nil, ErrMalformed, "nil message"},
		"no node":                              {&Hello{Inventory: inv}, ErrMalformed, "hello: node is required"},
		"a ref listed in two frames":           {&Hello{Node: "n", Store: storeID, StoreKey: storeKey, Inventory: twice}, ErrMalformed, "hello: inventory[20000]: IncrementalLearningJob " + longestNamespace},
		"more entries than MaxInventory":       {&Hello{Node: "n", Store: storeID, StoreKey: storeKey, Inventory: inventory(MaxInventory+1, false)}, ErrTooLarge, "an inventory of 200001 entries, the limit is 200000"},
		"a name longer than Kubernetes allows": {&Hello{Node: "n", Store: storeID, StoreKey: storeKey, Inventory: append(inventory(3, false), huge)}, ErrMalformed, "inventory[3]: name of 1048576 bytes, more than 253"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			frames, err := EncodeHello(tc.hello)
			checkErr(t, err, tc.want, tc.wantText)
			if frames != nil {
				t.Errorf("EncodeHello returned %d frames with its error", len(frames))
			}
		})
	}
}

func TestHelloStreamRefusesWhatBreaksTheStream(t *testing.T) {
	ref := func(name string) ObjectVersion {
		return ObjectVersion{ObjectRef: ObjectRef{"Model", "ns", name}, ResourceVersion: "1"}
	}
	helloMore := &Hello{Node: "n", Store: storeID, StoreKey: storeKey, Inventory: []ObjectVersion{ref("a")}, More: true}
	cases := map[string]struct {
		// msgs are added in order; all but the last must be taken.
		msgs     []Message
		want     error
		wantText string
	}{
		"an inventory first": {msgs: []Message{&Inventory{Inventory: []ObjectVersion{ref("a")}}},
			want: ErrUnexpected, wantText: "the first message must be hello, not inventory"},
		"a heartbeat first": {msgs: []Message{&Heartbeat{Time: t0}},
			want: ErrUnexpected, wantText: "the first message must be hello, not heartbeat"},
		"a heartbeat while the inventory is due": {msgs: []Message{helloMore, &Heartbeat{Time: t0}},
			want: ErrUnexpected, wantText: "heartbeat while the hello's inventory was due"},
		"a second hello while the inventory is due": {msgs: []Message{helloMore, &Hello{Node: "n", Store: storeID, StoreKey: storeKey}},
			want: ErrUnexpected, wantText: "hello while the hello's inventory was due"},
		"an inventory after a whole hello": {msgs: []Message{&Hello{Node: "n", Store: storeID, StoreKey: storeKey}, &Inventory{Inventory: []ObjectVersion{ref("b")}}},
			want: ErrUnexpected, wantText: "inventory after the hello was whole"},
		"an inventory after the last inventory": {msgs: []Message{helloMore, &Inventory{Inventory: []ObjectVersion{ref("b")}}, &Inventory{Inventory: []ObjectVersion{ref("c")}}},
			want: ErrUnexpected, wantText: "inventory after the hello was whole"},
		"a ref in the hello and in an inventory": {msgs: []Message{helloMore, &Inventory{Inventory: []ObjectVersion{ref("b"), ref("a")}}},
			want: ErrMalformed, wantText: "inventory: inventory[1]: Model ns/a is listed twice"},
		"a ref in two inventories": {msgs: []Message{helloMore, &Inventory{Inventory: []ObjectVersion{ref("b")}, More: true}, &Inventory{Inventory: []ObjectVersion{ref("b")}}},
			want: ErrMalformed, wantText: "Model ns/b is listed twice"},
		"more than MaxInventory entries in all": {
			msgs: []Message{&Hello{Node: "n", Store: storeID, StoreKey: storeKey, Inventory: inventory(MaxInventory/2, false), More: true},
				&Inventory{Inventory: inventory(MaxInventory/2, true), More: true}, &Inventory{Inventory: []ObjectVersion{ref("one-too-many")}}},
			want: ErrTooLarge, wantText: "an inventory of more than 200000 entries"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var s HelloStream
			for i, m := range tc.msgs[:len(tc.msgs)-1] {
				if _, err := s.Add(m); err != nil {
					t.Fatalf("Add(msgs[%d]): %v", i, err)
				}
			}
			h, err := s.Add(tc.msgs[len(tc.msgs)-1])
			if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.wantText) {
				t.Errorf("Add(the last) = %v, want %v with %q", err, tc.want, tc.wantText)
			}
			if h != nil {
				t.Errorf("Add returned a hello with its error")
			}
		})
	}
}

func TestHelloStreamTakesAWholeHelloAtOnce(t *testing.T) {
	var s HelloStream
	want := &Hello{Node: "n", Store: storeID, StoreKey: storeKey, Inventory: inventory(3, false)}
	got, err := s.Add(want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Add (-want,+got):\n%s", diff)
	}
	if _, err := s.Add(&Heartbeat{Time: time.Now()}); !errors.Is(err, ErrUnexpected) {
		t.Errorf("a message after the whole hello: %v, want ErrUnexpected", err)
	}
}
