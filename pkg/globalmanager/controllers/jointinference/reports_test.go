package jointinference

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

func TestInferenceMetricsSumTheEdgeNodes(t *testing.T) {
	nodes := []sednav1.EdgeNodeStatus{
		{Name: "edge-0", Stage: "inference", Metrics: []sednav1.Metric{{Key: "hardExampleNumber", Value: "10"}, {Key: "inferenceNumber", Value: "100"}}},
		{Name: "edge-1", Stage: "inference", Metrics: []sednav1.Metric{{Key: "hardExampleNumber", Value: "30"}, {Key: "inferenceNumber", Value: "100"}}},
		{Name: "edge-2", Stage: "train", Metrics: []sednav1.Metric{{Key: "inferenceNumber", Value: "999"}}},
	}
	want := []sednav1.Metric{{Key: "hardExampleNumber", Value: "40"}, {Key: "inferenceNumber", Value: "200"}, {Key: "uploadCloudRatio", Value: "0.2000"}}
	if diff := cmp.Diff(want, inferenceMetrics(nodes)); diff != "" {
		t.Errorf("metrics (-want,+got):\n%s", diff)
	}
	if got := inferenceMetrics(nil); got != nil {
		t.Errorf("metrics with no reports: %v", got)
	}
}
