package coordinated

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// ddpMasterAddr is MASTER_ADDR of the master itself: it rendezvouses with
// its own processes.
const ddpMasterAddr = "localhost"

// DDPLearners builds the DDP learner pods of one learner that asked for
// more than one GPU, as DI-orchestrator v0.2.2's createDDPLearnerPods did:
// one pod per slot, in the order of slots. Each is Pod of r as type
// DDPLearner (whatever r.Type and r.Name say) under a new ReplicaName;
// asks for res with the GPU replaced by the slot's GPUs; is owned by the
// job (controller) and by aggregator (not controller, so that deleting the
// aggregator deletes its learners: aggregator must have been created, it
// needs its UID); has, after di-port, the ports gpu-port-i = di-port+i for
// each GPU i past the first; and is pinned to the slot's node by a required
// node affinity (common.Pin, as the allocator pins v2 replicas), kept off
// edge nodes by Place.
//
// The first pod is the master (ddp-learner-type ddp-learner-master, port
// master-port MasterPort, MASTER_ADDR localhost), the others workers
// (ddp-learner-worker, MASTER_ADDR the master pod's name, which its
// Service of that name resolves). Every pod has WORLD_SIZE (the slots'
// GPUs together), LOCAL_WORLD_SIZE (its slot's), START_RANK (the GPUs of
// the slots before it) and MASTER_PORT. A single slot gives a single
// master; DI-orchestrator labelled that one no role and gave it no
// master-port, which nothing reads.
//
// The error is for slots that cannot be built: none, more than
// MaxDDPLearnerPods or MaxDDPWorldSize, a slot without a node or GPU, a
// slot whose gpu ports would pass 65535, or an aggregator without a UID.
func DDPLearners(r Replica, aggregator *corev1.Pod, res Resources, slots []GPUSlot) ([]*corev1.Pod, error) {
	worldSize, err := checkDDP(aggregator, slots)
	if err != nil {
		return nil, err
	}
	r.Type = DDPLearner
	aggregatorRef := metav1.OwnerReference{
		APIVersion: "v1", Kind: "Pod", Name: aggregator.Name, UID: aggregator.UID, Controller: new(bool),
	}
	pods := make([]*corev1.Pod, 0, len(slots))
	startRank := 0
	for i, slot := range slots {
		r.Name = ReplicaName(r.Job.Name, DDPLearner)
		pod, port := Pod(r)
		if int(port)+slot.GPUs-1 > maxPort {
			return nil, fmt.Errorf("a DDP learner of %d GPUs at di-port %d would need ports past %d", slot.GPUs, port, maxPort)
		}
		slotRes := res
		slotRes.GPU = *resource.NewQuantity(int64(slot.GPUs), resource.DecimalSI)
		SetResources(pod, slotRes)
		pod.OwnerReferences = append(pod.OwnerReferences, aggregatorRef)
		addGPUPorts(pod, slot.GPUs, port)
		masterAddr := ddpMasterAddr
		if i == 0 {
			pod.Labels[LabelDDPLearnerType] = DDPLearnerMaster
			AddPort(pod, corev1.ContainerPort{Name: MasterPortName, ContainerPort: MasterPort})
		} else {
			pod.Labels[LabelDDPLearnerType] = DDPLearnerWorker
			masterAddr = pods[0].Name
		}
		SetEnv(pod,
			common.Env(EnvWorldSize, strconv.Itoa(worldSize)),
			common.Env(EnvLocalWorldSize, strconv.Itoa(slot.GPUs)),
			common.Env(EnvStartRank, strconv.Itoa(startRank)),
			common.Env(EnvMasterAddr, masterAddr),
			common.Env(EnvMasterPort, strconv.Itoa(MasterPort)),
		)
		startRank += slot.GPUs
		pod.Spec.Affinity = common.Pin(pod.Spec.Affinity, slot.Node)
		// A DDP learner is not a collector: the link grace is never read.
		Place(pod, 0)
		pods = append(pods, pod)
	}
	return pods, nil
}

// MaxDDPLearnerPods bounds the pods of one learner's DDP group, and
// MaxDDPWorldSize its GPUs: each GPU past a pod's first takes a port
// above di-port, so a pod's GPUs also stay well below the 65535 ports.
const (
	MaxDDPLearnerPods = 1024
	MaxDDPWorldSize   = 1024
)

// maxPort is the highest port number.
const maxPort = 65535

// checkDDP returns the GPUs of slots together, or why DDPLearners cannot
// build them.
func checkDDP(aggregator *corev1.Pod, slots []GPUSlot) (int, error) {
	switch {
	case aggregator == nil || aggregator.UID == "":
		return 0, errors.New("DDP learners need their aggregator created first: it owns them by its UID")
	case len(slots) == 0:
		return 0, errors.New("DDP learners need at least one GPU slot")
	case len(slots) > MaxDDPLearnerPods:
		return 0, fmt.Errorf("%d DDP learner pods asked, at most %d", len(slots), MaxDDPLearnerPods)
	}
	worldSize := 0
	for i, s := range slots {
		if s.Node == "" || s.GPUs < 1 {
			return 0, fmt.Errorf("GPU slot %d (%d GPUs on node %q) needs a node and at least one GPU", i, s.GPUs, s.Node)
		}
		worldSize += s.GPUs
		if worldSize > MaxDDPWorldSize {
			return 0, fmt.Errorf("more than %d GPUs asked for DDP learners", MaxDDPWorldSize)
		}
	}
	return worldSize, nil
}

// addGPUPorts gives pod's di-container the port gpu-port-i = port+i for
// each of its gpus past the first, as DI-orchestrator's AddGPUPortsToPod:
// DI-engine runs one process per GPU, the i-th listening there.
func addGPUPorts(pod *corev1.Pod, gpus int, port int32) {
	for i := 1; i < gpus; i++ {
		AddPort(pod, corev1.ContainerPort{Name: gpuPortName(i), ContainerPort: port + int32(i)})
	}
}

func gpuPortName(i int) string { return DDPPortPrefix + "-" + strconv.Itoa(i) }

// DDPLearnerURLs are the addresses of a DDP learner pod's processes, as
// DI-orchestrator's GET ?aggregator= listed them: its URL at di-port (or
// the learners' default port), then one at each of its gpu-port-i ports,
// in the order of its di-container's ports.
func DDPLearnerURLs(pod *corev1.Pod) []string {
	urls := []string{AccessURL(pod)}
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		for _, p := range c.Ports {
			if strings.HasPrefix(p.Name, DDPPortPrefix+"-") {
				urls = append(urls, URL(pod.Name, pod.Namespace, p.ContainerPort))
			}
		}
	}
	return urls
}

// OwnedByAggregator says whether pod is a DDP learner of the aggregator
// pod named aggregator: it carries replica-type ddp-learner and an owner
// reference to that pod (DI-orchestrator matched the owner's name alone).
func OwnedByAggregator(pod *corev1.Pod, aggregator string) bool {
	if TypeOf(pod) != DDPLearner {
		return false
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Kind == "Pod" && ref.Name == aggregator {
			return true
		}
	}
	return false
}
