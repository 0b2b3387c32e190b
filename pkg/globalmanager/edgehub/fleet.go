package edgehub

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// The edge fleet's gauges, one series per node the hub has known since it
// started: as many as the fleet has nodes.
var (
	nodeLabels        = []string{"node"}
	nodeConnectedDesc = prometheus.NewDesc("nereid_edgehub_node_connected",
		"1 while the node's LocalController is connected to this hub, 0 once it is not; for every node connected since the hub started.", nodeLabels, nil)
	nodeLastHeardDesc = prometheus.NewDesc("nereid_edgehub_node_last_heard_seconds",
		"Seconds since the hub last heard from the node's LocalController (any frame, heartbeats included).", nodeLabels, nil)
	nodeOutboxReportsDesc = prometheus.NewDesc("nereid_edgehub_node_outbox_reports",
		"Reports in the node's outbox, as its LocalController's last heartbeat said.", nodeLabels, nil)
	nodeOutboxBytesDesc = prometheus.NewDesc("nereid_edgehub_node_outbox_bytes",
		"Bytes in the node's outbox, as its LocalController's last heartbeat said.", nodeLabels, nil)
	nodeOutboxFillDesc = prometheus.NewDesc("nereid_edgehub_node_outbox_fill_ratio",
		"How full the node's outbox is, 0 to 1, by whichever of its bounds (--max-outbox-reports, --max-outbox-bytes) is nearer, as its LocalController's last heartbeat said; "+
			"at 1 the LocalController answers its workers 503.", nodeLabels, nil)
)

// fleetCollector exports the edge fleet's gauges from the hub's link state,
// read at scrape time.
type fleetCollector struct {
	links *links.Writer
	clock clock.PassiveClock
}

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{nodeConnectedDesc, nodeLastHeardDesc, nodeOutboxReportsDesc, nodeOutboxBytesDesc, nodeOutboxFillDesc} {
		ch <- d
	}
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.clock.Now()
	for _, n := range c.links.Nodes() {
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, n.Name)
		}
		connected := 0.0
		if n.Connected {
			connected = 1
		}
		gauge(nodeConnectedDesc, connected)
		if !n.LastHeard.IsZero() {
			gauge(nodeLastHeardDesc, max(0, now.Sub(n.LastHeard).Seconds()))
		}
		if o := n.Outbox; o != nil {
			gauge(nodeOutboxReportsDesc, float64(o.Reports))
			gauge(nodeOutboxBytesDesc, float64(o.Bytes))
			gauge(nodeOutboxFillDesc, fillRatio(*o))
		}
	}
}

// fillRatio is how full f is, 0 to 1, by whichever bound is nearer.
func fillRatio(f edgeproto.OutboxFill) float64 {
	r := 0.0
	if f.MaxReports > 0 {
		r = float64(f.Reports) / float64(f.MaxReports)
	}
	if f.MaxBytes > 0 {
		r = max(r, float64(f.Bytes)/float64(f.MaxBytes))
	}
	return min(max(r, 0), 1)
}
