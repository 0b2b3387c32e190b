package federatedlearning

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// ApplyReports records training and aggregation workers' reports about one
// job (their round and metrics) in its status, under the node that forwarded
// them, by edgestatus.EdgeReports' rule: idempotent by node, store and report ID,
// read from the API server, written together with conflict retries. The
// job's round and its slowest node's go in the same write (setRounds).
func (c *Controller) ApplyReports(ctx context.Context, from edgeproto.Source, reports []edgeproto.WorkerReport) []error {
	return c.reports.ApplyWorkers(ctx, from, reports, func(j *sednav1.FederatedLearningJob, _ edgeproto.WorkerReport, _ metav1.Time) ([]common.Event, error) {
		setRounds(&j.Status)
		return nil, nil
	})
}
