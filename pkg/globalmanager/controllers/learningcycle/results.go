package learningcycle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
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

// trainedModels are the models of a train worker's results: those with a
// url.
func trainedModels(results []json.RawMessage) []sednav1.RoundModel {
	var models []sednav1.RoundModel
	for _, raw := range results {
		if r, ok := ParseResult(raw); ok && r.URL != "" {
			models = append(models, sednav1.RoundModel{URL: r.URL, Format: common.ClipText(r.Format, maxFormatBytes)})
		}
	}
	return models
}

// Bounds of what a report puts into a round's status, which the job keeps
// for HistoryLimit rounds: the status of an object is at most about 1.5 MiB
// (etcd's bound), and past it every status write of the job fails.
const (
	// MaxRoundModels bounds the models a round's train stage may report.
	MaxRoundModels = 32
	// MaxReportedURLBytes bounds a path or URL a report names (a node's
	// PATH_MAX; an S3 URL's key alone may be 1,024 bytes).
	MaxReportedURLBytes = 4096
	maxFormatBytes      = 32
)

// reportedPath says why a path or URL a report names (a round's data, a
// trained model) cannot be taken, or "": it is bounded, and a node path
// must be within the job's outputDir, where the round writes, as must the
// folder of it that is mounted (common.HostPathDir: a path that looks like
// a file has its parent mounted), and outputDir must not be the node's root.
// Such a path is mounted, read-write, into the round's next pods, so a
// report must not choose one elsewhere on the node.
func reportedPath(field, url, outputDir string) string {
	switch {
	case len(url) > MaxReportedURLBytes:
		return fmt.Sprintf("%s is longer than %d bytes", field, MaxReportedURLBytes)
	case !common.IsLocalPath(url):
		return ""
	case !common.IsLocalPath(outputDir):
		return fmt.Sprintf("%s %q is a node path, but the job's outputDir %q is not", field, url, outputDir)
	}
	dir := path.Clean(outputDir)
	if dir == "/" {
		return fmt.Sprintf("%s %q is a node path, and the job's outputDir is the node's root", field, url)
	}
	if mounted := common.HostPathDir(url); mounted != dir && !strings.HasPrefix(mounted, dir+"/") {
		return fmt.Sprintf("%s %q is not within the job's outputDir %s", field, url, outputDir)
	}
	return ""
}

// evaluation is what an eval worker's results say of the round: the
// metrics of its first result, and the model that result names when it is
// none of the round's trained models and may be taken (a lifelong eval
// worker reports the knowledge base index it wrote; an incremental one the
// trained model it judged). A model that may not be taken is left out, not
// failed: the metrics are still the round's.
func evaluation(results []json.RawMessage, trained []sednav1.RoundModel, outputDir string) ([]sednav1.Metric, *sednav1.RoundModel) {
	if len(results) == 0 {
		return nil, nil
	}
	res, ok := ParseResult(results[0])
	if !ok {
		return nil, nil
	}
	metrics := edgestatus.StatusMetrics(res.Metrics)
	if res.URL == "" || reportedPath("eval url", res.URL, outputDir) != "" ||
		slices.ContainsFunc(trained, func(m sednav1.RoundModel) bool { return m.URL == res.URL }) {
		return metrics, nil
	}
	return metrics, &sednav1.RoundModel{URL: res.URL, Format: common.ClipText(res.Format, maxFormatBytes)}
}

// checkModels says why a train worker's models cannot be taken, or "".
func checkModels(models []sednav1.RoundModel, outputDir string) string {
	if len(models) > MaxRoundModels {
		return fmt.Sprintf("train worker reported %d models, at most %d", len(models), MaxRoundModels)
	}
	for _, m := range models {
		if why := reportedPath("model url", m.URL, outputDir); why != "" {
			return why
		}
	}
	return ""
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
