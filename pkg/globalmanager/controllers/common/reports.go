package common

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// RecordEdgeReport folds a worker's report, forwarded by node's
// LocalController, into what the status says the cloud last heard from that
// node. It returns applied false, and nodes unchanged, for a report whose id is
// not past the last one applied for the node: the LocalController resends until
// acknowledged, so a report can arrive twice and must count once.
func RecordEdgeReport(nodes []sednav1.EdgeNodeStatus, node string, r *edgeproto.Report, info *edgeproto.WorkerInfo, now metav1.Time) ([]sednav1.EdgeNodeStatus, bool) {
	i := 0
	for i < len(nodes) && nodes[i].Name != node {
		i++
	}
	if i < len(nodes) && int64(r.ID) <= nodes[i].LastReportID {
		return nodes, false
	}
	var applied int64
	if i < len(nodes) {
		applied = nodes[i].ReportsApplied
	}
	entry := sednav1.EdgeNodeStatus{
		Name:           node,
		LastHeardTime:  now,
		LastReportID:   int64(r.ID),
		ReportsApplied: applied + 1,
		Worker:         r.Worker,
		Stage:          string(info.Kind),
		State:          string(info.Status),
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

// ReportMetrics flattens the scalar fields of a report's ownerInfo and of its
// results into metrics, sorted by key; a key in several results is numbered
// (key, key[1], …). Nested objects are kept as JSON text.
func ReportMetrics(info *edgeproto.WorkerInfo) []sednav1.Metric {
	var out []sednav1.Metric
	seen := map[string]int{}
	add := func(raw json.RawMessage) {
		var fields map[string]json.RawMessage
		if len(raw) == 0 || json.Unmarshal(raw, &fields) != nil {
			return
		}
		for k, v := range fields {
			key := k
			if n := seen[k]; n > 0 {
				key = fmt.Sprintf("%s[%d]", k, n)
			}
			seen[k]++
			out = append(out, sednav1.Metric{Key: key, Value: MetricText(v)})
		}
	}
	add(info.OwnerInfo)
	for _, r := range info.Results {
		add(r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	return out
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
