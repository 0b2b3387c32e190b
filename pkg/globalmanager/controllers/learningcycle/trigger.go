package learningcycle

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// deltaSuffix marks a derived metric: the new model's value of the base
// metric minus the deployed model's.
const deltaSuffix = "_delta"

// EvaluateCondition decides a deploy trigger on an eval worker's results (one
// per model of MODEL_URLS: the new model first, then the deployed one). The
// metric is read from results[0].metrics; when it is absent and its name ends
// in _delta, it is the difference of the base metric between results[0] and
// results[1] (numbers, or lists of equal length element by element). A number
// fires when `value operator threshold` holds. A list (per-class values) fires
// only when it is not empty and every element satisfies the comparison: a
// deploy replaces a working model, so the new one must be better for every
// class, not on average. A metric that is missing or not numeric does not
// fire. Numbers may be JSON numbers or numeric strings. The sentence says what
// was compared and the decision, for the round's message and the event.
func EvaluateCondition(cond sednav1.TriggerCondition, results []json.RawMessage) (fire bool, sentence string) {
	if _, err := cond.Holds(0); err != nil {
		return false, fmt.Sprintf("operator %q is not one of >, <, >=, <=, =: not deploying", cond.Operator)
	}
	v, why := metricOf(cond.Metric, results)
	if why != "" {
		return false, why + ": not deploying"
	}
	threshold := formatNumber(cond.Threshold)
	if !v.isList {
		if holds, _ := cond.Holds(v.scalar); holds {
			return true, fmt.Sprintf("%s %s %s %s: deploying", cond.Metric, v, cond.Operator, threshold)
		}
		return false, fmt.Sprintf("%s %s is not %s %s: not deploying", cond.Metric, v, cond.Operator, threshold)
	}
	if len(v.list) == 0 {
		return false, fmt.Sprintf("%s is an empty list: not deploying", cond.Metric)
	}
	for i, x := range v.list {
		if holds, _ := cond.Holds(x); !holds {
			return false, fmt.Sprintf("%s %s is not %s %s for element %d: not deploying", cond.Metric, v, cond.Operator, threshold, i)
		}
	}
	return true, fmt.Sprintf("%s %s %s %s for every element: deploying", cond.Metric, v, cond.Operator, threshold)
}

// metricOf is the value of metric in the results, derived for a _delta
// metric the results do not carry; why says why there is none.
func metricOf(metric string, results []json.RawMessage) (v value, why string) {
	raw, found := resultMetric(results, 0, metric)
	if found {
		if v, ok := parseValue(raw); ok {
			return v, ""
		}
		return v, fmt.Sprintf("%s %s is not a number or a list of numbers", metric, clip(string(raw), 64))
	}
	base, isDelta := strings.CutSuffix(metric, deltaSuffix)
	if !isDelta || base == "" {
		return v, fmt.Sprintf("%s is not in the evaluation results", metric)
	}
	newRaw, okNew := resultMetric(results, 0, base)
	oldRaw, okOld := resultMetric(results, 1, base)
	if !okNew || !okOld {
		return v, fmt.Sprintf("%s is not in the evaluation results, nor is %s of both the new and the deployed model", metric, base)
	}
	newV, ok1 := parseValue(newRaw)
	oldV, ok2 := parseValue(oldRaw)
	if !ok1 || !ok2 {
		return v, fmt.Sprintf("%s of the new model (%s) or of the deployed one (%s) is not a number or a list of numbers", base, clip(string(newRaw), 64), clip(string(oldRaw), 64))
	}
	return delta(base, newV, oldV)
}

// delta is newV - oldV, rounded to 12 decimals so that 0.3-0.2 compares as
// 0.1 does.
func delta(base string, newV, oldV value) (value, string) {
	round := func(f float64) float64 { return math.Round(f*1e12) / 1e12 }
	switch {
	case !newV.isList && !oldV.isList:
		return value{scalar: round(newV.scalar - oldV.scalar)}, ""
	case newV.isList && oldV.isList && len(newV.list) == len(oldV.list):
		d := value{isList: true, list: make([]float64, len(newV.list))}
		for i := range newV.list {
			d.list[i] = round(newV.list[i] - oldV.list[i])
		}
		return d, ""
	}
	return value{}, fmt.Sprintf("%s of the new model %s and of the deployed one %s cannot be subtracted", base, newV, oldV)
}

// resultMetric is results[i].metrics[name], as written.
func resultMetric(results []json.RawMessage, i int, name string) (json.RawMessage, bool) {
	if i >= len(results) {
		return nil, false
	}
	r, ok := ParseResult(results[i])
	if !ok {
		return nil, false
	}
	raw, ok := r.Metrics[name]
	return raw, ok && string(raw) != "null"
}

// value is a metric's number, or its list of numbers (one per class).
type value struct {
	isList bool
	scalar float64
	list   []float64
}

func (v value) String() string {
	if !v.isList {
		return formatNumber(v.scalar)
	}
	parts := make([]string, len(v.list))
	for i, x := range v.list {
		parts[i] = formatNumber(x)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// parseValue reads a number, a numeric string, a list of either, or a string
// holding a JSON list of them (as status metrics keep lists).
func parseValue(raw json.RawMessage) (value, bool) {
	if f, ok := Number(raw); ok {
		return value{scalar: f}, true
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil || json.Unmarshal([]byte(s), &items) != nil {
			return value{}, false
		}
	}
	v := value{isList: true, list: make([]float64, 0, len(items))}
	for _, it := range items {
		f, ok := Number(it)
		if !ok {
			return value{}, false
		}
		v.list = append(v.list, f)
	}
	return v, true
}

// Number reads a JSON number, or a string holding one, as workers send both.
func Number(raw json.RawMessage) (float64, bool) {
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// formatNumber writes a number shortly: 6 significant digits, integers whole.
func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}

// clip shortens text quoted in a message to limit characters.
func clip(s string, limit int) string {
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit]) + "…"
}
