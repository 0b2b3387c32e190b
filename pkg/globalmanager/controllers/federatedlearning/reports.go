package federatedlearning

import (
	"context"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// ApplyReports records training and aggregation workers' reports about one
// job (their round and metrics) in its status, under the node that forwarded
// them, by edgestatus.EdgeReports' rule: idempotent by node, store and report ID,
// read from the API server, written together with conflict retries.
func (c *Controller) ApplyReports(ctx context.Context, from edgeproto.Source, reports []edgeproto.WorkerReport) []error {
	return c.reports.ApplyWorkers(ctx, from, reports, nil)
}
