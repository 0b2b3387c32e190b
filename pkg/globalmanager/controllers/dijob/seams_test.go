package dijob

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// move is the move step (moveJob) called with the arguments it took before
// the sync carried a syncCtx, as TestAMoveIsCountedBeforeItsPodsGo calls
// it: live are the job's live pods, n and marked the move a pod of them is
// marked for.
func (c *Controller) move(ctx context.Context, key string, job *div2.DIJob, status *div2.DIJobStatus, live []*corev1.Pod, n int32, marked, satisfied bool, now metav1.Time) ([]common.Event, error) {
	return c.moveJob(ctx, &syncCtx{key: key, job: job, status: status, live: live, moveN: n, moveMarked: marked, satisfied: satisfied, now: now})
}
