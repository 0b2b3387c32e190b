package coordinated

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// Replica is what one pod of a v1 job is made from.
type Replica struct {
	// Job is the job as v1alpha1 shows it; its name and UID own the pod.
	Job *div1.DIJob
	// Type is the replica type (Coordinator, Collector, …), Name the pod's
	// name (CoordinatorName, ReplicaName).
	Type, Name string
	// Template is the pod template; Pod does not change it.
	Template *corev1.PodTemplateSpec
	// ServerURL is KUBERNETES_SERVER_URL, where the coordinator and the
	// aggregators reach the v1 replicas server; empty sets none.
	ServerURL string
}

// OwnerLabels are the labels that tie a v1 job's child to it for the
// controllers' owner index, besides DI's Labels.
func OwnerLabels(job metav1.Object) map[string]string {
	return common.OwnerLabels(job, common.LowerKind(div2.DIJobKind))
}

// Pod builds r's pod as DI-orchestrator v0.2 did: the template's, named
// r.Name in the job's namespace, controlled by the job; labelled with
// Labels, replica-type and pod-name (and the owner labels); the job's
// volumes after the template's, its priorityClassName when set; its
// di-container's port named di-port, or the type's default port added to
// it; and in every container the replica's port variable
// (COLLECTOR_PORT, …), KUBERNETES_POD_NAMESPACE, KUBERNETES_POD_NAME,
// KUBERNETES_SERVER_URL and, for the coordinator, KUBERNETES_COORDINATOR_URL
// (its own Service's URL), set over the template's own. A coordinator
// whose template says no restart policy gets Never. It returns the pod and
// its port.
func Pod(r Replica) (*corev1.Pod, int32) {
	job := r.Job
	pod := &corev1.Pod{
		ObjectMeta: *r.Template.ObjectMeta.DeepCopy(),
		Spec:       *r.Template.Spec.DeepCopy(),
	}
	pod.Name, pod.GenerateName, pod.Namespace = r.Name, "", job.Namespace
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, div2.DIJobKind)}
	pod.Labels = common.MergeLabels(pod.Labels, OwnerLabels(job), Labels(job.Name),
		map[string]string{LabelReplicaType: r.Type, LabelPodName: r.Name})
	for _, v := range job.Spec.Volumes {
		pod.Spec.Volumes = append(pod.Spec.Volumes, *v.DeepCopy())
	}
	if job.Spec.PriorityClassName != "" {
		pod.Spec.PriorityClassName = string(job.Spec.PriorityClassName)
	}
	if r.Type == Coordinator && pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	port, ok := PortOf(pod)
	if !ok {
		port = DefaultPort(r.Type)
		AddPort(pod, corev1.ContainerPort{Name: PortName, ContainerPort: port})
	}
	env := []corev1.EnvVar{
		common.Env(portEnv(r.Type), strconv.Itoa(int(port))),
		common.Env(EnvPodNamespace, pod.Namespace),
		common.Env(EnvPodName, pod.Name),
	}
	if r.ServerURL != "" {
		env = append(env, common.Env(EnvServerURL, r.ServerURL))
	}
	if r.Type == Coordinator {
		env = append(env, common.Env(EnvCoordinatorURL, URL(pod.Name, pod.Namespace, port)))
	}
	SetEnv(pod, env...)
	return pod, port
}

// SetEnv sets env in every container of pod, over what they have.
func SetEnv(pod *corev1.Pod, env ...corev1.EnvVar) {
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Env = common.MergeEnv(pod.Spec.Containers[i].Env, env)
	}
}

// AddPort adds port to pod's di-container (none without one).
func AddPort(pod *corev1.Pod, port corev1.ContainerPort) {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ContainerName {
			pod.Spec.Containers[i].Ports = append(pod.Spec.Containers[i].Ports, port)
		}
	}
}

// Service is a pod's own headless Service, of the pod's name: DI-engine
// reaches every replica as "<pod>.<namespace>:<port>". It selects the pod by
// its job's labels and pod-name, publishes it before it is ready (a
// coordinator waits for collectors that wait for it), and carries the
// pod's di-port and, for a DDP learner, its GPU ports and the master's
// port, as DI-orchestrator's did.
func Service(pod *corev1.Pod) *corev1.Service {
	port, ok := PortOf(pod)
	if !ok {
		port = DefaultPort(TypeOf(pod))
	}
	selector := common.MergeLabels(Labels(pod.Labels[LabelJobName]),
		map[string]string{LabelReplicaType: TypeOf(pod), LabelPodName: pod.Name})
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace,
			Labels:          common.MergeLabels(selector, ownerLabelsOf(pod)),
			OwnerReferences: controllerRefOf(pod),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: selector, PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{Name: PortName, Port: port}},
		},
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		for _, p := range c.Ports {
			if strings.HasPrefix(p.Name, DDPPortPrefix+"-") || p.Name == MasterPortName {
				svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Port: p.ContainerPort})
			}
		}
	}
	return svc
}

