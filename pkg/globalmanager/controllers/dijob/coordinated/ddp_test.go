package coordinated

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
)

// ddpJob is a v1 job "rl" in namespace "ns".
func ddpJob() *div1.DIJob {
	return &div1.DIJob{ObjectMeta: metav1.ObjectMeta{Name: "rl", Namespace: "ns", UID: "job-uid"}}
}

// ddpReplica is a learner of ddpJob from a template whose di-container
// names port, or none when port is 0.
func ddpReplica(port int32) Replica {
	c := corev1.Container{Name: ContainerName, Image: "di"}
	if port != 0 {
		c.Ports = []corev1.ContainerPort{{Name: PortName, ContainerPort: port}}
	}
	return Replica{
		Job: ddpJob(), Type: Learner, Name: "ignored",
		Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}},
	}
}

func ddpAggregator() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rl-aggregator-abcde", Namespace: "ns", UID: "agg-uid"}}
}

// ddpEnv is the DDP environment of pod's di-container, by name.
func ddpEnv(pod *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		switch e.Name {
		case EnvWorldSize, EnvLocalWorldSize, EnvStartRank, EnvMasterAddr, EnvMasterPort:
			out[e.Name] = e.Value
		}
	}
	return out
}

// ddpPorts are pod's di-container's ports, name to number.
func ddpPorts(pod *corev1.Pod) map[string]int32 {
	out := map[string]int32{}
	for _, p := range pod.Spec.Containers[0].Ports {
		out[p.Name] = p.ContainerPort
	}
	return out
}

// ddpWant is what one DDP learner pod should carry; MASTER_ADDR "master"
// stands for the first pod's name.
type ddpWant struct {
	role  string
	env   map[string]string
	ports map[string]int32
	node  string
	gpus  int64
}

var ddpCases = map[string]struct {
	port  int32
	slots []GPUSlot
	want  []ddpWant
}{
	"8 GPUs over 4+4": {
		port:  22271,
		slots: []GPUSlot{{Node: "gpu-a", GPUs: 4}, {Node: "gpu-b", GPUs: 4}},
		want: []ddpWant{
			{
				role: DDPLearnerMaster, node: "gpu-a", gpus: 4,
				env:   map[string]string{EnvWorldSize: "8", EnvLocalWorldSize: "4", EnvStartRank: "0", EnvMasterAddr: "localhost", EnvMasterPort: "10314"},
				ports: map[string]int32{PortName: 22271, "gpu-port-1": 22272, "gpu-port-2": 22273, "gpu-port-3": 22274, MasterPortName: 10314},
			},
			{
				role: DDPLearnerWorker, node: "gpu-b", gpus: 4,
				env:   map[string]string{EnvWorldSize: "8", EnvLocalWorldSize: "4", EnvStartRank: "4", EnvMasterAddr: "master", EnvMasterPort: "10314"},
				ports: map[string]int32{PortName: 22271, "gpu-port-1": 22272, "gpu-port-2": 22273, "gpu-port-3": 22274},
			},
		},
	},
	"3 GPUs on one pod, the template naming no port": {
		slots: []GPUSlot{{Node: "gpu-a", GPUs: 3}},
		want: []ddpWant{{
			role: DDPLearnerMaster, node: "gpu-a", gpus: 3,
			env:   map[string]string{EnvWorldSize: "3", EnvLocalWorldSize: "3", EnvStartRank: "0", EnvMasterAddr: "localhost", EnvMasterPort: "10314"},
			ports: map[string]int32{PortName: LearnerPort, "gpu-port-1": LearnerPort + 1, "gpu-port-2": LearnerPort + 2, MasterPortName: 10314},
		}},
	},
	"5 GPUs over 2+1+2": {
		port:  30000,
		slots: []GPUSlot{{Node: "a", GPUs: 2}, {Node: "b", GPUs: 1}, {Node: "c", GPUs: 2}},
		want: []ddpWant{
			{
				role: DDPLearnerMaster, node: "a", gpus: 2,
				env:   map[string]string{EnvWorldSize: "5", EnvLocalWorldSize: "2", EnvStartRank: "0", EnvMasterAddr: "localhost", EnvMasterPort: "10314"},
				ports: map[string]int32{PortName: 30000, "gpu-port-1": 30001, MasterPortName: 10314},
			},
			{
				role: DDPLearnerWorker, node: "b", gpus: 1,
				env:   map[string]string{EnvWorldSize: "5", EnvLocalWorldSize: "1", EnvStartRank: "2", EnvMasterAddr: "master", EnvMasterPort: "10314"},
				ports: map[string]int32{PortName: 30000},
			},
			{
				role: DDPLearnerWorker, node: "c", gpus: 2,
				env:   map[string]string{EnvWorldSize: "5", EnvLocalWorldSize: "2", EnvStartRank: "3", EnvMasterAddr: "master", EnvMasterPort: "10314"},
				ports: map[string]int32{PortName: 30000, "gpu-port-1": 30001},
			},
		},
	},
}

