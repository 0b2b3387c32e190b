package replicasapi

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// metrics are the server's Prometheus metrics. A nil *metrics records
// nothing.
type metrics struct {
	requests *prometheus.CounterVec
}

// newMetrics registers the server's metrics with reg, or returns nil when
// reg is nil. A registry that has them already (a second server in one
// process) shares them.
func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "nereid", Subsystem: "diserver", Name: "requests_total",
		Help: "Requests to the DIJob replicas API and the v1 replicas server, by route (get_replicas, add_replicas, delete_replicas, post_profilings, v1_get_replicas, v1_add_replicas, v1_delete_replicas, v1_failed_replicas, unknown) and HTTP status.",
	}, []string{"route", "code"})
	if err := reg.Register(requests); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			// Metrics are optional: the server serves without them.
			klog.Background().Error(err, "Cannot register the DIJob replicas API's metrics; serving without them")
			return nil
		}
		existing, isVec := already.ExistingCollector.(*prometheus.CounterVec)
		if !isVec {
			klog.Background().Error(err, "Cannot register the DIJob replicas API's metrics; serving without them")
			return nil
		}
		requests = existing
	}
	return &metrics{requests: requests}
}

// count counts one request; route is one of the actions, never a raw path.
func (m *metrics) count(route action, status int) {
	if m != nil {
		m.requests.WithLabelValues(string(route), strconv.Itoa(status)).Inc()
	}
}
