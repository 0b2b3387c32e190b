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

// The events of the inference worker's hot update.
const (
	ReasonModelHotUpdated      = "ModelHotUpdated"
	ReasonModelHotUpdateFailed = "ModelHotUpdateFailed"
)

// Applied records a deployed round's evaluation on the deploy Model's status,
// which now describes the model its file holds. It is written before the
// job's status, so a failure has the report resent rather than lost. The
// inference worker's own deploy report, which Sedna's ModelLoadingThread
// sends once it has loaded (or failed to load) the model the hot update
// file names, is told as an event: a deployed round that the worker has not
// loaded is otherwise invisible.
func (k *kind) Applied(ctx context.Context, job *sednav1.IncrementalLearningJob, info *edgeproto.WorkerInfo, o learningcycle.Outcome) ([]common.Event, error) {
	if ev, ok := hotUpdateEvent(job, info); ok {
		return []common.Event{ev}, nil
	}
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

// hotUpdateEvent is the event of the inference worker's report that it
// loaded the deployed model, or failed to; ok is false for another report.
func hotUpdateEvent(job *sednav1.IncrementalLearningJob, info *edgeproto.WorkerInfo) (common.Event, bool) {
	st := &job.Status.CycleStatus
	if !job.Spec.DeploySpec.Model.HotUpdateEnabled || info.Kind != edgeproto.StageDeploy ||
		st.InferenceWorker == "" || info.Name != st.InferenceWorker {
		return common.Event{}, false
	}
	switch info.Status {
	case edgeproto.WorkerCompleted:
		return common.Event{Type: corev1.EventTypeNormal, Reason: ReasonModelHotUpdated,
			Message: fmt.Sprintf("Inference worker %s loaded the deployed model (round %d) by hot update", info.Name, st.DeployedRound)}, true
	case edgeproto.WorkerFailed:
		return common.Event{Type: corev1.EventTypeWarning, Reason: ReasonModelHotUpdateFailed,
			Message: fmt.Sprintf("Inference worker %s could not load the deployed model (round %d) by hot update: it serves the model it had (its log says why)",
				info.Name, st.DeployedRound)}, true
	}
	return common.Event{}, false
}
