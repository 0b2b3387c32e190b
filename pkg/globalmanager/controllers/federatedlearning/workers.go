package federatedlearning

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// Worker roles, in the worker-role label.
const (
	roleAggregation = "aggregation"
	roleTraining    = "training"
)

// The variables Sedna's GlobalManager sets for each worker, beyond those of
// every worker (common.SednaEveryWorker): createAggPod, createTrainPod and
// addTransmitterToWorkerParam in its federatedlearningjob.go, and the URLs of
// the mounts it adds (addWorkerMount). Nereid's others (LOG_LEVEL, and
// MODEL_NAME and LC_SERVER on the aggregator) are defaults a template
// overrides.
var (
	sednaAggregationEnv = []string{"AGG_BIND_PORT", "PARTICIPANTS_COUNT", "TRANSMITTER", "AGG_DATA_PATH", "MODEL_URL", "PRETRAINED_MODEL_URL"}
	sednaTrainingEnv    = []string{"AGG_IP", "AGG_PORT", "PARTICIPANTS_COUNT", "TRANSMITTER", "AGG_DATA_PATH", "MODEL_NAME", "MODEL_URL",
		"PRETRAINED_MODEL_URL", "DATASET_NAME", "TRAIN_DATASET_URL", common.EnvLCServer}
)

// references are the Models and Datasets a job names, resolved from the listers.
type references struct {
	model      *sednav1.Model
	pretrained *sednav1.Model
	datasets   []*sednav1.Dataset
}

// resolve reads what the job references; missing lists what does not exist.
func (c *Controller) resolve(job *sednav1.FederatedLearningJob) (refs references, missing []string, err error) {
	r := common.NewReferences(job.Namespace, c.models, c.datasets)
	refs.model = r.Model(job.Spec.AggregationWorker.Model.Name)
	if job.Spec.PretrainedModel != nil {
		refs.pretrained = r.Model(job.Spec.PretrainedModel.Name)
	}
	for _, w := range job.Spec.TrainingWorkers {
		refs.datasets = append(refs.datasets, r.Dataset(w.Dataset.Name))
	}
	return refs, r.Missing(), r.Err()
}

// serviceName is the aggregation worker's Service, which training workers dial.
func serviceName(job *sednav1.FederatedLearningJob) string {
	return common.ChildName(job.Name, roleAggregation)
}

func (c *Controller) transmitter(job *sednav1.FederatedLearningJob) []corev1.EnvVar {
	t := job.Spec.Transmitter
	if t != nil && t.S3 != nil {
		return append([]corev1.EnvVar{common.Env("TRANSMITTER", "s3"), common.Env("AGG_DATA_PATH", t.S3.AggDataPath)},
			common.CredentialEnv(t.S3.CredentialName)...)
	}
	return []corev1.EnvVar{common.Env("TRANSMITTER", "ws")}
}

// desiredWorkers are the pods the job's current spec asks for, aggregation
// worker first. refs must be complete.
func (c *Controller) desiredWorkers(job *sednav1.FederatedLearningJob, refs references) ([]common.Worker, error) {
	spec := &job.Spec
	participants := strconv.Itoa(len(spec.TrainingWorkers))
	port := strconv.Itoa(int(c.config.AggregationPort))
	base := func(workerName string) []corev1.EnvVar {
		env := common.BaseEnv{
			Owner: job, Worker: workerName, Model: refs.model,
			LogLevel: c.deps.Worker.LogLevel, DataPathPrefix: c.deps.Worker.DataPathPrefix, LocalController: c.deps.Worker.LocalController,
		}.Env()
		env = append(env, common.Env("PARTICIPANTS_COUNT", participants))
		env = append(env, c.transmitter(job)...)
		if refs.pretrained != nil {
			env = append(env, common.Env("PRETRAINED_MODEL_URL", common.ContainerPath(refs.pretrained.Spec.URL, c.deps.Worker.DataPathPrefix)))
		}
		return append(env, common.CredentialEnv(refs.model.Spec.CredentialName)...)
	}
	hostPaths := []string{refs.model.Spec.URL}
	if refs.pretrained != nil {
		hostPaths = append(hostPaths, refs.pretrained.Spec.URL)
	}
	shared := []any{spec.AggregationWorker.Model, spec.PretrainedModel, spec.Transmitter, participants}

	aggHash, err := common.Hash(append(shared, spec.AggregationWorker.Template)...)
	if err != nil {
		return nil, err
	}
	aggName := common.ChildName(job.Name, roleAggregation, aggHash)
	workers := []common.Worker{{
		Name: aggName, Role: roleAggregation, Hash: aggHash,
		Template:       &spec.AggregationWorker.Template,
		Env:            append(base(aggName), common.Env("AGG_BIND_PORT", port)),
		SednaEnv:       sednaAggregationEnv,
		HostPaths:      hostPaths,
		DataPathPrefix: c.deps.Worker.DataPathPrefix,
	}}
	aggHost := serviceName(job) + "." + job.Namespace
	nodes := trainerNodes(job, refs)
	for i := range spec.TrainingWorkers {
		tw := &spec.TrainingWorkers[i]
		ds := refs.datasets[i]
		hash, err := common.Hash(append(shared, i, tw.Dataset, tw.Template)...)
		if err != nil {
			return nil, err
		}
		name := common.ChildName(job.Name, roleTraining, strconv.Itoa(i), hash)
		env := append(base(name),
			common.Env("AGG_IP", aggHost),
			common.Env("AGG_PORT", port),
			common.Env("DATASET_NAME", ds.Name),
			common.Env("TRAIN_DATASET_URL", common.ContainerPath(ds.Spec.URL, c.deps.Worker.DataPathPrefix)),
		)
		env = append(env, common.CredentialEnv(ds.Spec.CredentialName)...)
		workers = append(workers, common.Worker{
			Name: name, Role: roleTraining, Hash: hash,
			Template:       onDatasetNode(&tw.Template, nodes[i]),
			Env:            env,
			SednaEnv:       sednaTrainingEnv,
			HostPaths:      append([]string{ds.Spec.URL}, hostPaths...),
			DataPathPrefix: c.deps.Worker.DataPathPrefix,
		})
	}
	return workers, nil
}

// aggregationService is the Service in front of the aggregation worker.
func (c *Controller) aggregationService(job *sednav1.FederatedLearningJob) *corev1.Service {
	labels := common.OwnerLabels(job, common.LowerKind(jobKind))
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            serviceName(job),
			Namespace:       job.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, jobKind)},
		},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{common.LabelOwnerUID: string(job.UID), common.LabelWorkerRole: roleAggregation},
			Ports: []corev1.ServicePort{{
				Name:       "aggregation",
				Port:       c.config.AggregationPort,
				TargetPort: intstr.FromInt32(c.config.AggregationPort),
			}},
		},
	}
}
