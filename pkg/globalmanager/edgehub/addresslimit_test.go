package edgehub

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
)

// Through the hub: an address that sends more bad tokens than its share is
// told to come back (429, Retry-After) without its next token reviewed (this
// hub holds no issuer keys, so it verifies no token itself: nothing gets
// through the block), and its refusals are counted; good connections from
// that address before are not limited, since only refusals count.
func TestAnAddressSendingBadTokensIsRefusedWithoutAReview(t *testing.T) {
	cfg := testConfig
	cfg.MaxRefusalsPerAddress = 5
	f := newFixture(t, cfg, edgeObjects()...)
	for range 4 * cfg.MaxRefusalsPerAddress {
		c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
		c.untilSynced()
		c.conn.Close()
		f.hub.connectsMu.Lock()
		delete(f.hub.connects, "edge-a") // the node's own pace is not what is tested
		f.hub.connectsMu.Unlock()
	}
	reviews := func() int {
		n := 0
		for _, a := range f.kube.Actions() {
			if a.Matches("create", "tokenreviews") {
				n++
			}
		}
		return n
	}
	for i := range cfg.MaxRefusalsPerAddress {
		if _, resp, err := f.dial(edgehubtest.JWT("forged-"+strings.Repeat("x", i), nil)); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("bad token %d: %v, want 401", i, resp)
		}
	}
	before := reviews()
	_, resp, err := f.dial(edgehubtest.JWT("forged-again", nil))
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
		t.Fatalf("a bad token past the limit: %v, %v; want 429 with Retry-After: 60", err, resp)
	}
	if reviews() != before {
		t.Error("the blocked address's token was reviewed")
	}
	if n := f.metric("connections_refused_total", "reason", auth.RefusedTooManyRefusals); n != 1 {
		t.Errorf("refused too_many_refusals %v, want 1", n)
	}
}
