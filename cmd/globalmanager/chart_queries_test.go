package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nereid-ml/nereid/test/framework"
)

// scrapeLabels are the labels Prometheus gives every series the chart's
// ServiceMonitor scrapes, next to the metric's own (which win, honorLabels).
var scrapeLabels = []string{"job", "instance", "namespace", "pod", "service", "endpoint", "container"}

// promQuery is what a PromQL expression reads: the metrics it selects, each
// with the labels its selector matches on, and the labels it groups or
// matches by (by, without, on, ignoring, group_left, group_right).
type promQuery struct {
	selectors []promSelector
	grouping  []string
}

type promSelector struct {
	metric string
	labels []string
}

// promKeywords are the PromQL words that are no metric name: operators
// and the aggregations, which may be followed by by or without rather than
// by their parentheses.
var promKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// grouping words take a list of label names in parentheses.
var groupingWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

var (
	promIdent    = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promNumber   = regexp.MustCompile(`^[0-9][0-9.eE+\-]*`)
	promString   = regexp.MustCompile(`^("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`)")
	grafanaVar   = regexp.MustCompile(`^\$(\{[^}]*\}|[a-zA-Z0-9_]+)`)
	promMatchOp  = regexp.MustCompile(`^(=~|!~|!=|=)`)
	promLabelSet = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*`)
)

// parsePromQL finds what expr reads. It knows PromQL's lexical shapes, not
// its grammar: enough to find every metric name, selector and label list
// in the chart's queries (Grafana's $variables included), and to refuse
// what it cannot read.
func parsePromQL(expr string) (promQuery, error) {
	var q promQuery
	s := expr
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		switch {
		case s[0] == '#': // a comment, to the end of the line
			_, s, _ = strings.Cut(s, "\n")
		case promString.MatchString(s):
			s = s[len(promString.FindString(s)):]
		case grafanaVar.MatchString(s):
			s = s[len(grafanaVar.FindString(s)):]
		case s[0] == '[': // a range or subquery: durations and variables
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return q, fmt.Errorf("%q: an unclosed [", expr)
			}
			s = s[end+1:]
		case s[0] == '{': // a selector without a metric name
			sel, rest, err := parseMatchers(s)
			if err != nil {
				return q, fmt.Errorf("%q: %w", expr, err)
			}
			q.selectors, s = append(q.selectors, sel), rest
		case promNumber.MatchString(s):
			s = s[len(promNumber.FindString(s)):]
		case promIdent.MatchString(s):
			word := promIdent.FindString(s)
			s = strings.TrimSpace(s[len(word):])
			var err error
			if s, err = q.word(word, s); err != nil {
				return q, fmt.Errorf("%q: %w", expr, err)
			}
		case strings.ContainsRune("(),+-*/%^=!<>", rune(s[0])):
			s = s[1:]
		default:
			return q, fmt.Errorf("%q: cannot read %q", expr, s)
		}
	}
	return q, nil
}

// word takes in what a word of a query says, rest being what follows it;
// it returns what follows what it took.
func (q *promQuery) word(word, rest string) (string, error) {
	lower := strings.ToLower(word)
	switch {
	case groupingWords[lower]:
		if !strings.HasPrefix(rest, "(") {
			return rest, nil // group_left without labels
		}
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return rest, fmt.Errorf("an unclosed %s (", word)
		}
		for l := range strings.SplitSeq(rest[1:end], ",") {
			if l = strings.TrimSpace(l); l != "" {
				q.grouping = append(q.grouping, l)
			}
		}
		return rest[end+1:], nil
	case promKeywords[lower]:
		return rest, nil
	case strings.HasPrefix(rest, "("): // a function
		return rest, nil
	case strings.HasPrefix(rest, "{"):
		sel, after, err := parseMatchers(rest)
		if err != nil {
			return rest, err
		}
		sel.metric = word
		q.selectors = append(q.selectors, sel)
		return after, nil
	}
	q.selectors = append(q.selectors, promSelector{metric: word})
	return rest, nil
}

// parseMatchers reads the label matchers {l="v", ...} at the start of s and
// returns them and what follows; a matcher of __name__ names the metric.
func parseMatchers(s string) (promSelector, string, error) {
	var sel promSelector
	s = s[1:]
	for {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if strings.HasPrefix(s, "}") {
			return sel, s[1:], nil
		}
		m := promLabelSet.FindStringSubmatch(s)
		if m == nil {
			return sel, s, fmt.Errorf("a label matcher expected at %q", s)
		}
		s = s[len(m[0]):]
		op := promMatchOp.FindString(s)
		if op == "" {
			return sel, s, fmt.Errorf("a match operator expected after %s", m[1])
		}
		s = strings.TrimLeftFunc(s[len(op):], unicode.IsSpace)
		value := promString.FindString(s)
		if value == "" {
			return sel, s, fmt.Errorf("a quoted value expected after %s%s", m[1], op)
		}
		s = strings.TrimLeftFunc(s[len(value):], unicode.IsSpace)
		if m[1] == "__name__" && op == "=" {
			sel.metric = strings.Trim(value, "\"'`")
		} else {
			sel.labels = append(sel.labels, m[1])
		}
		s = strings.TrimPrefix(s, ",")
	}
}

