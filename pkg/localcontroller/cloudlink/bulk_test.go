package cloudlink

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nereid-ml/nereid/internal/testwait"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// longVersion is version i of an object with the longest names Kubernetes
// allows: a 63-character namespace and a 253-character name.
func longVersion(i int, rv string) edgeproto.ObjectVersion {
	name := fmt.Sprintf("object-%06d-", i)
	name += strings.Repeat("x", 253-len(name))
	return edgeproto.ObjectVersion{
		ObjectRef:       edgeproto.ObjectRef{Kind: "Dataset", Namespace: strings.Repeat("n", 63), Name: name},
		ResourceVersion: rv,
	}
}

func TestLinkSaysTheHelloOfAHundredThousandObjectsInSeveralFrames(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	var (
		changes []store.ObjectChange
		want    []edgeproto.ObjectVersion
	)
	for i := range 100_000 {
		v := longVersion(i, fmt.Sprint(i+1))
		changes = append(changes, store.ObjectChange{Key: storeKey(v.ObjectRef), ResourceVersion: v.ResourceVersion, Data: []byte(`{}`)})
		want = append(want, v) // in key order, as the store lists them
	}
	if err := l.st.ApplyObjects(changes); err != nil {
		t.Fatal(err)
	}
	start(t, l)

	c := gm.accept(t)
	var (
		stream edgeproto.HelloStream
		hello  *edgeproto.Hello
		frames int
	)
	for hello == nil {
		m := c.recvFrame(t) // nothing, not even a heartbeat, comes between the parts
		var err error
		if hello, err = stream.Add(m); err != nil {
			t.Fatalf("frame %d of the hello: %v", frames, err)
		}
		frames++
	}
	if frames < 30 {
		t.Errorf("the hello took %d frames, want the many that 100,000 long names take", frames)
	}
	// cmp.Diff takes seconds over 100,000 entries; it only says what differs.
	if wantHello := (&edgeproto.Hello{Node: "edge-1", Store: l.st.Identity(), StoreKey: l.st.Key(), Inventory: want}); !reflect.DeepEqual(wantHello, hello) {
		t.Errorf("the hello (-want,+got):\n%s", cmp.Diff(wantHello, hello))
	}
}

func TestLinkKeepsPersistingWhileTheGlobalManagerReadsNothing(t *testing.T) {
	gm := newFakeGM(t)
	l := newTestLink(t, gm, nil)
	start(t, l)
	c := gm.accept(t)
	recvAs[*edgeproto.Hello](t, c)

	// The fake GM sends a difference of 20,000 objects with long names and
	// reads nothing meanwhile, so the link's Acks (7 MB of them) fill the
	// connection's buffers and its writer waits. A link whose reader then
	// waited on its writer would stop reading, and these writes would time
	// out.
	const n = 20_000
	want := make([]edgeproto.ObjectVersion, n)
	for i := range want {
		want[i] = longVersion(i, "1")
		c.send(t, &edgeproto.Upsert{ObjectVersion: want[i], Object: object(want[i])})
	}
	c.send(t, &edgeproto.Synced{})
	testwait.Eventually(t, testWait, "the store to be in sync", func(context.Context) (bool, error) { return l.Status().Synced, nil })
	inv, err := l.st.Inventory()
	if err != nil {
		t.Fatal(err)
	}
	if len(inv) != n {
		t.Errorf("the store holds %d objects, want %d", len(inv), n)
	}

	// Once the GM reads, every object is acknowledged, in order.
	deadline := time.Now().Add(testWait)
	var acked []edgeproto.ObjectVersion
	for len(acked) < n && time.Now().Before(deadline) {
		acked = append(acked, recvAs[*edgeproto.Ack](t, c).Objects...)
	}
	if !reflect.DeepEqual(want, acked) {
		t.Errorf("acknowledged %d versions, want the %d sent in the order sent", len(acked), n)
	}
	if got := testutil.ToFloat64(l.metrics.objectsApplied.WithLabelValues(opUpsert)); got != n {
		t.Errorf("objects_applied_total{op=upsert} = %v, want %d", got, n)
	}
}
