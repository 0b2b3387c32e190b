package jointinference

import (
	"fmt"
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// Worker roles, in the worker-role label and the children's names.
const (
	roleEdge  = "edge"
	roleCloud = "cloud"
)

// The variables Sedna's GlobalManager sets for each worker, beyond those of
// every worker (common.SednaEveryWorker): its createOrUpdateWorker in
// pkg/globalmanager/controllers/jointinference/jointinferenceservice.go, and
// MODEL_URL from the model's mount. Nereid's others (MODEL_NAME, LOG_LEVEL,
// LC_PERIOD, and LC_SERVER on the cloud worker) are defaults a template
// overrides.
var (
	sednaEdgeEnv  = []string{"MODEL_URL", "BIG_MODEL_IP", "BIG_MODEL_PORT", "HEM_NAME", "HEM_PARAMETERS", common.EnvLCServer}
	sednaCloudEnv = []string{"MODEL_URL", "BIG_MODEL_BIND_PORT"}
)

// references are the Models a service names, resolved from the lister.
type references struct {
	edgeModel, cloudModel *sednav1.Model
}

// resolve reads what the service references; missing lists what does not exist.
func (c *Controller) resolve(ji *sednav1.JointInferenceService) (refs references, missing []string, err error) {
	r := common.NewReferences(ji.Namespace, c.models, nil)
	refs.edgeModel = r.Model(ji.Spec.EdgeWorker.Model.Name)
	refs.cloudModel = r.Model(ji.Spec.CloudWorker.Model.Name)
	return refs, r.Missing(), r.Err()
}

// The children's names are Sedna's (runtime.newDeployment, CreateHPA and
// CreateEdgeMeshService in kubeedge/sedna's pkg/globalmanager/runtime/worker.go),
// so that what users wrote against Sedna's finds them, and the in-place
// switch keeps Sedna's children rather than replacing them. An owner name too
// long for them is cut as common.ChildName cuts it (Sedna's would fail).

// workerName names a worker's Deployment: <service>-deployment-<role>.
func workerName(ji *sednav1.JointInferenceService, role string) string {
	return common.ChildName(ji.Name, "deployment", role)
}

// hpaName names a worker's autoscaler: hpa-<its Deployment>.
func hpaName(ji *sednav1.JointInferenceService, role string) string {
	return "hpa-" + workerName(ji, role)
}

// cloudServiceName names the Service in front of the cloud worker:
// <service>-cloud, which the edge worker reaches as BIG_MODEL_IP.
func cloudServiceName(ji *sednav1.JointInferenceService) string {
	return common.ChildName(ji.Name, roleCloud)
}

// desiredWorkers are the edge and cloud workers the service's current spec
// asks for. refs must be complete.
func (c *Controller) desiredWorkers(ji *sednav1.JointInferenceService, refs references) (edge, cloud common.Worker, err error) {
	port := strconv.Itoa(int(c.config.CloudPort))
	hem := &ji.Spec.EdgeWorker.HardExampleMining
	edgeEnv := append(c.baseEnv(ji, refs.edgeModel),
		common.Env("BIG_MODEL_IP", cloudServiceName(ji)+"."+ji.Namespace),
		common.Env("BIG_MODEL_PORT", port),
		common.Env("HEM_NAME", hem.Name),
		common.Env("HEM_PARAMETERS", common.HEMParameters(hem.Parameters)),
		common.Env("LC_PERIOD", strconv.Itoa(int(c.config.LCPeriod))),
	)
	if edge, err = c.worker(ji, roleEdge, &ji.Spec.EdgeWorker.Template, edgeEnv, sednaEdgeEnv, refs.edgeModel); err != nil {
		return edge, cloud, err
	}
	cloudEnv := append(c.baseEnv(ji, refs.cloudModel), common.Env("BIG_MODEL_BIND_PORT", port))
	cloud, err = c.worker(ji, roleCloud, &ji.Spec.CloudWorker.Template, cloudEnv, sednaCloudEnv, refs.cloudModel)
	return edge, cloud, err
}

// baseEnv is the environment of every worker of the service. Each replica
// reports to its LocalController under its own pod's name (WORKER_NAME from
// the downward API), which is unique and ties the report to its node.
func (c *Controller) baseEnv(ji *sednav1.JointInferenceService, model *sednav1.Model) []corev1.EnvVar {
	env := common.BaseEnv{
		Owner: ji, Service: true, Model: model,
		LogLevel: c.deps.Worker.LogLevel, DataPathPrefix: c.deps.Worker.DataPathPrefix, LocalController: c.deps.Worker.LocalController,
	}.Env()
	return append(env, common.CredentialEnv(model.Spec.CredentialName)...)
}

// worker assembles one worker; its hash covers everything its pod template is
// built from, so an edit of the template, the hard example mining, the Model
// or the GlobalManager's settings gives a new hash, and a status write does not.
func (c *Controller) worker(ji *sednav1.JointInferenceService, role string, template *corev1.PodTemplateSpec, env []corev1.EnvVar, sednaEnv []string, model *sednav1.Model) (common.Worker, error) {
	w := common.Worker{
		Name:           workerName(ji, role),
		Role:           role,
		Template:       template,
		Env:            env,
		SednaEnv:       sednaEnv,
		HostPaths:      []string{model.Spec.URL},
		DataPathPrefix: c.deps.Worker.DataPathPrefix,
	}
	hash, err := common.Hash(w.Role, w.Template, w.Env, w.HostPaths, w.DataPathPrefix)
	if err != nil {
		return w, fmt.Errorf("hashing %s worker: %w", role, err)
	}
	w.Hash = hash
	return w, nil
}

// initialReplicas is how many replicas a worker's Deployment starts with: one,
// or the autoscaler's minimum, which is then the autoscaler's to change.
func initialReplicas(hpa *sednav1.HPA) int32 {
	if hpa != nil && hpa.MinReplicas != nil {
		return *hpa.MinReplicas
	}
	return 1
}

// cloudService is the Service in front of the cloud worker, which the edge
// worker reaches at BIG_MODEL_IP:BIG_MODEL_PORT, with a hash label over its
// spec (the API server defaults the spec, so specs are not compared). Its
// port is named as Sedna names it: EdgeMesh, which carries the edge worker's
// calls to the cloud in KubeEdge clusters, wants <protocol>-<suffix>.
func (c *Controller) cloudService(ji *sednav1.JointInferenceService) (*corev1.Service, error) {
	spec := corev1.ServiceSpec{
		Selector: map[string]string{common.LabelOwnerUID: string(ji.UID), common.LabelWorkerRole: roleCloud},
		Ports: []corev1.ServicePort{{
			Name:       "tcp-0",
			Protocol:   corev1.ProtocolTCP,
			Port:       c.config.CloudPort,
			TargetPort: intstr.FromInt32(c.config.CloudPort),
		}},
	}
	hash, err := common.Hash(spec)
	if err != nil {
		return nil, fmt.Errorf("hashing the cloud worker's Service: %w", err)
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      cloudServiceName(ji),
			Namespace: ji.Namespace,
			Labels: common.MergeLabels(common.OwnerLabels(ji, common.LowerKind(serviceKind)), map[string]string{
				common.LabelWorkerRole:   roleCloud,
				common.LabelTemplateHash: hash,
			}),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ji, serviceKind)},
		},
		Spec: spec,
	}, nil
}

// desiredHPA is the autoscaler of a worker's Deployment, with a hash label
// over its spec (the API server defaults the spec, so specs are not compared).
func desiredHPA(ji *sednav1.JointInferenceService, role string, hpa *sednav1.HPA) (*autoscalingv2.HorizontalPodAutoscaler, error) {
	spec := autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: workerName(ji, role)},
		MinReplicas:    hpa.MinReplicas,
		MaxReplicas:    hpa.MaxReplicas,
		Metrics:        hpa.Metrics,
		Behavior:       hpa.Behavior,
	}
	hash, err := common.Hash(spec)
	if err != nil {
		return nil, fmt.Errorf("hashing %s autoscaler: %w", role, err)
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{
			Name:      hpaName(ji, role),
			Namespace: ji.Namespace,
			Labels: common.MergeLabels(common.OwnerLabels(ji, common.LowerKind(serviceKind)), map[string]string{
				common.LabelWorkerRole:   role,
				common.LabelTemplateHash: hash,
			}),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ji, serviceKind)},
		},
		Spec: *spec.DeepCopy(),
	}, nil
}
