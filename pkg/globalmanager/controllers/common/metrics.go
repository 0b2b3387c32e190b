package common

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Metrics are the controllers' Prometheus metrics. A nil *Metrics records
// nothing, for unit tests.
type Metrics struct {
	syncs        *prometheus.CounterVec
	syncDuration *prometheus.HistogramVec
	created      *prometheus.CounterVec
	updated      *prometheus.CounterVec
	deleted      *prometheus.CounterVec
	reportWrites *prometheus.HistogramVec
}

// NewMetrics registers the controller metrics, and the work queue metrics of
// every queue made by NewQueue, with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nereid", Subsystem: "controller", Name: "syncs_total",
			Help: "Syncs by controller and result (success or error).",
		}, []string{"controller", "result"}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nereid", Subsystem: "controller", Name: "sync_duration_seconds",
			Help:    "Time one sync took, by controller.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"controller"}),
		created: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nereid", Subsystem: "controller", Name: "children_created_total",
			Help: "Child objects created, by controller and child kind.",
		}, []string{"controller", "kind"}),
		updated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nereid", Subsystem: "controller", Name: "children_updated_total",
			Help: "Child objects updated to a new spec, by controller and child kind.",
		}, []string{"controller", "kind"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nereid", Subsystem: "controller", Name: "children_deleted_total",
			Help: "Child objects deleted, by controller and child kind.",
		}, []string{"controller", "kind"}),
		reportWrites: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "nereid", Subsystem: "controller", Name: "edge_reports_per_status_write",
			Help:    "Edge reports one status write carried (reports about one object coalesce while its previous write is in flight), by kind; its count is the number of such writes.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}, []string{"kind"}),
	}
	reg.MustRegister(m.syncs, m.syncDuration, m.created, m.updated, m.deleted, m.reportWrites)
	registerQueueMetrics(reg)
	return m
}

func (m *Metrics) observeSync(controller string, took time.Duration, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.syncs.WithLabelValues(controller, result).Inc()
	m.syncDuration.WithLabelValues(controller).Observe(took.Seconds())
}

// ChildCreated counts one child of kind created by controller.
func (m *Metrics) ChildCreated(controller, kind string) {
	if m != nil {
		m.created.WithLabelValues(controller, kind).Inc()
	}
}

// ChildUpdated counts one child of kind updated by controller.
func (m *Metrics) ChildUpdated(controller, kind string) {
	if m != nil {
		m.updated.WithLabelValues(controller, kind).Inc()
	}
}

// ChildDeleted counts one child of kind deleted by controller.
func (m *Metrics) ChildDeleted(controller, kind string) {
	if m != nil {
		m.deleted.WithLabelValues(controller, kind).Inc()
	}
}

// ReportsWritten counts one status write of an object of kind that carried
// n edge reports.
func (m *Metrics) ReportsWritten(kind string, n int) {
	if m != nil {
		m.reportWrites.WithLabelValues(kind).Observe(float64(n))
	}
}

var queueMetricsOnce sync.Once

// registerQueueMetrics makes client-go's work queues report depth, adds,
// latency, work duration and retries to reg. client-go takes one provider per
// process, so the first registry wins.
func registerQueueMetrics(reg prometheus.Registerer) {
	queueMetricsOnce.Do(func() {
		p := &queueMetricsProvider{
			depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nereid", Subsystem: "workqueue", Name: "depth",
				Help: "Keys waiting in the queue."}, []string{"name"}),
			adds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nereid", Subsystem: "workqueue", Name: "adds_total",
				Help: "Keys added to the queue."}, []string{"name"}),
			latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "nereid", Subsystem: "workqueue", Name: "queue_duration_seconds",
				Help: "Time a key waits in the queue before a worker takes it.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"name"}),
			workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "nereid", Subsystem: "workqueue", Name: "work_duration_seconds",
				Help: "Time a worker spends on a key.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"name"}),
			unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nereid", Subsystem: "workqueue", Name: "unfinished_work_seconds",
				Help: "Seconds of work in progress not yet observed by work_duration."}, []string{"name"}),
			longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "nereid", Subsystem: "workqueue", Name: "longest_running_processor_seconds",
				Help: "Seconds the longest running worker has been on its key."}, []string{"name"}),
			retries: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "nereid", Subsystem: "workqueue", Name: "retries_total",
				Help: "Keys requeued with backoff after an error."}, []string{"name"}),
		}
		reg.MustRegister(p.depth, p.adds, p.latency, p.workDuration, p.unfinished, p.longest, p.retries)
		workqueue.SetProvider(p)
	})
}

type queueMetricsProvider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func (p *queueMetricsProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name)
}
func (p *queueMetricsProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name)
}
func (p *queueMetricsProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name)
}
func (p *queueMetricsProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name)
}
func (p *queueMetricsProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name)
}
func (p *queueMetricsProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longest.WithLabelValues(name)
}
func (p *queueMetricsProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name)
}
