package charts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nereid-ml/nereid/test/framework"
)

// The API versions helm is told the API server serves, as it finds them in
// discovery on helm install.
const (
	serviceMonitorAPI = "monitoring.coreos.com/v1/ServiceMonitor"
	prometheusRuleAPI = "monitoring.coreos.com/v1/PrometheusRule"
)

// monitoringKeys are the keys of r's objects for Prometheus and Grafana.
func (r release) monitoringKeys() []string {
	var keys []string
	for _, k := range r.keys() {
		kind, _, _ := strings.Cut(k, "/")
		if kind == "ServiceMonitor" || kind == "PrometheusRule" || kind == "ConfigMap" {
			keys = append(keys, k)
		}
	}
	return keys
}

// The ServiceMonitor and PrometheusRule are made only where the API server
// serves their kind (an install without the Prometheus Operator must not
// fail on them), and none of the three when turned off.
func TestChartMakesMonitoringObjectsOnlyWhereServed(t *testing.T) {
	for name, tc := range map[string]struct {
		args     []string
		wantKeys []string
	}{
		"neither served": {wantKeys: []string{"ConfigMap/nereid-dashboard"}},
		"ServiceMonitor served": {
			args:     []string{"--api-versions", serviceMonitorAPI},
			wantKeys: []string{"ConfigMap/nereid-dashboard", "ServiceMonitor/nereid-globalmanager"},
		},
		"PrometheusRule served": {
			args:     []string{"--api-versions", prometheusRuleAPI},
			wantKeys: []string{"ConfigMap/nereid-dashboard", "PrometheusRule/nereid-globalmanager"},
		},
		"both served": {
			args:     []string{"--api-versions", serviceMonitorAPI, "--api-versions", prometheusRuleAPI},
			wantKeys: []string{"ConfigMap/nereid-dashboard", "PrometheusRule/nereid-globalmanager", "ServiceMonitor/nereid-globalmanager"},
		},
		"both served, all turned off": {
			args: []string{"--api-versions", serviceMonitorAPI, "--api-versions", prometheusRuleAPI,
				"--set", "metrics.serviceMonitor.enabled=false", "--set", "metrics.prometheusRule.enabled=false",
				"--set", "metrics.grafanaDashboard.enabled=false"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := render(t, "nereid-system", tc.args...)
			if diff := cmp.Diff(tc.wantKeys, r.monitoringKeys()); diff != "" {
				t.Errorf("objects for Prometheus and Grafana (-want,+got):\n%s", diff)
			}
		})
	}
}

// monitoringValues are values unlike the defaults in every monitoring value.
var monitoringValues = []string{
	"--api-versions", serviceMonitorAPI, "--api-versions", prometheusRuleAPI,
	"--set", "globalManager.metricsMaxJobs=50",
	"--set", "metrics.serviceMonitor.interval=15s",
	"--set", "metrics.serviceMonitor.labels.release=kps",
	"--set", "metrics.prometheusRule.labels.role=alerts",
	"--set", "metrics.prometheusRule.edgeLinkDownMinutes=7",
	"--set", "metrics.prometheusRule.outboxFillRatio=0.5",
	"--set", "metrics.prometheusRule.outboxFillingFor=3m",
	"--set", "metrics.prometheusRule.noLeaderFor=1m",
	"--set", "metrics.prometheusRule.reportsRefusedFor=20m",
	"--set", "metrics.grafanaDashboard.labelKey=grafana.example.com/dashboard",
	"--set", "metrics.grafanaDashboard.labelValue=yes",
	"--set", "metrics.grafanaDashboard.namespace=monitoring",
	"--set", "metrics.grafanaDashboard.annotations.grafana_folder=Nereid",
}

// renderAnywhere renders the chart as release nereid in namespace, its
// objects by kind and name, wherever their namespace.
func renderAnywhere(t *testing.T, namespace string, args ...string) release {
	t.Helper()
	r := release{}
	for _, obj := range framework.ReadManifests(t, framework.RenderRelease(t, "nereid", namespace, args...)) {
		r[obj.GetKind()+"/"+obj.GetName()] = obj
	}
	return r
}

func TestChartMonitoringValuesReachTheObjects(t *testing.T) {
	const ns = "ml-edge"
	r := renderAnywhere(t, ns, monitoringValues...)
	var gm appsv1.Deployment
	r.get(t, "Deployment/nereid-globalmanager", &gm)
	if got := flags(gm.Spec.Template.Spec.Containers[0])["metrics-max-jobs"]; got != "50" {
		t.Errorf("GlobalManager --metrics-max-jobs=%s, want 50", got)
	}
	checkServiceMonitor(t, r, ns)
	checkPrometheusRule(t, r, ns)
	checkDashboardConfigMap(t, r)
}

// checkServiceMonitor checks that the ServiceMonitor of release r in ns
// scrapes the metrics Service alone, on its metrics port, as the values say.
func checkServiceMonitor(t *testing.T, r release, ns string) {
	t.Helper()
	sm := r["ServiceMonitor/nereid-globalmanager"]
	if sm == nil {
		t.Fatalf("no ServiceMonitor among %v", r.keys())
	}
	if sm.GetNamespace() != ns || sm.GetLabels()["release"] != "kps" {
		t.Errorf("ServiceMonitor in %q with labels %v, want in %s labelled release=kps", sm.GetNamespace(), sm.GetLabels(), ns)
	}
	matchLabels, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	namespaces, _, _ := unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	if diff := cmp.Diff([]string{ns}, namespaces); diff != "" {
		t.Errorf("ServiceMonitor namespaces (-want,+got):\n%s", diff)
	}
	var selected []string
	for _, key := range r.keys() {
		if strings.HasPrefix(key, "Service/") && labels.SelectorFromSet(matchLabels).Matches(labels.Set(r[key].GetLabels())) {
			selected = append(selected, key)
		}
	}
	if diff := cmp.Diff([]string{"Service/nereid-globalmanager-metrics"}, selected); diff != "" {
		t.Fatalf("Services the ServiceMonitor selects (-want,+got):\n%s", diff)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want one", endpoints)
	}
	want := map[string]any{"port": "metrics", "path": "/metrics", "scheme": "http", "interval": "15s", "honorLabels": true}
	if diff := cmp.Diff(want, endpoints[0]); diff != "" {
		t.Errorf("ServiceMonitor endpoint (-want,+got):\n%s", diff)
	}
	var svc corev1.Service
	r.get(t, "Service/nereid-globalmanager-metrics", &svc)
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "metrics" }) {
		t.Errorf("metrics Service ports %+v: none named metrics, which the ServiceMonitor scrapes", svc.Spec.Ports)
	}
}

