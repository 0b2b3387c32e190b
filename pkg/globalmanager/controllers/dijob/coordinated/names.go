package coordinated

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
)

// The labels DI-orchestrator v0.2 put on every pod and Service of a v1 job;
// DI-engine's tools and DI-orchestrator's own selectors read them.
const (
	LabelGroupName      = "group-name"
	LabelJobName        = "dijob-name"
	LabelControllerName = "controller-name"
	LabelReplicaType    = "replica-type"
	LabelPodName        = "pod-name"
	LabelDDPLearnerType = "ddp-learner-type"

	// ControllerName is controller-name's value, DI-orchestrator's.
	ControllerName = "di-operator"
)

// The replica types, as the replica-type label spells them.
const (
	Coordinator = "coordinator"
	Collector   = "collector"
	Learner     = "learner"
	Aggregator  = "aggregator"
	DDPLearner  = "ddp-learner"
)

// DDP learners' roles (ddp-learner-type).
const (
	DDPLearnerMaster = "ddp-learner-master"
	DDPLearnerWorker = "ddp-learner-worker"
)

// The container DI-engine runs in, and its port.
const (
	ContainerName = "di-container"
	PortName      = "di-port"
	// DDPPortPrefix names a DDP learner's port of each GPU past the first:
	// gpu-port-1, gpu-port-2, …
	DDPPortPrefix = "gpu-port"
	// MasterPortName is the DDP master's rendezvous port.
	MasterPortName = "master-port"
)

// Default ports, when the template's di-container names none di-port.
const (
	CollectorPort   = 22270
	LearnerPort     = 22271
	AggregatorPort  = 22272
	CoordinatorPort = 22273
	// MasterPort is where DDP learners meet their master (MASTER_PORT).
	MasterPort = 10314
)

// The environment DI-engine's v1 workers read.
const (
	EnvPodNamespace   = "KUBERNETES_POD_NAMESPACE"
	EnvPodName        = "KUBERNETES_POD_NAME"
	EnvCoordinatorURL = "KUBERNETES_COORDINATOR_URL"
	EnvAggregatorURL  = "KUBERNETES_AGGREGATOR_URL"
	EnvServerURL      = "KUBERNETES_SERVER_URL"

	EnvWorldSize      = "WORLD_SIZE"
	EnvLocalWorldSize = "LOCAL_WORLD_SIZE"
	EnvStartRank      = "START_RANK"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"
)

// GroupName is group-name's value: the API group.
const GroupName = "diengine.opendilab.org"

// Labels are the labels every pod and Service of job carries, and select
// them all.
func Labels(job string) map[string]string {
	return map[string]string{LabelGroupName: GroupName, LabelJobName: job, LabelControllerName: ControllerName}
}

// DefaultPort is a replica type's port when its template names none.
func DefaultPort(replicaType string) int32 {
	switch replicaType {
	case Collector:
		return CollectorPort
	case Learner, DDPLearner:
		return LearnerPort
	case Aggregator:
		return AggregatorPort
	default:
		return CoordinatorPort
	}
}

// portEnv is the variable that tells a replica its own port.
func portEnv(replicaType string) string {
	switch replicaType {
	case Collector:
		return "COLLECTOR_PORT"
	case Learner, DDPLearner:
		return "LEARNER_PORT"
	case Aggregator:
		return "AGGREGATOR_PORT"
	default:
		return "COORDINATOR_PORT"
	}
}

// CoordinatorName is the name of job's coordinator pod and of its Service.
func CoordinatorName(job string) string { return job + "-" + Coordinator }

// randomLength is the length of the random tail of a replica's name.
const randomLength = 5

// ReplicaName is a new name for a replica of job: "<job>-<type>-<5
// random characters>", as DI-orchestrator named them.
func ReplicaName(job, replicaType string) string {
	return fmt.Sprintf("%s-%s-%s", job, replicaType, randomTail())
}

// MaxJobNameLength is the longest job name whose every pod's Service name
// is a DNS label (63): "<job>-ddp-learner-xxxxx" is the longest.
const MaxJobNameLength = 63 - len("-"+DDPLearner+"-") - randomLength

// URL is how DI-engine addresses a replica: "<name>.<namespace>:<port>",
// through the replica's Service of the same name.
func URL(name, namespace string, port int32) string {
	return name + "." + namespace + ":" + strconv.Itoa(int(port))
}

// TypeOf is a pod's replica type (its replica-type label).
func TypeOf(pod *corev1.Pod) string { return pod.Labels[LabelReplicaType] }

// StatusType is the replica type a pod counts as in the job's
// status.replicaStatus; DDP learners are counted under none ("").
func StatusType(pod *corev1.Pod) div1.ReplicaType {
	switch TypeOf(pod) {
	case Coordinator:
		return div1.ReplicaTypeCoordinator
	case Collector:
		return div1.ReplicaTypeCollector
	case Learner:
		return div1.ReplicaTypeLearner
	case Aggregator:
		return div1.ReplicaTypeAggregator
	}
	return ""
}

// PortOf is the port of a pod's di-container named di-port.
func PortOf(pod *corev1.Pod) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == PortName {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// AccessURL is a pod's URL, at its di-port or its type's default port.
func AccessURL(pod *corev1.Pod) string {
	port, ok := PortOf(pod)
	if !ok {
		port = DefaultPort(TypeOf(pod))
	}
	return URL(pod.Name, pod.Namespace, port)
}

func randomTail() string { return utilrand.String(randomLength) }