func TestDDPLearnersSplitRanksPortsAndRolesOverTheSlots(t *testing.T) {
	for name, tc := range ddpCases {
		t.Run(name, func(t *testing.T) {
			res := Resources{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi"), GPU: resource.MustParse("99")}
			pods, err := DDPLearners(ddpReplica(tc.port), ddpAggregator(), res, tc.slots)
			if err != nil {
				t.Fatalf("DDPLearners: %v", err)
			}
			if len(pods) != len(tc.want) {
				t.Fatalf("got %d pods, want %d", len(pods), len(tc.want))
			}
			for i, want := range tc.want {
				if want.env[EnvMasterAddr] == "master" {
					want.env[EnvMasterAddr] = pods[0].Name
				}
				checkDDPPod(t, pods[i], want)
			}
		})
	}
}

// checkDDPPod checks one DDP learner pod against want.
func checkDDPPod(t *testing.T, pod *corev1.Pod, want ddpWant) {
	t.Helper()
	if !strings.HasPrefix(pod.Name, "rl-ddp-learner-") || pod.Namespace != "ns" {
		t.Errorf("pod %s/%s, want ns/rl-ddp-learner-xxxxx", pod.Namespace, pod.Name)
	}
	if got := pod.Labels[LabelDDPLearnerType]; got != want.role {
		t.Errorf("%s: ddp-learner-type %q, want %q", pod.Name, got, want.role)
	}
	if TypeOf(pod) != DDPLearner || pod.Labels[LabelPodName] != pod.Name {
		t.Errorf("%s: replica-type %q pod-name %q", pod.Name, TypeOf(pod), pod.Labels[LabelPodName])
	}
	if diff := cmp.Diff(want.env, ddpEnv(pod)); diff != "" {
		t.Errorf("%s: DDP environment (-want,+got):\n%s", pod.Name, diff)
	}
	if diff := cmp.Diff(want.ports, ddpPorts(pod)); diff != "" {
		t.Errorf("%s: ports (-want,+got):\n%s", pod.Name, diff)
	}
	if got := common.PinnedNode(pod); got != want.node {
		t.Errorf("%s: pinned to %q, want %q", pod.Name, got, want.node)
	}
	c := pod.Spec.Containers[0].Resources
	for _, list := range []corev1.ResourceList{c.Requests, c.Limits} {
		if gpu := list[ResourceGPU]; gpu.Value() != want.gpus {
			t.Errorf("%s: %s %s, want %d", pod.Name, ResourceGPU, gpu.String(), want.gpus)
		}
		if cpu := list[corev1.ResourceCPU]; cpu.String() != "2" {
			t.Errorf("%s: cpu %s, want 2", pod.Name, cpu.String())
		}
	}
}

func TestDDPLearnersAreOwnedByTheJobAndTheAggregator(t *testing.T) {
	pods, err := DDPLearners(ddpReplica(0), ddpAggregator(), Resources{}, []GPUSlot{{Node: "a", GPUs: 2}, {Node: "b", GPUs: 2}})
	if err != nil {
		t.Fatalf("DDPLearners: %v", err)
	}
	yes, no := true, false
	want := []metav1.OwnerReference{
		{APIVersion: "diengine.opendilab.org/v2alpha1", Kind: "DIJob", Name: "rl", UID: "job-uid", Controller: &yes, BlockOwnerDeletion: &yes},
		{APIVersion: "v1", Kind: "Pod", Name: "rl-aggregator-abcde", UID: types.UID("agg-uid"), Controller: &no},
	}
	for _, pod := range pods {
		if diff := cmp.Diff(want, pod.OwnerReferences); diff != "" {
			t.Errorf("%s: owner references (-want,+got):\n%s", pod.Name, diff)
		}
		if !OwnedByAggregator(pod, "rl-aggregator-abcde") || OwnedByAggregator(pod, "rl-aggregator-other") {
			t.Errorf("%s: OwnedByAggregator does not name its aggregator alone", pod.Name)
		}
	}
	if pods[0].Name == pods[1].Name {
		t.Errorf("both DDP learners are named %s", pods[0].Name)
	}
}

func TestDDPLearnersStayOffEdgeNodesOnTheirSlotsNode(t *testing.T) {
	r := ddpReplica(0)
	// The template's own terms still hold: each gets the node and not-edge.
	r.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}},
		}},
	}}
	pods, err := DDPLearners(r, ddpAggregator(), Resources{}, []GPUSlot{{Node: "gpu-a", GPUs: 2}})
	if err != nil {
		t.Fatalf("DDPLearners: %v", err)
	}
	want := []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "gpu", Operator: corev1.NodeSelectorOpExists},
			{Key: allocator.EdgeNodeLabel, Operator: corev1.NodeSelectorOpDoesNotExist},
		},
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu-a"}}},
	}}
	got := pods[0].Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("required node affinity (-want,+got):\n%s", diff)
	}
	if r.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields != nil {
		t.Errorf("DDPLearners changed the template's affinity")
	}
}