// alertRule is what the test reads of one alerting rule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// checkPrometheusRule checks that the PrometheusRule of release r in ns
// has each alert, with the thresholds the values set, on the series the
// ServiceMonitor scrapes, and a runbook in docs/operations.md.
func checkPrometheusRule(t *testing.T, r release, ns string) {
	t.Helper()
	pr := r["PrometheusRule/nereid-globalmanager"]
	if pr == nil {
		t.Fatalf("no PrometheusRule among %v", r.keys())
	}
	if pr.GetNamespace() != ns || pr.GetLabels()["role"] != "alerts" {
		t.Errorf("PrometheusRule in %q with labels %v, want in %s labelled role=alerts", pr.GetNamespace(), pr.GetLabels(), ns)
	}
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	raw, _ := json.Marshal(groups)
	var parsed []struct {
		Rules []alertRule `json:"rules"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil || len(parsed) != 1 {
		t.Fatalf("PrometheusRule groups %s: %v", raw, err)
	}
	wantFor := map[string]string{"NereidEdgeLinkDown": "7m", "NereidEdgeOutboxFilling": "3m", "NereidNoLeader": "1m", "NereidReportsRefused": "20m"}
	gotFor := map[string]string{}
	anchors := docAnchors(t, "operations.md")
	const series = `{job="nereid-globalmanager-metrics", namespace="ml-edge"}`
	for _, rule := range parsed[0].Rules {
		gotFor[rule.Alert] = rule.For
		if !strings.Contains(rule.Expr, series) {
			t.Errorf("%s: expression %q selects other series than the ServiceMonitor's %s", rule.Alert, rule.Expr, series)
		}
		if rule.Labels["severity"] == "" || rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
			t.Errorf("%s: labels %v, annotations %v: want a severity, a summary and a description", rule.Alert, rule.Labels, rule.Annotations)
		}
		_, anchor, _ := strings.Cut(rule.Annotations["runbook_url"], "/docs/operations.md#")
		if !anchors[anchor] {
			t.Errorf("%s: runbook_url %q: no such section in docs/operations.md", rule.Alert, rule.Annotations["runbook_url"])
		}
	}
	if diff := cmp.Diff(wantFor, gotFor); diff != "" {
		t.Errorf("alerts and their for (-want,+got):\n%s", diff)
	}
	for _, rule := range parsed[0].Rules {
		if rule.Alert == "NereidEdgeOutboxFilling" && !strings.HasSuffix(rule.Expr, "> 0.5") {
			t.Errorf("NereidEdgeOutboxFilling: %q, want the ratio 0.5", rule.Expr)
		}
		if rule.Alert == "NereidEdgeLinkDown" && !strings.Contains(rule.Annotations["description"], "7 minutes") {
			t.Errorf("NereidEdgeLinkDown: description %q, want it to say 7 minutes", rule.Annotations["description"])
		}
		if (rule.Alert == "NereidEdgeLinkDown" || rule.Alert == "NereidEdgeOutboxFilling") && !strings.Contains(rule.Annotations["summary"], "{{ $labels.node }}") {
			t.Errorf("%s: summary %q does not name the node", rule.Alert, rule.Annotations["summary"])
		}
	}
}

// docAnchors are the anchors of the headings of docs/page, as GitHub makes
// them: lower case, spaces as hyphens, other punctuation left out.
func docAnchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	anchors := map[string]bool{}
	for line := range strings.SplitSeq(string(text), "\n") {
		if heading := strings.TrimLeft(line, "#"); heading != line && strings.HasPrefix(heading, " ") {
			anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")] = true
		}
	}
	return anchors
}

// checkDashboardConfigMap checks that the dashboard's ConfigMap carries the
// chart's dashboards/nereid.json where and as the values say.
func checkDashboardConfigMap(t *testing.T, r release) {
	t.Helper()
	var cm corev1.ConfigMap
	r.get(t, "ConfigMap/nereid-dashboard", &cm)
	if cm.Namespace != "monitoring" || cm.Labels["grafana.example.com/dashboard"] != "yes" || cm.Annotations["grafana_folder"] != "Nereid" {
		t.Errorf("dashboard ConfigMap in %q, labels %v, annotations %v: want in monitoring, labelled grafana.example.com/dashboard=yes, annotated grafana_folder=Nereid",
			cm.Namespace, cm.Labels, cm.Annotations)
	}
	file, err := os.ReadFile(filepath.Join(framework.ChartDir(), "dashboards", "nereid.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := json.Unmarshal(file, &want); err != nil {
		t.Fatalf("dashboards/nereid.json: %v", err)
	}
	if err := json.Unmarshal([]byte(cm.Data["nereid.json"]), &got); err != nil {
		t.Fatalf("the ConfigMap's nereid.json: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the ConfigMap's dashboard (-file,+configmap):\n%s", diff)
	}
}
