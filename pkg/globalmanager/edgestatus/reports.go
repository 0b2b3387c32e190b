package edgestatus

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// RecordEdgeReport folds a worker's report, forwarded by the LocalController
// of from.Node, into what the status says the cloud last heard from that node.
// It returns applied false, and nodes unchanged, for a report already applied:
// the LocalController resends until acknowledged, so a report can arrive twice
// and must count once. Report IDs count per store (from.Store), so a report is
// known by its node, store and ID: a wiped or replaced store's reports apply
// from ID 1, while an earlier store's resent reports are still recognised, for
// the last sednav1.MaxPreviousStores stores of the node.
func RecordEdgeReport(nodes []sednav1.EdgeNodeStatus, from edgeproto.Source, r *edgeproto.Report, info *edgeproto.WorkerInfo, now metav1.Time) ([]sednav1.EdgeNodeStatus, bool) {
	i := 0
	for i < len(nodes) && nodes[i].Name != from.Node {
		i++
	}
	var last sednav1.EdgeNodeStatus
	if i < len(nodes) {
		last = nodes[i]
		if applied(last, from.Store, int64(r.ID)) {
			return nodes, false
		}
	}
	entry := sednav1.EdgeNodeStatus{
		Name:           from.Node,
		LastHeardTime:  now,
		Store:          from.Store,
		LastReportID:   int64(r.ID),
		PreviousStores: previousStores(last, from.Store),
		ReportsApplied: last.ReportsApplied + 1,
		Worker:         common.ClipText(r.Worker, sednav1.MaxWorkerNameBytes),
		Stage:          common.ClipText(string(info.Kind), sednav1.MaxStageBytes),
		State:          common.ClipText(string(info.Status), sednav1.MaxStageBytes),
		Round:          reportRound(info),
		Metrics:        ReportMetrics(info),
	}
	out := append([]sednav1.EdgeNodeStatus(nil), nodes...)
	if i < len(out) {
		out[i] = entry
	} else {
		out = append(out, entry)
		sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	}
	return out, true
}

// The ownerInfo keys of a report's round: Sedna's federated learning
// workers write currentRound, the learning cycles' LocalController round.
var roundKeys = []string{"currentRound", "round"}