func TestDDPLearnerServicesPublishTheGPUAndMasterPorts(t *testing.T) {
	pods, err := DDPLearners(ddpReplica(22271), ddpAggregator(), Resources{}, []GPUSlot{{Node: "a", GPUs: 3}, {Node: "b", GPUs: 2}})
	if err != nil {
		t.Fatalf("DDPLearners: %v", err)
	}
	want := [][]corev1.ServicePort{
		{{Name: PortName, Port: 22271}, {Name: "gpu-port-1", Port: 22272}, {Name: "gpu-port-2", Port: 22273}, {Name: MasterPortName, Port: MasterPort}},
		{{Name: PortName, Port: 22271}, {Name: "gpu-port-1", Port: 22272}},
	}
	for i, pod := range pods {
		svc := Service(pod)
		if svc.Name != pod.Name || svc.Spec.Selector[LabelReplicaType] != DDPLearner {
			t.Errorf("Service %s selecting %v for pod %s", svc.Name, svc.Spec.Selector, pod.Name)
		}
		if diff := cmp.Diff(want[i], svc.Spec.Ports); diff != "" {
			t.Errorf("%s: Service ports (-want,+got):\n%s", pod.Name, diff)
		}
	}
}

func TestDDPLearnerURLsListDiPortThenEachGPUPort(t *testing.T) {
	pods, err := DDPLearners(ddpReplica(22271), ddpAggregator(), Resources{}, []GPUSlot{{Node: "a", GPUs: 3}, {Node: "b", GPUs: 1}})
	if err != nil {
		t.Fatalf("DDPLearners: %v", err)
	}
	m, w := pods[0].Name, pods[1].Name
	want := [][]string{
		{m + ".ns:22271", m + ".ns:22272", m + ".ns:22273"},
		{w + ".ns:22271"},
	}
	for i, pod := range pods {
		if diff := cmp.Diff(want[i], DDPLearnerURLs(pod)); diff != "" {
			t.Errorf("%s: URLs (-want,+got):\n%s", pod.Name, diff)
		}
	}
}

var ddpRefusals = map[string]struct {
	aggregator *corev1.Pod
	slots      []GPUSlot
	port       int32
	want       string
}{
	"aggregator not created":  {aggregator: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agg"}}, slots: []GPUSlot{{Node: "a", GPUs: 2}}, want: "aggregator created first"},
	"no slot":                 {aggregator: ddpAggregator(), want: "at least one GPU slot"},
	"a slot of no GPU":        {aggregator: ddpAggregator(), slots: []GPUSlot{{Node: "a", GPUs: 2}, {Node: "b"}}, want: "slot 1"},
	"a slot on no node":       {aggregator: ddpAggregator(), slots: []GPUSlot{{GPUs: 2}}, want: "slot 0"},
	"too many GPUs":           {aggregator: ddpAggregator(), slots: []GPUSlot{{Node: "a", GPUs: 1000}, {Node: "b", GPUs: 25}}, want: "more than 1024 GPUs"},
	"gpu ports past 65535":    {aggregator: ddpAggregator(), slots: []GPUSlot{{Node: "a", GPUs: 8}}, port: 65530, want: "ports past 65535"},
	"more pods than the most": {aggregator: ddpAggregator(), slots: make([]GPUSlot, MaxDDPLearnerPods+1), want: "at most 1024"},
}

func TestDDPLearnersRefuseSlotsTheyCannotBuild(t *testing.T) {
	for name, tc := range ddpRefusals {
		t.Run(name, func(t *testing.T) {
			pods, err := DDPLearners(ddpReplica(tc.port), tc.aggregator, Resources{}, tc.slots)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DDPLearners = %d pods, error %v; want an error saying %q", len(pods), err, tc.want)
			}
		})
	}
}
