package allocator

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

func TestJobOfListsReplicasInRankOrder(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	learnerTask := task(learner, 2, nil)
	learnerTask.Template.Spec.Containers = []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Requests: resources("cpu", "1", "memory", "1Gi")}},
		{Name: "b", Resources: corev1.ResourceRequirements{Requests: resources("cpu", "500m")}},
	}
	// An init container that needs more cpu than the containers together.
	learnerTask.Template.Spec.InitContainers = []corev1.Container{
		{Name: "fetch", Resources: corev1.ResourceRequirements{Requests: resources("cpu", "2", "memory", "512Mi")}},
	}
	actor := task(collector, 1, resources("cpu", "1"), named("actor"), selecting(EdgeNodeLabel, ""),
		tolerating(EdgeNodeLabel, corev1.TolerationOpExists, "", corev1.TaintEffectNoSchedule))
	// A sidecar (a restartable init container) runs beside the containers.
	actor.Template.Spec.InitContainers = []corev1.Container{
		{Name: "proxy", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: resources("cpu", "100m")}},
	}
	replay := task(none, 1, nil, named("replay"))
	job := dijob("pong", learnerTask, actor, replay)
	job.Spec.Preemptible = true

	got := JobOf(job)

	learnerRequests := resources("cpu", "2", "memory", "1Gi")
	actorRequests := resources("cpu", "1100m")
	want := Job{Key: "ns/pong", Preemptible: true, Priority: v2alpha1.PriorityNormal, Created: created, Replicas: []Replica{
		{Task: "learner", Type: learner, Rank: 0, TaskRank: 0, Requests: learnerRequests},
		{Task: "learner", Type: learner, Rank: 1, TaskRank: 1, Requests: learnerRequests},
		{Task: "actor", Type: collector, Rank: 2, TaskRank: 0, Requests: actorRequests,
			NodeSelector: actor.Template.Spec.NodeSelector, Tolerations: actor.Template.Spec.Tolerations},
		{Task: "replay", Type: none, Rank: 3, TaskRank: 0, Requests: corev1.ResourceList{}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestNodesCountsThePodsThatHoldRoom(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	k8sNode := func(name string, conditions []corev1.NodeCondition, unschedulable bool) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: pairs("kubernetes.io/hostname", name)},
			Spec:       corev1.NodeSpec{Unschedulable: unschedulable},
			Status:     corev1.NodeStatus{Allocatable: resources("cpu", "4", "pods", "110"), Conditions: conditions},
		}
	}
	nodes := []*corev1.Node{
		k8sNode("n4", nil, false),
		k8sNode("n1", ready, false),
		k8sNode("n3", []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}, false),
		k8sNode("n2", ready, true),
	}
	pod := func(name, nodeName string, phase corev1.PodPhase, cpu string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{
				{Name: "c", Resources: corev1.ResourceRequirements{Requests: resources("cpu", cpu)}}}},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	pinned := pod("pinned", "", corev1.PodPending, "500m")
	pinned.Spec.Affinity = common.Pin(nil, "n1")
	unbound := pod("unbound", "", corev1.PodPending, "8")
	excluded := pod("excluded", "n1", corev1.PodRunning, "3")
	excluded.Labels = pairs("job", "b")
	// A container resized from 1 cpu to 2 counts at the larger size, as
	// the scheduler counts it.
	resized := pod("resized", "n2", corev1.PodRunning, "1")
	resized.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Resources: &corev1.ResourceRequirements{Requests: resources("cpu", "2")}}}
	pods := []*corev1.Pod{
		resized,
		pod("running", "n1", corev1.PodRunning, "1"),
		pinned,
		pod("succeeded", "n1", corev1.PodSucceeded, "8"),
		pod("failed", "n1", corev1.PodFailed, "8"),
		unbound,
		excluded,
		pod("elsewhere", "gone", corev1.PodRunning, "8"),
		pod("cordoned", "n2", corev1.PodRunning, "1"),
	}

	got := Nodes(nodes, pods, func(p *corev1.Pod) bool { return p.Labels["job"] == "b" })

	view := func(name string, used corev1.ResourceList, schedulable bool) Node {
		return Node{Name: name, Labels: pairs("kubernetes.io/hostname", name), Allocatable: resources("cpu", "4", "pods", "110"),
			Used: used, Schedulable: schedulable}
	}
	want := []Node{
		view("n1", resources("cpu", "1500m", "pods", "2"), true),
		view("n2", resources("cpu", "3", "pods", "2"), false),
		view("n3", corev1.ResourceList{}, false),
		view("n4", corev1.ResourceList{}, false),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

// A pod pinned to a node (common.Pin) goes only there, and its template's
// own terms still hold.
func TestPinnedPodsGoOnlyToTheirNode(t *testing.T) {
	own := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			expression("zone", corev1.NodeSelectorOpIn, "a"),
			expression("zone", corev1.NodeSelectorOpIn, "b"),
		}}}}
	job := jobOf(task(learner, 1, nil, requiring(own.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms...)))
	job.Replicas[0].Affinity = common.Pin(own, "n2")
	placement, err := PackAndSpread{}.Allocate(job, []Node{
		cloudNode("n1", "4", withLabels("zone", "a")),
		cloudNode("n2", "4", withLabels("zone", "c")),
		cloudNode("n3", "4", withLabels("zone", "b")),
	})
	var notFit *NotFitError
	if placement != nil || !errors.As(err, &notFit) || notFit.Nodes != 0 {
		t.Errorf("Allocate of a pod pinned to n2, which its zone terms rule out = %v, %v; want no node", placement, err)
	}
	placement, err = PackAndSpread{}.Allocate(job, []Node{
		cloudNode("n1", "4", withLabels("zone", "a")),
		cloudNode("n2", "4", withLabels("zone", "b")),
	})
	if err != nil || !slices.Equal(placement, Placement{"n2"}) {
		t.Errorf("Allocate of a pod pinned to n2 = %v, %v; want n2", placement, err)
	}
}

