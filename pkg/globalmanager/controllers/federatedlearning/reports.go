package federatedlearning

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// ApplyReport records a training or aggregation worker's report (its round
// and metrics) in the job's status, under the node that forwarded it. It is
// idempotent: a report the status already counts (by node, store and ID)
// changes nothing. It reads
// the job from the API server, not the cache, so a report never rewinds a
// status the cache has not caught up with.
func (c *Controller) ApplyReport(ctx context.Context, from edgeproto.Source, r *edgeproto.Report, info *edgeproto.WorkerInfo) error {
	jobs := c.sednaClient.SednaV1alpha1().FederatedLearningJobs(info.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job, err := jobs.Get(ctx, info.OwnerName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return edgeproto.Refuse("federatedlearningjob %s/%s does not exist", info.Namespace, info.OwnerName)
		} else if err != nil {
			return fmt.Errorf("reading job %s/%s: %w", info.Namespace, info.OwnerName, err)
		}
		nodes, applied := common.RecordEdgeReport(job.Status.EdgeNodes, from, r, info, metav1.NewTime(c.now()))
		if !applied {
			return nil
		}
		job.Status.EdgeNodes = nodes
		_, err = jobs.UpdateStatus(ctx, job, metav1.UpdateOptions{})
		return err
	})
}
