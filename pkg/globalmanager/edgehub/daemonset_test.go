package edgehub

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
)

// Through the hub: a token bound to a bare Pod of the LocalController's
// ServiceAccount on an edge node is refused before the upgrade with 403 and
// its own reason label; the DaemonSet's Pod on the same kind of node
// connects.
func TestABarePodOfTheServiceAccountIsRefused(t *testing.T) {
	bare := edgehubtest.LCPod("edge-b")
	bare.OwnerReferences = nil
	f := newFixture(t, testConfig, append(edgeObjects(), bare)...)
	conn, resp, err := f.dial(edgehubtest.JWT("token-edge-b", nil))
	if err == nil {
		conn.Close()
		t.Fatal("a bare Pod's token was upgraded")
	}
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
		t.Fatalf("dial: %v, want a refused handshake", err)
	}
	body := make([]byte, 512)
	n, _ := resp.Body.Read(body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body[:n]), "it has no controller (a bare Pod)") {
		t.Errorf("got %d %q, want 403 saying it is a bare Pod", resp.StatusCode, body[:n])
	}
	if got := f.metric("connections_refused_total", "reason", auth.RefusedNotDaemonSetPod); got != 1 {
		t.Errorf("connections_refused_total{reason=%q} = %v, want 1", auth.RefusedNotDaemonSetPod, got)
	}
	f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID}).untilSynced()
}