// SlimPod keeps what Nodes counts and whose pod it is, and nothing else.
func TestSlimPodKeepsWhatTheAllocatorReads(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: pairs("a", "b"),
			OwnerReferences: []metav1.OwnerReference{{Kind: "DIJob", Name: "j", UID: "u", Controller: ptrTo(true)}}},
		Spec: corev1.PodSpec{NodeName: "n", Affinity: common.Pin(nil, "n"), Containers: []corev1.Container{{Name: "c", Image: "i",
			Env: []corev1.EnvVar{{Name: "X", Value: "y"}}, Resources: corev1.ResourceRequirements{Requests: resources("cpu", "1")}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
	obj, err := SlimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*corev1.Pod)
	if slim.Spec.NodeName != "n" || common.PinnedNode(slim) != "n" || slim.Status.Phase != corev1.PodRunning ||
		!cmp.Equal(PodRequests(&slim.Spec), PodRequests(&pod.Spec)) || metav1.GetControllerOf(slim) == nil {
		t.Errorf("SlimPod dropped what the allocator reads: %+v", slim)
	}
	if slim.Labels != nil || slim.Spec.Containers[0].Image != "" || slim.Spec.Containers[0].Env != nil || slim.Status.PodIP != "" {
		t.Errorf("SlimPod kept what the allocator does not read: %+v", slim)
	}
}

func ptrTo[T any](v T) *T { return &v }

// Slim makes a node what Nodes reads of it, and nothing else.
func TestSlimNodeKeepsWhatTheAllocatorReads(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-0", Labels: pairs(EdgeNodeLabel, ""), Annotations: pairs("kwok.x-k8s.io/node", "fake"),
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "edge", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Allocatable: resources("cpu", "4"),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}},
			Images:    []corev1.ContainerImage{{Names: []string{"worker:v1"}, SizeBytes: 1 << 30}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		},
	}
	obj, err := Slim(node)
	if err != nil {
		t.Fatal(err)
	}
	slim := obj.(*corev1.Node)
	if got, want := Nodes([]*corev1.Node{slim}, nil, nil), Nodes([]*corev1.Node{node}, nil, nil); !cmp.Equal(got, want) {
		t.Errorf("Nodes of the slim node %+v, want %+v", got, want)
	}
	if slim.Annotations != nil || slim.ManagedFields != nil || slim.Status.Images != nil || slim.Status.Addresses != nil ||
		len(slim.Status.Conditions) != 1 || slim.Status.Conditions[0].Reason != "" {
		t.Errorf("Slim kept what the allocator does not read: %+v", slim)
	}
	if pod, err := Slim(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: pairs("a", "b")}}); err != nil || pod.(*corev1.Pod).Labels != nil {
		t.Errorf("Slim of a pod: %+v, %v, want SlimPod's", pod, err)
	}
}
