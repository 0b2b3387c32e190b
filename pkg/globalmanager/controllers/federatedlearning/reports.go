package federatedlearning

import (
	"context"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// ApplyReport records a training or aggregation worker's report (its round
// and metrics) in the job's status, under the node that forwarded it, by
// common.EdgeReports' rule: idempotent by node, store and report ID, read
// from the API server, written with conflict retries.
func (c *Controller) ApplyReport(ctx context.Context, from edgeproto.Source, r *edgeproto.Report, info *edgeproto.WorkerInfo) error {
	return c.reports.ApplyWorker(ctx, from, r, info, nil)
}
