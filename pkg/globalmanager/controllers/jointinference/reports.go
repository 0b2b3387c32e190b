package jointinference

import (
	"context"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
)

// Counters an edge inference worker reports in its ownerInfo, summed over the
// edge nodes into status.metrics.
const (
	metricInferences    = "inferenceNumber"
	metricHardExamples  = "hardExampleNumber"
	metricUploadedRatio = "uploadCloudRatio"
)

// ApplyReports records edge workers' inference counts in the service's
// status: per node under edgeNodes, and summed over the nodes in metrics
// (uploadCloudRatio = hard examples / inferences). Idempotent by node, store
// and report ID; the reports about one service go in one write.
func (c *Controller) ApplyReports(ctx context.Context, from edgeproto.Source, reports []edgeproto.WorkerReport) []error {
	return c.reports.ApplyWorkers(ctx, from, reports, func(ji *sednav1.JointInferenceService, _ edgeproto.WorkerReport, _ metav1.Time) ([]common.Event, error) {
		ji.Status.Metrics = inferenceMetrics(ji.Status.EdgeNodes)
		return nil, nil
	})
}

// inferenceMetrics sums the edge nodes' last inference counts.
func inferenceMetrics(nodes []sednav1.EdgeNodeStatus) []sednav1.Metric {
	var inferences, hard float64
	reported := false
	for _, n := range nodes {
		if n.Stage != string(edgeproto.StageInference) {
			continue
		}
		i, ok1 := edgestatus.MetricValue(n.Metrics, metricInferences)
		h, ok2 := edgestatus.MetricValue(n.Metrics, metricHardExamples)
		if ok1 || ok2 {
			reported = true
		}
		inferences += i
		hard += h
	}
	if !reported {
		return nil
	}
	ratio := 0.0
	if inferences > 0 {
		ratio = hard / inferences
	}
	format := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	return []sednav1.Metric{
		{Key: metricHardExamples, Value: format(hard)},
		{Key: metricInferences, Value: format(inferences)},
		{Key: metricUploadedRatio, Value: strconv.FormatFloat(ratio, 'f', 4, 64)},
	}
}