// series is what a query may read of metric name in ms: a histogram's or
// summary's _bucket, _sum and _count as well as its name. ok is false for
// no such series.
func (ms exported) series(name string) (labels []string, ok bool) {
	if m, found := ms[name]; found {
		if m.kind == "summary" {
			return append(slices.Clone(m.labels), "quantile"), true
		}
		return m.labels, m.kind == "" // a histogram's own name has no series
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, cut := strings.CutSuffix(name, suffix)
		m, found := ms[base]
		if !cut || !found || m.kind == "" || (suffix == "_bucket" && m.kind != "histogram") {
			continue
		}
		if suffix == "_bucket" {
			return append(slices.Clone(m.labels), "le"), true
		}
		return m.labels, true
	}
	return nil, false
}

// check says what in query q, named what, reads no metric or label that
// ms exports; legend is a Grafana legend whose {{label}}s must be labels the
// query has.
func (ms exported) check(what, expr, legend string) []string {
	q, err := parsePromQL(expr)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", what, err)}
	}
	var problems []string
	known := map[string]bool{}
	for _, l := range scrapeLabels {
		known[l] = true
	}
	for _, sel := range q.selectors {
		if sel.metric == "" {
			problems = append(problems, fmt.Sprintf("%s: a selector without a metric name in %q", what, expr))
			continue
		}
		labels, ok := ms.series(sel.metric)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: no metric %s in %q", what, sel.metric, expr))
			continue
		}
		own := map[string]bool{}
		for _, l := range labels {
			own[l], known[l] = true, true
		}
		for _, l := range sel.labels {
			if !own[l] && !slices.Contains(scrapeLabels, l) {
				problems = append(problems, fmt.Sprintf("%s: %s has no label %s (it has %v) in %q", what, sel.metric, l, labels, expr))
			}
		}
	}
	for _, l := range q.grouping {
		if !known[l] {
			problems = append(problems, fmt.Sprintf("%s: no metric of %q has the label %s it groups or matches by", what, expr, l))
		}
	}
	for _, m := range legendLabel.FindAllStringSubmatch(legend, -1) {
		if !known[m[1]] {
			problems = append(problems, fmt.Sprintf("%s: legend %q names %s, no label of %q", what, legend, m[1], expr))
		}
	}
	return problems
}

