package federatedlearning

import (
	corev1 "k8s.io/api/core/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Children are the pods and the Service a sync makes for a new job under
// cfg, given the Model, the pretrained Model (nil for none) and the Datasets
// (in the order of its training workers) the job names: aggregation worker
// first. The benchmark makes the same objects with a plain client, to
// measure what the GlobalManager costs beyond them.
func Children(worker kinds.Worker, cfg Config, job *sednav1.FederatedLearningJob, model, pretrained *sednav1.Model, datasets []*sednav1.Dataset) ([]*corev1.Pod, *corev1.Service, error) {
	c := &Controller{deps: kinds.Deps{Worker: worker}, config: cfg}
	workers, err := c.desiredWorkers(job, references{model: model, pretrained: pretrained, datasets: datasets})
	if err != nil {
		return nil, nil, err
	}
	pods := make([]*corev1.Pod, len(workers))
	for i, w := range workers {
		pods[i] = common.NewWorkerPod(job, jobKind, w)
	}
	return pods, c.aggregationService(job), nil
}