// reportRound is the round a report's ownerInfo names under one of
// roundKeys, as a number or a numeric string; 0 when it names none, or one
// that is not a positive whole number that fits an int32.
func reportRound(info *edgeproto.WorkerInfo) int32 {
	var fields map[string]json.RawMessage
	if len(info.OwnerInfo) == 0 || json.Unmarshal(info.OwnerInfo, &fields) != nil {
		return 0
	}
	for _, k := range roundKeys {
		v, ok := fields[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(MetricText(v), 10, 32)
		if err != nil || n < 0 {
			return 0
		}
		return int32(n)
	}
	return 0
}

// applied says whether the node's entry e counts the report id of store.
func applied(e sednav1.EdgeNodeStatus, store string, id int64) bool {
	// An entry from before stores had identities is taken to be the
	// reporting store's: it is most likely the same file, its IDs going on,
	// and taking it for another would apply its resent reports twice.
	if e.Store == store || e.Store == "" {
		return id <= e.LastReportID
	}
	for _, p := range e.PreviousStores {
		if p.Store == store {
			return id <= p.LastReportID
		}
	}
	return false // a store new to the node: its IDs start afresh
}

// previousStores is the list of earlier stores once store reports to the
// node's entry e: e's store goes first when store replaces it, and store
// leaves the list if it was there (it is current again).
func previousStores(e sednav1.EdgeNodeStatus, store string) []sednav1.StoreReportID {
	var out []sednav1.StoreReportID
	if e.Store != store && e.Store != "" {
		out = append(out, sednav1.StoreReportID{Store: e.Store, LastReportID: e.LastReportID})
	}
	for _, p := range e.PreviousStores {
		if p.Store != store && p.Store != e.Store && len(out) < sednav1.MaxPreviousStores {
			out = append(out, p)
		}
	}
	return out
}

// ReportMetrics flattens the scalar fields of a report's ownerInfo and of its
// results into metrics, sorted by key; a key in several results is numbered
// (key, key[1], …). Nested objects are kept as JSON text.
//
// The list is bounded as sednav1.EdgeNodeStatus documents, since it goes into
// an object's status once per node: keys and values are cut to
// MaxMetricKeyBytes and MaxMetricValueBytes (ending in TruncatedSuffix), and
// of more than MaxEdgeNodeMetrics metrics the first by key are kept, followed
// by DroppedMetricsKey with the number of the others.
func ReportMetrics(info *edgeproto.WorkerInfo) []sednav1.Metric {
	var out []sednav1.Metric
	seen := map[string]int{}
	add := func(raw json.RawMessage) {
		var fields map[string]json.RawMessage
		if len(raw) == 0 || json.Unmarshal(raw, &fields) != nil {
			return
		}
		for k, v := range fields {
			suffix := ""
			if n := seen[k]; n > 0 {
				suffix = fmt.Sprintf("[%d]", n)
			}
			seen[k]++
			out = append(out, boundedMetric(k, suffix, v))
		}
	}
	add(info.OwnerInfo)
	for _, r := range info.Results {
		add(r)
	}
	return boundMetrics(out)
}

// boundMetrics sorts metrics by key, and of more than MaxEdgeNodeMetrics
// keeps the first, followed by DroppedMetricsKey with the number of the
// others.
func boundMetrics(out []sednav1.Metric) []sednav1.Metric {
	// By value too, so that keys cut to the same text keep one order.
	slices.SortFunc(out, func(a, b sednav1.Metric) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Value, b.Value))
	})
	if dropped := len(out) - sednav1.MaxEdgeNodeMetrics; dropped > 0 {
		out = append(out[:sednav1.MaxEdgeNodeMetrics:sednav1.MaxEdgeNodeMetrics],
			sednav1.Metric{Key: sednav1.DroppedMetricsKey, Value: strconv.Itoa(dropped)})
	}
	return out
}

// StatusMetrics turns a worker's metrics (a result's "metrics" object) into
// status metrics (strings and numbers as text, lists and objects as compact
// JSON), bounded as ReportMetrics' are: keys and values cut to
// MaxMetricKeyBytes and MaxMetricValueBytes, at most MaxEdgeNodeMetrics of
// them, sorted by key; nil when there are none.
func StatusMetrics(metrics map[string]json.RawMessage) []sednav1.Metric {
	if len(metrics) == 0 {
		return nil
	}
	out := make([]sednav1.Metric, 0, len(metrics))
	for k, v := range metrics {
		out = append(out, boundedMetric(k, "", v))
	}
	return boundMetrics(out)
}

// boundedMetric is the metric of key k (followed by suffix) and value v,
// the key cut to MaxMetricKeyBytes with its suffix and the value's text to
// MaxMetricValueBytes.
func boundedMetric(k, suffix string, v json.RawMessage) sednav1.Metric {
	return sednav1.Metric{Key: common.ClipText(k, sednav1.MaxMetricKeyBytes-len(suffix)) + suffix, Value: common.ClipText(MetricText(v), sednav1.MaxMetricValueBytes)}
}

// MetricText renders a JSON value as a metric value: strings without quotes,
// numbers as written, lists and objects as compact JSON.
func MetricText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) == nil {
		return buf.String()
	}
	return string(v)
}

// MetricValue returns the number a metric holds, if it holds one.
func MetricValue(metrics []sednav1.Metric, key string) (float64, bool) {
	for _, m := range metrics {
		if m.Key == key {
			f, err := strconv.ParseFloat(m.Value, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// LatestMetrics are the metrics of the edge node heard from last: what the
// job's workers reported most recently, whichever node it came from.
func LatestMetrics(nodes []sednav1.EdgeNodeStatus) []sednav1.Metric {
	var latest *sednav1.EdgeNodeStatus
	for i := range nodes {
		if latest == nil || nodes[i].LastHeardTime.After(latest.LastHeardTime.Time) {
			latest = &nodes[i]
		}
	}
	if latest == nil {
		return nil
	}
	return latest.Metrics
}
