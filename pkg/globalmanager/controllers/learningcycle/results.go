package learningcycle

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// Result is one object of a worker's results, as Sedna's workers write it:
// {"format":"pb","url":"/output/round-1/train/model.pb","metrics":{…}}.
type Result struct {
	// URL of the model; empty when the result has none (or not as a string).
	URL    string
	Format string
	// Metrics are the result's metrics, each as written.
	Metrics map[string]json.RawMessage
	// Fields are all of the result's fields, for what a kind reads beyond
	// the above (a model id, its classes).
	Fields map[string]json.RawMessage
}

// ParseResult decodes one result; ok is false for anything but a JSON object.
func ParseResult(raw json.RawMessage) (r Result, ok bool) {
	if json.Unmarshal(raw, &r.Fields) != nil || r.Fields == nil {
		return Result{}, false
	}
	r.URL = r.String("url")
	r.Format = r.String("format")
	_ = json.Unmarshal(r.Fields["metrics"], &r.Metrics)
	return r, true
}

// String is the string field of that name, or "".
func (r Result) String(field string) string {
	var s string
	_ = json.Unmarshal(r.Fields[field], &s)
	return s
}

// Strings is the list-of-strings field of that name, or nil.
func (r Result) Strings(field string) []string {
	var l []string
	_ = json.Unmarshal(r.Fields[field], &l)
	return l
}

// trainedModels are the models of a train worker's results: those with a url.
func trainedModels(results []json.RawMessage) []sednav1.RoundModel {
	var models []sednav1.RoundModel
	for _, raw := range results {
		if r, ok := ParseResult(raw); ok && r.URL != "" {
			models = append(models, sednav1.RoundModel{URL: r.URL, Format: r.Format})
		}
	}
	return models
}

// FlattenMetrics turns a result's metrics into status metrics, sorted by
// key: strings and numbers as text, lists and objects as compact JSON.
func FlattenMetrics(metrics map[string]json.RawMessage) []sednav1.Metric {
	out := make([]sednav1.Metric, 0, len(metrics))
	for k, raw := range metrics {
		out = append(out, sednav1.Metric{Key: k, Value: common.MetricText(raw)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	if len(out) == 0 {
		return nil
	}
	return out
}

// ownerInfo is what the cycle reads of a report's ownerInfo.
type ownerInfo map[string]json.RawMessage

func parseOwnerInfo(raw json.RawMessage) ownerInfo {
	var o ownerInfo
	_ = json.Unmarshal(raw, &o)
	return o
}

// Int is the numeric field of that name, if it holds a number.
func (o ownerInfo) Int(field string) (int32, bool) {
	raw, ok := o[field]
	if !ok {
		return 0, false
	}
	f, ok := Number(raw)
	return int32(f), ok
}

func (o ownerInfo) String(field string) string {
	var s string
	_ = json.Unmarshal(o[field], &s)
	return s
}

// Time is the RFC 3339 time of that name, or def.
func (o ownerInfo) Time(field string, def time.Time) metav1.Time {
	if t, err := time.Parse(time.RFC3339, o.String(field)); err == nil {
		return metav1.NewTime(t)
	}
	return metav1.NewTime(def)
}

// OwnerInfoInt reads a numeric field of a report's ownerInfo.
func OwnerInfoInt(raw json.RawMessage, field string) (int32, bool) {
	return parseOwnerInfo(raw).Int(field)
}

// failureReason is why a worker says it failed: ownerInfo.reason, else the
// reasons in its results, else its results as text, else a plain sentence.
func failureReason(ownerInfoRaw json.RawMessage, results []json.RawMessage) string {
	if r := strings.TrimSpace(parseOwnerInfo(ownerInfoRaw).String("reason")); r != "" {
		return clip(r, 256)
	}
	var reasons, texts []string
	for _, raw := range results {
		if r, ok := ParseResult(raw); ok {
			if reason := strings.TrimSpace(r.String("reason")); reason != "" {
				reasons = append(reasons, reason)
			}
		}
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			texts = append(texts, buf.String())
		}
	}
	switch {
	case len(reasons) > 0:
		return clip(strings.Join(reasons, "; "), 256)
	case len(texts) > 0:
		return clip(strings.Join(texts, ", "), 256)
	}
	return "worker reported failed"
}
