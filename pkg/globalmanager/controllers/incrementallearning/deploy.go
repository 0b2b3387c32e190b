package incrementallearning

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
)

// Decide applies the deploy trigger's condition to the evaluation.
func (k *kind) Decide(job *sednav1.IncrementalLearningJob, results []json.RawMessage) (bool, string) {
	return learningcycle.EvaluateCondition(job.Spec.DeploySpec.Trigger.Condition, results)
}

// Deployment: the edge copies the model; the inference worker reloads it
// when hot update is enabled, else it is replaced.
func (k *kind) Deployment(job *sednav1.IncrementalLearningJob) learningcycle.Deployment {
	if job.Spec.DeploySpec.Model.HotUpdateEnabled {
		return learningcycle.DeployByEdgeHot
	}
	return learningcycle.DeployByEdge
}

// Applied records a deployed round's evaluation on the deploy Model's status,
// which now describes the model its file holds. It is written before the
// job's status, so a failure has the report resent rather than lost.
func (k *kind) Applied(ctx context.Context, job *sednav1.IncrementalLearningJob, _ *edgeproto.WorkerInfo, o learningcycle.Outcome) ([]common.Event, error) {
	if o.Move != learningcycle.MoveDeployed {
		return nil, nil
	}
	var metrics []sednav1.Metric
	if len(o.Round.Models) > 0 {
		metrics = o.Round.Models[0].Metrics
	}
	name := job.Spec.DeploySpec.Model.Name
	models := k.client.SednaV1alpha1().Models(job.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := models.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m.Status.Metrics = metrics
		m.Status.UpdateTime = &o.Now
		_, err = models.UpdateStatus(ctx, m, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return []common.Event{{Type: corev1.EventTypeWarning, Reason: learningcycle.ReasonMissingReference,
			Message: fmt.Sprintf("Deploy Model %s not found: the evaluation of round %d is not recorded on it", name, o.Round.Round)}}, nil
	} else if err != nil {
		return nil, fmt.Errorf("updating status of Model %s/%s: %w", job.Namespace, name, err)
	}
	return nil, nil
}
