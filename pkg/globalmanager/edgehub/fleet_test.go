package edgehub

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// The fleet's gauges say, per node, whether it is connected, how long ago
// it was heard, and its outbox as its LocalController last said; a node
// whose LocalController said nothing of its outbox has no outbox series.
func TestFleetGaugesSayEachNodesLinkAndOutbox(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	w := links.New(links.Config{Client: fake.NewClientset(), Namespace: "nereid-system", Period: time.Second, Clock: clk})
	edge1 := w.Connected("edge-1", "store-1", 0)
	w.SetOutbox(edge1, edgeproto.OutboxFill{Reports: 8500, Bytes: 4 << 20, MaxReports: 10000, MaxBytes: 64 << 20})
	edge2 := w.Connected("edge-2", "store-2", 0)
	clk.Step(30 * time.Second)
	w.Heard(edge1)
	w.SetOutbox(edge2, edgeproto.OutboxFill{Reports: 10, Bytes: 60 << 20, MaxReports: 10000, MaxBytes: 64 << 20})
	w.Disconnected(edge2)
	w.Connected("edge-3", "store-3", 0)
	clk.Step(5 * time.Second)

	c := fleetCollector{links: w, clock: clk}
	want := `
# HELP nereid_edgehub_node_connected 1 while the node's LocalController is connected to this hub, 0 once it is not; for every node connected since the hub started.
# TYPE nereid_edgehub_node_connected gauge
nereid_edgehub_node_connected{node="edge-1"} 1
nereid_edgehub_node_connected{node="edge-2"} 0
nereid_edgehub_node_connected{node="edge-3"} 1
# HELP nereid_edgehub_node_last_heard_seconds Seconds since the hub last heard from the node's LocalController (any frame, heartbeats included).
# TYPE nereid_edgehub_node_last_heard_seconds gauge
nereid_edgehub_node_last_heard_seconds{node="edge-1"} 5
nereid_edgehub_node_last_heard_seconds{node="edge-2"} 35
nereid_edgehub_node_last_heard_seconds{node="edge-3"} 5
# HELP nereid_edgehub_node_outbox_bytes Bytes in the node's outbox, as its LocalController's last heartbeat said.
# TYPE nereid_edgehub_node_outbox_bytes gauge
nereid_edgehub_node_outbox_bytes{node="edge-1"} 4.194304e+06
nereid_edgehub_node_outbox_bytes{node="edge-2"} 6.291456e+07
# HELP nereid_edgehub_node_outbox_fill_ratio How full the node's outbox is, 0 to 1, by whichever of its bounds (--max-outbox-reports, --max-outbox-bytes) is nearer, as its LocalController's last heartbeat said; at 1 the LocalController answers its workers 503.
# TYPE nereid_edgehub_node_outbox_fill_ratio gauge
nereid_edgehub_node_outbox_fill_ratio{node="edge-1"} 0.85
nereid_edgehub_node_outbox_fill_ratio{node="edge-2"} 0.9375
# HELP nereid_edgehub_node_outbox_reports Reports in the node's outbox, as its LocalController's last heartbeat said.
# TYPE nereid_edgehub_node_outbox_reports gauge
nereid_edgehub_node_outbox_reports{node="edge-1"} 8500
nereid_edgehub_node_outbox_reports{node="edge-2"} 10
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v, %v", problems, err)
	}
}
