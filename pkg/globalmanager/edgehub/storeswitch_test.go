package edgehub

import (
	"math"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// A Hello of another store makes the node's record (the link's and, once
// written, its Lease's) that store's, and the first store is then unknown
// to the cloud: its next Hello is bounded as a new store's, from 0, not
// left to claim any report ID.
func TestAStoreSwitchDoesNotForgetTheFirstStoresRecord(t *testing.T) {
	cfg := testConfig
	cfg.MaxOutboxReports = 10
	f := newFixture(t, cfg, append(edgeObjects(), workers()...)...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: 5, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	c.send(runningReport(6))
	if got := summary(c.must(5 * time.Second)); got != "reportAck [6]" {
		t.Fatalf("got %q", got)
	}
	other := edgeproto.NewStoreKey()
	c = f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: edgeproto.StoreIdentity(other), StoreKey: other, LastReportID: 0, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		l, err := f.kube.CoordinationV1().Leases(hubNS).Get(t.Context(), links.LeaseName("edge-a"), metav1.GetOptions{})
		if err == nil && l.Annotations[links.AnnotationReportStore] == edgeproto.StoreIdentity(other) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never switched")
		}
	}
	c = f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: math.MaxInt64 - 1, Inventory: f.inventory("edge-a")})
	if ce := c.closed(); ce.Code != websocket.ClosePolicyViolation {
		t.Errorf("closed with %d %q, want the claim refused as past the store's record", ce.Code, ce.Text)
	}
}