// ownerLabelsOf are pod's owner labels (common.OwnerLabels' keys).
func ownerLabelsOf(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, k := range []string{common.LabelOwnerUID, common.LabelOwnerKind, common.LabelOwnerName} {
		if v, ok := pod.Labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// controllerRefOf is pod's controller reference, the job.
func controllerRefOf(pod *corev1.Pod) []metav1.OwnerReference {
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return []metav1.OwnerReference{*ref}
	}
	return nil
}

// Rebuild is a new pod in place of old, a failed replica: Pod of r (the
// job and the template old's type is made from, r.Type and r.Name set
// here) under a new name of old's prefix ("<job>-<type>-" and new random
// characters), placed by Place with linkGrace, with what this server and
// the allocator gave old rather than the template: its di-container's
// resources and, for a DDP learner, its aggregator owner, role label,
// GPU and master ports, rank variables and node affinity (its GPUs' node).
//
// Nothing else comes from old, as the API server stores it: anyone who may
// create pods in the namespace can make one labelled and controlled as the
// job's, and anyone who may update pods can change a failed one's images,
// tolerations and owners; the replacement, which the GlobalManager makes
// under its own identity, is what the job's author wrote.
func Rebuild(old *corev1.Pod, r Replica, linkGrace time.Duration) *corev1.Pod {
	name := old.Name
	if i := strings.LastIndex(name, "-"); i > 0 {
		name = name[:i]
	}
	r.Type, r.Name = TypeOf(old), name+"-"+randomTail()
	pod, _ := Pod(r)
	for _, ref := range old.OwnerReferences {
		if ref.APIVersion == "v1" && ref.Kind == "Pod" && !(ref.Controller != nil && *ref.Controller) {
			pod.OwnerReferences = append(pod.OwnerReferences, ref)
		}
	}
	for _, c := range old.Spec.Containers {
		if c.Name == ContainerName {
			carryDIContainer(pod, &c)
		}
	}
	if r.Type != DDPLearner {
		Place(pod, linkGrace)
		return pod
	}
	if role, ok := old.Labels[LabelDDPLearnerType]; ok {
		pod.Labels[LabelDDPLearnerType] = role
	}
	pod.Spec.Affinity = old.Spec.Affinity.DeepCopy()
	return pod
}

// ddpVariables are the variables DDPLearners sets.
var ddpVariables = []string{EnvWorldSize, EnvLocalWorldSize, EnvStartRank, EnvMasterAddr, EnvMasterPort}

// carryDIContainer gives pod's di-container old's resources, and its GPU
// and master ports and DDP variables.
func carryDIContainer(pod *corev1.Pod, old *corev1.Container) {
	var env []corev1.EnvVar
	for _, e := range old.Env {
		if slices.Contains(ddpVariables, e.Name) && e.ValueFrom == nil {
			env = append(env, e)
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != ContainerName {
			continue
		}
		c.Resources = *old.Resources.DeepCopy()
		for _, p := range old.Ports {
			if strings.HasPrefix(p.Name, DDPPortPrefix+"-") || p.Name == MasterPortName {
				c.Ports = append(c.Ports, p)
			}
		}
	}
	// DDPLearners sets them in every container.
	SetEnv(pod, env...)
}

// TemplateOf is the template of job that pods of replicaType are made
// from: nil for an aggregator (made from an AggregatorConfig) and for a
// type job has no template for.
func TemplateOf(job *div1.DIJob, replicaType string) *corev1.PodTemplateSpec {
	switch {
	case replicaType == Coordinator && job.Spec.Coordinator != nil:
		return &job.Spec.Coordinator.Template
	case replicaType == Collector && job.Spec.Collector != nil:
		return &job.Spec.Collector.Template
	case (replicaType == Learner || replicaType == DDPLearner) && job.Spec.Learner != nil:
		return &job.Spec.Learner.Template
	}
	return nil
}

// TemplateField is where a pod of replicaType comes from, as a person
// finds it: the job's spec.<type>.template, or for an aggregator the
// AggregatorConfig's.
func TemplateField(replicaType string) string {
	switch replicaType {
	case Coordinator:
		return "spec.coordinator.template"
	case Collector:
		return "spec.collector.template"
	case Learner, DDPLearner:
		return "spec.learner.template"
	case Aggregator:
		return "the AggregatorConfig's spec.aggregator.template"
	}
	return "no template (replica type " + replicaType + ")"
}

// AsStored reads cached, a pod of the controllers' slimmed cache, whole
// from the API server, to build its replacement from: nil, without error,
// when it is gone or is no longer that replica (another UID, or another
// replica type than the cache said).
func AsStored(ctx context.Context, pods corev1client.PodsGetter, cached *corev1.Pod) (*corev1.Pod, error) {
	pod, err := pods.Pods(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case pod.UID != cached.UID || TypeOf(pod) != TypeOf(cached):
		return nil, nil
	}
	return pod, nil
}
