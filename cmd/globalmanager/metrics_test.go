package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/replicasapi"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/pkg/globalmanager/jobmetrics"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/kinds/all"
)

// exported is a Registerer that keeps what it is given of each metric
// registered with it: all of them, where a registry's Gather shows only the
// vectors that have a series yet.
type exported map[string]exportedMetric

// exportedMetric is what a query may read of one metric: its label names
// (constant and variable) and whether it is a histogram or summary, whose
// series are name_bucket, name_sum and name_count.
type exportedMetric struct {
	labels []string
	kind   string // "histogram", "summary" or "" for one series per label set
}

var (
	descFQName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`, constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}\}$`)
	constLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
	// variableLabel is a name, or c(name) for a constrained one.
	variableLabel = regexp.MustCompile(`^(?:c\(([a-zA-Z_][a-zA-Z0-9_]*)\)|([a-zA-Z_][a-zA-Z0-9_]*))$`)
)

func (n exported) Register(c prometheus.Collector) error {
	kind := observedKind(c)
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		s := d.String()
		m := descFQName.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		var labels []string
		if l := descLabels.FindStringSubmatch(s); l != nil {
			for _, c := range constLabel.FindAllStringSubmatch(l[1], -1) {
				labels = append(labels, c[1])
			}
			for v := range strings.SplitSeq(l[2], ",") {
				if vm := variableLabel.FindStringSubmatch(v); vm != nil {
					labels = append(labels, vm[1]+vm[2])
				}
			}
		}
		n[m[1]] = exportedMetric{labels: labels, kind: kind}
	}
	return nil
}

// observedKind says whether c is a histogram or a summary, alone or a
// vector of them.
func observedKind(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	// One histogram and one summary have the same methods: tell them
	// apart by the type behind the interface.
	switch fmt.Sprintf("%T", c) {
	case "*prometheus.histogram", "*prometheus.constHistogram":
		return "histogram"
	case "*prometheus.summary", "*prometheus.noObjectivesSummary", "*prometheus.constSummary":
		return "summary"
	}
	return ""
}

func (n exported) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = n.Register(c)
	}
}

func (n exported) Unregister(prometheus.Collector) bool { return true }

var (
	gmMetricsOnce sync.Once
	gmMetrics     exported
	gmMetricsErr  error
)

// globalManagerMetrics are the metrics the GlobalManager registers: those
// it has from its start, the edge hub's, the per-job and fleet gauges and
// the DIJob replicas API's. They are gathered once per test binary, since
// the work queues' metrics go to the first registry only.
func globalManagerMetrics(t *testing.T) exported {
	t.Helper()
	gmMetricsOnce.Do(func() {
		names := exported{}
		registerMetrics(names)
		names.MustRegister(jobmetrics.New(nil, 1))

		kube, sedna := kubefake.NewClientset(), fake.NewSimpleClientset()
		kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
		factory := nereidinformers.NewSharedInformerFactory(sedna, 0)
		if _, err := edgehub.New(t.Context(), edgehub.Deps{
			Kube: kube, Client: sedna, Informers: factory, Kinds: kinds.All(),
			Workers:  edgehub.WorkerCachesOf(kubeFactory),
			Recorder: record.NewFakeRecorder(1), Registerer: names,
			Config: edgehub.Config{Address: "127.0.0.1:0", Namespace: "nereid-system"},
		}); err != nil {
			gmMetricsErr = err
			return
		}
		replicasapi.New(replicasapi.Config{Kube: kube, DI: sedna, Jobs: factory.Diengine().V2alpha1().DIJobs().Lister(),
			Pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), Registerer: names})
		gmMetrics = names
	})
	if gmMetricsErr != nil {
		t.Fatal(gmMetricsErr)
	}
	for _, want := range []string{"nereid_build_info", "nereid_job_phase", "nereid_edgehub_node_outbox_fill_ratio", "nereid_diserver_requests_total", "nereid_workqueue_depth", "nereid_globalmanager_leader"} {
		if _, ok := gmMetrics[want]; !ok {
			t.Fatalf("%s was not registered: the test misses a part of the GlobalManager", want)
		}
	}
	return gmMetrics
}

// documentedMetrics are the metric names the tables of docs/operations.md
// list: a name in backquotes, or a suffix "`_x`" after a name in the same
// row, which stands for that name's prefix followed by x.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	page, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	out := map[string]bool{}
	for line := range strings.SplitSeq(string(page), "\n") {
		if !strings.HasPrefix(line, "| `nereid_") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		var full string
		for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
			name, _, _ := strings.Cut(m[1], "{")
			switch {
			case strings.HasPrefix(name, "nereid_"):
				full = name
				out[name] = true
			case strings.HasPrefix(name, "_") && full != "":
				// Every prefix of the row's name that ends before an
				// underscore: `nereid_controller_children_created_total`,
				// `_updated_total`.
				for i := range len(full) {
					if full[i] == '_' {
						out[full[:i]+name] = true
					}
				}
			}
		}
	}
	return out
}

// Every metric the GlobalManager registers is in the docs' tables of
// metrics.
func TestEveryGlobalManagerMetricIsDocumented(t *testing.T) {
	names := globalManagerMetrics(t)
	documented := documentedMetrics(t)
	var missing []string
	for name := range names {
		if strings.HasPrefix(name, "nereid_") && !documented[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("metrics registered but not in docs/operations.md's tables: %s", strings.Join(missing, ", "))
	}
}