var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// The checker itself refuses a metric, a label, a grouping or a legend
// that the GlobalManager does not export, and takes a histogram's series.
func TestChartQueryCheckRefusesWhatIsNotExported(t *testing.T) {
	ms := globalManagerMetrics(t)
	for name, tc := range map[string]struct {
		expr, legend string
		wantProblem  string // "" for none
	}{
		"a gauge by its label":       {expr: `max by (node) (nereid_edgehub_node_connected{job="$job", instance=~"$instance"}) == 0`, legend: "{{node}}"},
		"a histogram's buckets":      {expr: `histogram_quantile(0.99, sum by (controller, le) (rate(nereid_controller_sync_duration_seconds_bucket{job="x"}[$__rate_interval])))`},
		"a counter's rate":           {expr: `sum(rate(nereid_edgehub_reports_refused_total[5m])) > 0`},
		"a misspelt metric":          {expr: `max(nereid_edgehub_node_conected{job="x"})`, wantProblem: "no metric nereid_edgehub_node_conected"},
		"a label it does not have":   {expr: `nereid_edgehub_node_connected{nod="a"}`, wantProblem: "has no label nod"},
		"a grouping by no label":     {expr: `sum by (nodes) (nereid_edgehub_node_connected)`, wantProblem: "the label nodes it groups"},
		"a legend of no label":       {expr: `nereid_job_round`, legend: "{{metric}}", wantProblem: "names metric"},
		"buckets of a counter":       {expr: `nereid_controller_syncs_total_bucket`, wantProblem: "no metric nereid_controller_syncs_total_bucket"},
		"a histogram's bare name":    {expr: `nereid_controller_sync_duration_seconds`, wantProblem: "no metric nereid_controller_sync_duration_seconds"},
		"a metric by __name__":       {expr: `{__name__="nereid_job_rounds"}`, wantProblem: "no metric nereid_job_rounds"},
		"no metric name":             {expr: `{job="x"}`, wantProblem: "without a metric name"},
		"a metric of another scrape": {expr: `up{job="x"} == 0`, wantProblem: "no metric up"},
	} {
		t.Run(name, func(t *testing.T) {
			problems := ms.check(name, tc.expr, tc.legend)
			switch {
			case tc.wantProblem == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case tc.wantProblem != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.wantProblem) }):
				t.Errorf("problems %q, want one saying %q", problems, tc.wantProblem)
			}
		})
	}
}

// Every query of the chart's alerts and Grafana dashboard (its panels'
// expressions and legends, its variables) reads metrics the GlobalManager
// exports, by labels they have: a metric renamed, or a query misspelt,
// fails here rather than in an empty panel or an alert that never fires.
func TestChartQueriesReadMetricsTheGlobalManagerExports(t *testing.T) {
	ms := globalManagerMetrics(t)
	objs := framework.ReadManifests(t, framework.RenderChart(t, "nereid-system",
		"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"))
	var problems []string
	var alerts, panels int
	for _, obj := range objs {
		switch obj.GetKind() {
		case "PrometheusRule":
			p, n := checkRules(t, ms, obj)
			problems, alerts = append(problems, p...), n
		case "ConfigMap":
			if data, ok, _ := unstructured.NestedString(obj.Object, "data", "nereid.json"); ok {
				p, n := checkDashboard(t, ms, data)
				problems, panels = append(problems, p...), n
			}
		}
	}
	if alerts < 4 || panels < 10 {
		t.Errorf("checked %d alerts and %d dashboard queries: the chart's PrometheusRule or dashboard was not found", alerts, panels)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// checkRules checks the expressions of a PrometheusRule's rules; it returns
// the problems and how many rules it checked.
func checkRules(t *testing.T, ms exported, obj *unstructured.Unstructured) ([]string, int) {
	t.Helper()
	groups, _, err := unstructured.NestedSlice(obj.Object, "spec", "groups")
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	n := 0
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			rule := r.(map[string]any)
			expr, _ := rule["expr"].(string)
			problems = append(problems, ms.check(fmt.Sprintf("alert %v", rule["alert"]), expr, "")...)
			n++
		}
	}
	return problems, n
}

// dashboard is what the test reads of a Grafana dashboard.
type dashboard struct {
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"` // a collapsed row's
}

// labelValues is a Grafana variable's query label_values(selector, label).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// checkDashboard checks the queries of the dashboard JSON data; it returns
// the problems and how many queries it checked.
func checkDashboard(t *testing.T, ms exported, data string) ([]string, int) {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		t.Fatalf("the dashboard is no JSON: %v", err)
	}
	var problems []string
	n := 0
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			for _, target := range p.Targets {
				problems = append(problems, ms.check(fmt.Sprintf("panel %q", p.Title), target.Expr, target.LegendFormat)...)
				n++
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		query, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			query, _ = m["query"].(string)
		}
		lv := labelValues.FindStringSubmatch(query)
		if lv == nil {
			problems = append(problems, fmt.Sprintf("variable %s: %q is no label_values(selector, label)", v.Name, query))
			continue
		}
		problems = append(problems, ms.check("variable "+v.Name, lv[1], "{{"+lv[2]+"}}")...)
		n++
	}
	return problems, n
}
