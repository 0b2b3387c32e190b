package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
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
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
	"github.com/nereid-ml/nereid/pkg/globalmanager/jobmetrics"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/kinds/all"
)

// descNames is a Registerer that keeps the names of the metrics registered
// with it: all of them, where a registry's Gather shows only the vectors
// that have a series yet.
type descNames map[string]bool

var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

func (n descNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			n[m[1]] = true
		}
	}
	return nil
}

func (n descNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = n.Register(c)
	}
}

func (n descNames) Unregister(prometheus.Collector) bool { return true }

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
// metrics: those it has from its start, the edge hub's, the per-job and
// fleet gauges and the DIJob replicas API's.
func TestEveryGlobalManagerMetricIsDocumented(t *testing.T) {
	names := descNames{}
	registerMetrics(names)
	names.MustRegister(jobmetrics.New(nil, 1))

	kube, sedna := kubefake.NewClientset(), fake.NewSimpleClientset()
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	factory := nereidinformers.NewSharedInformerFactory(sedna, 0)
	if _, err := edgehub.New(t.Context(), kube, sedna, factory, kinds.All(), edgehub.WorkerCaches{
		Pods: kubeFactory.Core().V1().Pods(), ReplicaSets: kubeFactory.Apps().V1().ReplicaSets(), Deployments: kubeFactory.Apps().V1().Deployments(),
	}, reports.Appliers{}, record.NewFakeRecorder(1), names, edgehub.Config{Address: "127.0.0.1:0", Namespace: "nereid-system"}); err != nil {
		t.Fatal(err)
	}
	replicasapi.New(replicasapi.Config{Kube: kube, DI: sedna, Jobs: factory.Diengine().V2alpha1().DIJobs().Lister(),
		Pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), Registerer: names})

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
	for _, want := range []string{"nereid_build_info", "nereid_job_phase", "nereid_edgehub_node_outbox_fill_ratio", "nereid_diserver_requests_total", "nereid_workqueue_depth"} {
		if !names[want] {
			t.Errorf("%s was not registered: the test misses a part of the GlobalManager", want)
		}
	}
}
