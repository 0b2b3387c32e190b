package common

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A cached child pod keeps what the controllers, the edge hub and the
// DI-engine server read of it, and none of its containers' specs; once bound
// to a node, nothing of what placement reads of an unbound pod either.
func TestSlimChildrenKeepsWhatIsReadOfAPod(t *testing.T) {
	now := metav1.Now()
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
			Labels: map[string]string{LabelOwnerUID: "o", LabelTemplateHash: "h"}, Annotations: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{UID: "o", Name: "job"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{NodeName: "edge-0", Hostname: "h0", Subdomain: "di-job", SchedulerName: "volcano",
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("g")},
			Containers: []corev1.Container{{Name: "worker", Image: "img", Env: []corev1.EnvVar{{Name: "A", Value: "1"}},
				Ports: []corev1.ContainerPort{{Name: "di", ContainerPort: 22270}}}},
			Volumes:      []corev1.Volume{{Name: "data"}},
			Tolerations:  []corev1.Toleration{{Key: "k"}},
			NodeSelector: map[string]string{"kubernetes.io/hostname": "edge-0"}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "m", PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", Image: "img", ImageID: "sha", RestartCount: 2,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}},
	}
	got, err := SlimChildren(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	want := full.DeepCopy()
	want.ManagedFields = nil
	want.Spec = corev1.PodSpec{NodeName: "edge-0", Hostname: "h0", Subdomain: "di-job", SchedulerName: "volcano",
		SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To("g")},
		Containers:      []corev1.Container{{Name: "worker", Ports: []corev1.ContainerPort{{Name: "di", ContainerPort: 22270}}}}}
	want.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "worker", RestartCount: 2,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slim pod (-want +got):\n%s", diff)
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.ServiceSpec{ClusterIP: "None"}}
	got, err = SlimChildren(svc)
	if err != nil {
		t.Fatal(err)
	}
	if s := got.(*corev1.Service); s.ManagedFields != nil || s.Spec.ClusterIP != "None" {
		t.Errorf("service %+v; want it whole but its managedFields", s)
	}
}

// A pod not yet bound keeps what placement reads to say whether the node it
// is pinned to takes it: tolerations, node selector, required node affinity,
// overhead and the requests of its containers and init containers.
func TestSlimPodKeepsWhatPlacementReadsUntilBound(t *testing.T) {
	required := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"edge-0"}}}}}}
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"},
		Spec: corev1.PodSpec{
			Tolerations:  []corev1.Toleration{{Key: "k"}},
			NodeSelector: map[string]string{"disk": "ssd"},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required,
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}}},
				PodAffinity: &corev1.PodAffinity{}},
			Overhead: requests,
			InitContainers: []corev1.Container{{Name: "init", Image: "img", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}},
			Containers: []corev1.Container{{Name: "worker", Image: "img",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests}}},
		}}
	want := corev1.PodSpec{
		Tolerations:  pod.Spec.Tolerations,
		NodeSelector: pod.Spec.NodeSelector,
		Affinity:     &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}},
		Overhead:     requests,
		InitContainers: []corev1.Container{{Name: "init", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: requests}}},
		Containers: []corev1.Container{{Name: "worker", Resources: corev1.ResourceRequirements{Requests: requests}}},
	}
	if diff := cmp.Diff(want, SlimPod(pod).Spec); diff != "" {
		t.Errorf("slim spec of an unbound pod (-want +got):\n%s", diff)
	}

	pod.Spec.NodeName = "edge-0"
	want = corev1.PodSpec{NodeName: "edge-0", Containers: []corev1.Container{{Name: "worker"}}}
	if diff := cmp.Diff(want, SlimPod(pod).Spec); diff != "" {
		t.Errorf("slim spec of a bound pod (-want +got):\n%s", diff)
	}
}
