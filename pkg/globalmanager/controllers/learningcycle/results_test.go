package learningcycle

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

func TestReportedPathsStayWithinTheOutputDir(t *testing.T) {
	for _, tc := range []struct {
		url, outputDir string
		ok             bool
	}{
		{"/output/round-1/train/model.pb", "/output", true},
		{"/output/round-1/train/model.pb", "/output/", true},
		{"/output", "/output", true}, // a folder: itself mounted
		{"/output/../etc/shadow", "/output", false},
		{"/outputs/model.pb", "/output", false},
		{"/etc/kubernetes", "/output", false},
		{"s3://bucket/out/round-1/model.pb", "s3://bucket/out", true},
		{"/models/m.pb", "s3://bucket/out", false},
		{"/output/" + strings.Repeat("a", MaxReportedURLBytes), "/output", false},
		// A path that looks like a file has its parent mounted.
		{"/data/job.v1", "/data/job.v1", false},
		{"/data/job.v1/.", "/data/job.v1", false},
		{"/data/job.v1/round-1/train/model.pb", "/data/job.v1", true},
		{"/data/job.v1/model.pb", "/data/job.v1", true},
		{"/output/model.pb", "/output", true},
		// The node's root is no outputDir to mount things from.
		{"/etc/kubernetes", "/", false},
		{"/etc/kubernetes", "//.", false},
		{"s3://bucket/" + strings.Repeat("k", 1024), "s3://bucket", true},
	} {
		if why := reportedPath("model url", tc.url, tc.outputDir); (why == "") != tc.ok {
			t.Errorf("reportedPath(%.60q, %q) = %q, want taken: %v", tc.url, tc.outputDir, why, tc.ok)
		}
	}
	many := make([]sednav1.RoundModel, MaxRoundModels+1)
	for i := range many {
		many[i].URL = fmt.Sprintf("/output/round-1/train/task-%d.pkl", i)
	}
	if why := checkModels(many, "/output"); why == "" {
		t.Errorf("%d models taken, want at most %d", len(many), MaxRoundModels)
	}
	if why := checkModels(many[:MaxRoundModels], "/output"); why != "" {
		t.Errorf("%d models refused: %s", MaxRoundModels, why)
	}
}

// An eval worker's metrics go into the round's status bounded, as an edge
// node's do.
func TestRoundMetricsAreBounded(t *testing.T) {
	metrics := map[string]json.RawMessage{}
	for i := range 1000 {
		metrics[fmt.Sprintf("%s-%04d", strings.Repeat("k", 300), i)] = json.RawMessage(`"` + strings.Repeat("v", 1000) + `"`)
	}
	got := FlattenMetrics(metrics)
	if len(got) != sednav1.MaxEdgeNodeMetrics+1 || got[len(got)-1].Key != sednav1.DroppedMetricsKey {
		t.Fatalf("%d metrics, last %q; want %d and the count of those dropped", len(got), got[len(got)-1].Key, sednav1.MaxEdgeNodeMetrics+1)
	}
	for _, m := range got {
		if len(m.Key) > sednav1.MaxMetricKeyBytes || len(m.Value) > sednav1.MaxMetricValueBytes {
			t.Errorf("metric of %d+%d bytes", len(m.Key), len(m.Value))
		}
	}
	if got := FlattenMetrics(map[string]json.RawMessage{"precision": json.RawMessage(`[0.9, 0.8]`)}); len(got) != 1 || got[0].Value != "[0.9,0.8]" {
		t.Errorf("FlattenMetrics = %v", got)
	}
}
