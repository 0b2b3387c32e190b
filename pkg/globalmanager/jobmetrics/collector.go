// Package jobmetrics is the GlobalManager's per-job gauges: each job's
// phase (or stage), round and latest reported metric values, read from the
// informers' caches at scrape time. Nothing is recorded as jobs sync, so a
// job that goes leaves nothing behind; the gauges' cardinality is bounded
// by the number of jobs exported (MaxJobs), the metrics per job
// (MaxMetricsPerJob) and the length of a metric's name (MaxMetricNameBytes).
package jobmetrics

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

const (
	// DefaultMaxJobs is how many jobs are exported by default
	// (--metrics-max-jobs).
	DefaultMaxJobs = 1000
	// MaxMetricsPerJob is how many metric values one job exports at most:
	// the first by name.
	MaxMetricsPerJob = 16
	// MaxMetricNameBytes bounds a metric's name; a longer one (or one the
	// status already cut) is not exported.
	MaxMetricNameBytes = 64
)

// Source is one kind's jobs.
type Source struct {
	// Kind is the kind's name, the gauges' kind label.
	Kind string
	// List lists the kind's objects, from the informer's cache.
	List func() []any
	// Progress reads one object (kinds.Kind.Progress).
	Progress func(obj any) kinds.Progress
}

// Sources are the sources of table's kinds that are jobs, List being
// list(kind).
func Sources(table []*kinds.Kind, list func(k *kinds.Kind) func() []any) []Source {
	var out []Source
	for _, k := range table {
		if k.Progress != nil {
			out = append(out, Source{Kind: k.GVK.Kind, List: list(k), Progress: k.Progress})
		}
	}
	return out
}

var (
	jobLabels = []string{"kind", "namespace", "name"}

	phaseDesc = prometheus.NewDesc("nereid_job_phase",
		"1 for the job's current status.phase (federated learning jobs, DIJobs).",
		append(slices.Clone(jobLabels), "phase"), nil)
	stageDesc = prometheus.NewDesc("nereid_job_stage",
		"1 for a learning cycle's current stage and that stage's state (incremental and lifelong learning jobs).",
		append(slices.Clone(jobLabels), "stage", "state"), nil)
	roundDesc = prometheus.NewDesc("nereid_job_round",
		"A learning cycle's current round, counted from 1 (0: not started), or a federated learning job's (its fastest node's).",
		jobLabels, nil)
	metricDesc = prometheus.NewDesc("nereid_job_metric",
		"The latest value of each numeric metric the job's status records (an evaluated round's model metrics, a service's summed inference counts, a federated job's last reporting node's values), "+
			"at most "+strconv.Itoa(MaxMetricsPerJob)+" per job, the first by name.",
		append(slices.Clone(jobLabels), "metric"), nil)
	omittedDesc = prometheus.NewDesc("nereid_job_metrics_omitted_jobs",
		"Jobs whose nereid_job_* gauges this scrape left out: those past --metrics-max-jobs, the last by kind, namespace and name.",
		nil, nil)
)

// Collector exports the per-job gauges of its sources.
type Collector struct {
	sources []Source
	maxJobs int
}

// New returns the Collector of sources, exporting at most maxJobs jobs.
func New(sources []Source, maxJobs int) *Collector {
	return &Collector{sources: sources, maxJobs: maxJobs}
}

// Describe sends the gauges' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{phaseDesc, stageDesc, roundDesc, metricDesc, omittedDesc} {
		ch <- d
	}
}

type job struct {
	kind, namespace, name string
	obj                   any
	progress              func(any) kinds.Progress
}

// Collect lists every source's cache and sends the gauges of the first
// maxJobs jobs by kind, namespace and name: a stable choice from one
// scrape to the next, so that a series is not there one scrape and gone
// the next while the jobs stay the same.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	var jobs []job
	for _, s := range c.sources {
		for _, obj := range s.List() {
			m, err := meta.Accessor(obj)
			if err != nil {
				continue
			}
			jobs = append(jobs, job{kind: s.Kind, namespace: m.GetNamespace(), name: m.GetName(), obj: obj, progress: s.Progress})
		}
	}
	omitted := 0
	if len(jobs) > c.maxJobs {
		slices.SortFunc(jobs, func(a, b job) int {
			return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
		})
		omitted = len(jobs) - c.maxJobs
		jobs = jobs[:c.maxJobs]
	}
	ch <- prometheus.MustNewConstMetric(omittedDesc, prometheus.GaugeValue, float64(omitted))
	for _, j := range jobs {
		collectJob(ch, j)
	}
}

func collectJob(ch chan<- prometheus.Metric, j job) {
	p := j.progress(j.obj)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		// A label value that is no valid UTF-8 (a phase written by another
		// client) drops that series rather than panic in the scrape.
		if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, append([]string{j.kind, j.namespace, j.name}, labels...)...); err == nil {
			ch <- m
		}
	}
	if p.Phase != "" {
		gauge(phaseDesc, 1, p.Phase)
	}
	if p.Stage != "" {
		gauge(stageDesc, 1, p.Stage, p.State)
	}
	if p.HasRound {
		gauge(roundDesc, float64(p.Round))
	}
	for _, m := range exported(p.Metrics) {
		gauge(metricDesc, m.value, m.name)
	}
}

type value struct {
	name  string
	value float64
}

// exported are the metrics of a job that are exported: numbers, under a
// name that is valid UTF-8 of at most MaxMetricNameBytes that the status
// did not cut, each name once (its first value), at most MaxMetricsPerJob,
// the first by name.
func exported(metrics []sednav1.Metric) []value {
	var out []value
	for _, m := range metrics {
		if m.Key == "" || len(m.Key) > MaxMetricNameBytes || !utf8.ValidString(m.Key) ||
			strings.HasSuffix(m.Key, sednav1.TruncatedSuffix) || m.Key == sednav1.DroppedMetricsKey {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(m.Value), 64)
		if err != nil {
			continue
		}
		out = append(out, value{m.Key, f})
	}
	slices.SortStableFunc(out, func(a, b value) int { return cmp.Compare(a.name, b.name) })
	out = slices.CompactFunc(out, func(a, b value) bool { return a.name == b.name })
	if len(out) > MaxMetricsPerJob {
		out = out[:MaxMetricsPerJob]
	}
	return out
}
