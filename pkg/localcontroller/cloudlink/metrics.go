package cloudlink

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// Reasons a session ends, the disconnects_total label. They are few and
// fixed so the label stays bounded; the log line has the details.
const (
	reasonShutdown   = "shutdown"     // the LocalController is stopping
	reasonTimeout    = "timeout"      // nothing heard for ReadTimeout
	reasonPeerClosed = "peer_closed"  // the GlobalManager closed the connection
	reasonRead       = "read_error"   // the connection broke while reading
	reasonWrite      = "write_error"  // the connection broke while writing
	reasonBadFrame   = "bad_frame"    // the GlobalManager sent a frame Decode refuses
	reasonUnexpected = "unexpected"   // a well-formed message the GlobalManager must not send
	reasonStore      = "store_error"  // the local store failed; nothing is acknowledged
	reasonHello      = "hello_error"  // the Hello could not be built
	reasonEncode     = "encode_error" // this end built a message Encode refuses (a bug)
)

// Operations, the objects_applied_total label.
const (
	opUpsert = "upsert"
	opDelete = "delete"
)

type metrics struct {
	connected        prometheus.Gauge
	synced           prometheus.Gauge
	connects         prometheus.Counter
	connectErrors    prometheus.Counter
	disconnects      *prometheus.CounterVec
	syncs            prometheus.Counter
	objectsApplied   *prometheus.CounterVec
	reportsSent      prometheus.Counter
	reportsAcked     prometheus.Counter
	reportsRefused   prometheus.Counter
	reportsDropped   prometheus.Counter
	outboxReports    prometheus.GaugeFunc
	outboxBytes      prometheus.GaugeFunc
	outboxMaxReports prometheus.Gauge
	outboxMaxBytes   prometheus.Gauge
}

func newMetrics(st *store.Store) *metrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "nereid", Subsystem: "cloudlink", Name: name, Help: help}
	}
	outbox := func() (int, int64) {
		n, size, _ := st.OutboxLen() // never fails: it reads counters
		return n, size
	}
	m := &metrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts(opts("connected",
			"1 while the LocalController has a session with the GlobalManager, else 0."))),
		synced: prometheus.NewGauge(prometheus.GaugeOpts(opts("synced",
			"1 once the GlobalManager has sent the whole difference on the current session (Synced), else 0."))),
		connects: prometheus.NewCounter(prometheus.CounterOpts(opts("connects_total",
			"Sessions opened with the GlobalManager (websocket handshake done)."))),
		connectErrors: prometheus.NewCounter(prometheus.CounterOpts(opts("connect_errors_total",
			"Connection attempts that failed before a session (CA, token, TCP, TLS or HTTP refusal)."))),
		disconnects: prometheus.NewCounterVec(prometheus.CounterOpts(opts("disconnects_total",
			"Sessions ended, by reason.")), []string{"reason"}),
		syncs: prometheus.NewCounter(prometheus.CounterOpts(opts("syncs_total",
			"Synced messages received: the store held exactly what concerns the node."))),
		objectsApplied: prometheus.NewCounterVec(prometheus.CounterOpts(opts("objects_applied_total",
			"Upserts and Deletes persisted to the local store (and then acknowledged), by operation.")), []string{"op"}),
		reportsSent: prometheus.NewCounter(prometheus.CounterOpts(opts("reports_sent_total",
			"Reports sent to the GlobalManager, resends after a reconnect included."))),
		reportsAcked: prometheus.NewCounter(prometheus.CounterOpts(opts("reports_acked_total",
			"Report IDs the GlobalManager acknowledged (applied or refused), removed from the outbox."))),
		reportsRefused: prometheus.NewCounter(prometheus.CounterOpts(opts("reports_refused_total",
			"Reports the GlobalManager refused for good (counted in reports_acked_total too)."))),
		reportsDropped: prometheus.NewCounter(prometheus.CounterOpts(opts("reports_dropped_total",
			"Reports removed from the outbox unsent because the stored report could not be encoded (corrupt)."))),
		outboxReports: prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("outbox_reports",
			"Reports in the on-disk outbox, not yet acknowledged.")), func() float64 {
			n, _ := outbox()
			return float64(n)
		}),
		outboxBytes: prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("outbox_bytes",
			"Bytes of the reports in the on-disk outbox.")), func() float64 {
			_, size := outbox()
			return float64(size)
		}),
		// The bounds are exported so that an alert compares the fill with
		// them (outbox_reports / outbox_max_reports) before workers get 503.
		outboxMaxReports: prometheus.NewGauge(prometheus.GaugeOpts(opts("outbox_max_reports",
			"Most reports the outbox holds (--max-outbox-reports); past it workers get 503 and retry."))),
		outboxMaxBytes: prometheus.NewGauge(prometheus.GaugeOpts(opts("outbox_max_bytes",
			"Most report bytes the outbox holds (--max-outbox-bytes); past it workers get 503 and retry."))),
	}
	maxReports, maxBytes := st.OutboxBounds()
	m.outboxMaxReports.Set(float64(maxReports))
	m.outboxMaxBytes.Set(float64(maxBytes))
	// The labelled counters start at zero for every known value, so a rate
	// over them is defined before the first event.
	for _, r := range []string{reasonShutdown, reasonTimeout, reasonPeerClosed, reasonRead, reasonWrite,
		reasonBadFrame, reasonUnexpected, reasonStore, reasonHello, reasonEncode} {
		m.disconnects.WithLabelValues(r)
	}
	for _, op := range []string{opUpsert, opDelete} {
		m.objectsApplied.WithLabelValues(op)
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.connected, m.synced, m.connects, m.connectErrors, m.disconnects, m.syncs, m.objectsApplied,
		m.reportsSent, m.reportsAcked, m.reportsRefused, m.reportsDropped, m.outboxReports, m.outboxBytes,
		m.outboxMaxReports, m.outboxMaxBytes,
	}
}
