package edgehub

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// metrics are the hub's Prometheus metrics.
type metrics struct {
	connectedNodes prometheus.Gauge
	refused        *prometheus.CounterVec
	revoked        *prometheus.CounterVec
	sent           *prometheus.CounterVec
	received       *prometheus.CounterVec
	resends        prometheus.Counter
	unsendable     prometheus.Counter
	reportsApplied prometheus.Counter
	reportsRefused prometheus.Counter
	ackLatency     prometheus.Histogram
	tokens         *prometheus.CounterVec
	lanesWaiting   prometheus.Gauge
	// tokensConfirmed counts the reviews of tokens the hub accepted
	// itself, by result.
	tokensConfirmed *prometheus.CounterVec
	// tokenReviews counts every TokenReview the hub sends, by result.
	tokenReviews *prometheus.CounterVec
	// reachScans counts the scans of every object's nodes (reach.go).
	reachScans prometheus.Counter
}

// newMetrics makes the hub's metrics and registers them with reg, if not nil.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "nereid", Subsystem: "edgehub", Name: name, Help: help}
	}
	m := &metrics{
		connectedNodes: prometheus.NewGauge(prometheus.GaugeOpts(opts("connected_nodes",
			"Edge nodes with a live connection."))),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts(opts("connections_refused_total",
			"Connections refused, by reason.")), []string{"reason"}),
		revoked: prometheus.NewCounterVec(prometheus.CounterOpts(opts("connections_revoked_total",
			"Open connections closed because their identity no longer holds (token expired or no longer valid, Pod, ServiceAccount or DaemonSet deleted, node no longer an edge node), by reason.")), []string{"reason"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts(opts("messages_sent_total",
			"Messages sent to LocalControllers, by type.")), []string{"type"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts(opts("messages_received_total",
			"Messages received from LocalControllers, by type.")), []string{"type"}),
		resends: prometheus.NewCounter(prometheus.CounterOpts(opts("resends_total",
			"Upserts and Deletes sent again because their Ack did not come in time."))),
		unsendable: prometheus.NewCounter(prometheus.CounterOpts(opts("objects_unsendable_total",
			"Object versions that could not be sent to an edge node that needs them (over the frame limit), each a Warning event on the object."))),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts(opts("tokens_verified_total",
			"LocalController tokens accepted, by who verified them: the hub itself (hub), or a TokenReview (token_review); a token accepted from the cache of outcomes is not counted again.")), []string{"by"}),
		reportsApplied: prometheus.NewCounter(prometheus.CounterOpts(opts("reports_applied_total",
			"Worker reports applied and acknowledged."))),
		reportsRefused: prometheus.NewCounter(prometheus.CounterOpts(opts("reports_refused_total",
			"Worker reports refused for good and acknowledged."))),
		lanesWaiting: prometheus.NewGauge(prometheus.GaugeOpts(opts("report_lanes_waiting",
			"Lanes of reports (one object's reports from one node) waiting for their turn to be applied (Config.ReportWrites, --edge-report-writes, apply at once); their reports gather meanwhile, for one status write."))),
		tokenReviews: prometheus.NewCounterVec(prometheus.CounterOpts(opts("token_reviews_total",
			"TokenReviews the hub sent the API server, to authenticate a connection or confirm one, by result: authenticated, unauthenticated, error. "+
				"A token the hub can refuse itself (not signed by the API server's published keys) is never sent.")), []string{"result"}),
		tokensConfirmed: prometheus.NewCounterVec(prometheus.CounterOpts(opts("tokens_confirmed_total",
			"TokenReviews of open connections' tokens: those the hub verified itself, once, and those it cannot check again itself, every recheck; by result: confirmed, or refused (the connection is then closed).")), []string{"result"}),
		reachScans: prometheus.NewCounter(prometheus.CounterOpts(opts("reach_scans_total",
			"Scans of the nodes of every object the hub sends, for their EdgeLinked condition: every 2s while something they read changes or a node is not judged yet, else every 30s."))),
		ackLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "nereid", Subsystem: "edgehub", Name: "object_ack_latency_seconds",
			Help:    "Time from the first send of an object's version to its Ack.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.connectedNodes, m.refused, m.revoked, m.sent, m.received,
			m.resends, m.unsendable, m.reportsApplied, m.reportsRefused, m.ackLatency, m.tokens, m.lanesWaiting, m.tokensConfirmed, m.tokenReviews,
			m.reachScans} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) sentMessage(t edgeproto.Type)     { m.sent.WithLabelValues(string(t)).Inc() }
func (m *metrics) receivedMessage(t edgeproto.Type) { m.received.WithLabelValues(string(t)).Inc() }
func (m *metrics) refuse(reason string)             { m.refused.WithLabelValues(reason).Inc() }
func (m *metrics) tokenVerified(by string)          { m.tokens.WithLabelValues(by).Inc() }
func (m *metrics) tokenReviewed(result string)      { m.tokenReviews.WithLabelValues(result).Inc() }
