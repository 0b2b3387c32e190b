package gang

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

func TestMembersAddSumsRequestsTimesReplicas(t *testing.T) {
	type add struct {
		spec *corev1.PodSpec
		n    int32
	}
	withPriority := func(spec *corev1.PodSpec, class string) *corev1.PodSpec {
		spec.PriorityClassName = class
		return spec
	}
	twoContainers := workerSpec("500m", "1Gi")
	twoContainers.Containers = append(twoContainers.Containers, corev1.Container{Name: "sidecar", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), "nvidia.com/gpu": resource.MustParse("1")},
	}})
	bigInit := workerSpec("500m", "1Gi")
	bigInit.InitContainers = []corev1.Container{{Name: "fetch", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
	}}}
	withOverhead := workerSpec("500m", "1Gi")
	withOverhead.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
	limitsOnly := workerSpec("500m", "1Gi")
	limitsOnly.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("2"), "nvidia.com/gpu": resource.MustParse("1"),
	}, Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}

	for name, tc := range map[string]struct {
		adds         []add
		wantCount    int32
		wantRequests map[string]any
		wantPriority string
	}{
		"one template, three replicas": {
			adds:         []add{{workerSpec("500m", "1Gi"), 3}},
			wantCount:    3,
			wantRequests: map[string]any{"cpu": "1500m", "memory": "3Gi"},
		},
		"containers of a pod add up": {
			adds:         []add{{twoContainers, 2}},
			wantCount:    2,
			wantRequests: map[string]any{"cpu": "1500m", "memory": "2Gi", "nvidia.com/gpu": "2"},
		},
		"two templates": {
			adds:         []add{{workerSpec("1", "2Gi"), 1}, {workerSpec("250m", "512Mi"), 4}},
			wantCount:    5,
			wantRequests: map[string]any{"cpu": "2", "memory": "4Gi"},
		},
		"an init container larger than the containers counts instead of them": {
			adds:         []add{{bigInit, 2}},
			wantCount:    2,
			wantRequests: map[string]any{"cpu": "4", "memory": "2Gi"},
		},
		"overhead is counted": {
			adds:         []add{{withOverhead, 2}},
			wantCount:    2,
			wantRequests: map[string]any{"cpu": "1", "memory": "2304Mi"},
		},
		"limits stand for unset requests, as the API server defaults them": {
			adds:         []add{{limitsOnly, 2}},
			wantCount:    2,
			wantRequests: map[string]any{"cpu": "4", "memory": "2Gi", "nvidia.com/gpu": "2"},
		},
		"no replicas add nothing": {
			adds:      []add{{workerSpec("1", "1Gi"), 0}, {workerSpec("1", "1Gi"), -1}},
			wantCount: 0,
		},
		"the first priority class is the group's": {
			adds: []add{
				{workerSpec("1", "1Gi"), 1},
				{withPriority(workerSpec("1", "1Gi"), "high"), 1},
				{withPriority(workerSpec("1", "1Gi"), "low"), 1},
			},
			wantCount:    3,
			wantRequests: map[string]any{"cpu": "3", "memory": "3Gi"},
			wantPriority: "high",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var m Members
			for _, a := range tc.adds {
				m.Add(a.spec, a.n)
			}
			if m.Count != tc.wantCount {
				t.Errorf("Count = %d, want %d", m.Count, tc.wantCount)
			}
			var got map[string]any
			if len(m.Requests) > 0 {
				got = quantities(m.Requests)
			}
			if diff := cmp.Diff(tc.wantRequests, got); diff != "" {
				t.Errorf("Requests (-want,+got):\n%s", diff)
			}
			if m.PriorityClassName != tc.wantPriority {
				t.Errorf("PriorityClassName = %q, want %q", m.PriorityClassName, tc.wantPriority)
			}
		})
	}
	if _, set := limitsOnly.Containers[0].Resources.Requests[corev1.ResourceCPU]; set {
		t.Error("Add set requests on the template it was given")
	}
}

// The Kubernetes Workload's PodGroup template and the PodGroup carry the
// job's priority class, which Kubernetes' gang scheduling weighs.
func TestKubernetesGroupCarriesThePriorityClass(t *testing.T) {
	m := members(2)
	m.PriorityClassName = "high"
	g := testGroup(Kubernetes, nil, m, 0)
	if got := g.workload().Spec.PodGroupTemplates[0].PriorityClassName; got != "high" {
		t.Errorf("the Workload's template has priorityClassName %q, want high", got)
	}
	if got := g.podGroup().Spec.PriorityClassName; got != "high" {
		t.Errorf("the PodGroup has priorityClassName %q, want high", got)
	}
}

// testGroup is the group of the test job for mode, as Plan.group makes it.
func testGroup(mode Mode, annotations map[string]string, m Members, min int32) *group {
	p := &Plan{Mode: mode, Name: testGroupName, owner: newJob(annotations, nil), ownerKind: testKind, min: min}
	return p.group(m, nil)
}

// wantMeta is the metadata every group object of the test job has: the
// owner labels the Manager's caches select by, and the job as controller.
func wantMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: testGroupName, Namespace: testNamespace,
		Labels: map[string]string{
			common.LabelOwnerUID: testJobUID, common.LabelOwnerKind: "federatedlearningjob", common.LabelOwnerName: testJobName,
		},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "sedna.io/v1alpha1", Kind: "FederatedLearningJob", Name: testJobName, UID: testJobUID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

func TestKubernetesWorkloadAndPodGroup(t *testing.T) {
	g := testGroup(Kubernetes, nil, members(4), 0)

	wantWorkload := &schedulingv1beta1.Workload{
		ObjectMeta: wantMeta(),
		Spec: schedulingv1beta1.WorkloadSpec{
			ControllerRef: &schedulingv1beta1.TypedLocalObjectReference{APIGroup: "sedna.io", Kind: "FederatedLearningJob", Name: testJobName},
			PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
				Name:             "workers",
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}},
			}},
		},
	}
	if diff := cmp.Diff(wantWorkload, g.workload()); diff != "" {
		t.Errorf("Workload (-want,+got):\n%s", diff)
	}

	wantPodGroup := &schedulingv1beta1.PodGroup{
		ObjectMeta: wantMeta(),
		Spec: schedulingv1beta1.PodGroupSpec{
			WorkloadRef:      &schedulingv1beta1.WorkloadReference{WorkloadName: testGroupName, TemplateName: "workers"},
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 4}},
		},
	}
	if diff := cmp.Diff(wantPodGroup, g.podGroup()); diff != "" {
		t.Errorf("PodGroup (-want,+got):\n%s", diff)
	}
}

// wantUnstructuredMeta is wantMeta as an unstructured object's metadata.
func wantUnstructuredMeta() map[string]any {
	return map[string]any{
		"name": testGroupName, "namespace": testNamespace,
		"labels": map[string]any{
			common.LabelOwnerUID: testJobUID, common.LabelOwnerKind: "federatedlearningjob", common.LabelOwnerName: testJobName,
		},
		"ownerReferences": []any{map[string]any{
			"apiVersion": "sedna.io/v1alpha1", "kind": "FederatedLearningJob", "name": testJobName, "uid": testJobUID,
			"controller": true, "blockOwnerDeletion": true,
		}},
	}
}

func TestVolcanoPodGroup(t *testing.T) {
	withPriority := members(3)
	withPriority.PriorityClassName = "high"
	for name, tc := range map[string]struct {
		annotations map[string]string
		members     Members
		min         int32
		wantSpec    map[string]any
	}{
		"queue from the job's annotation, priority class and requests": {
			annotations: map[string]string{AnnotationVolcanoQueue: "gpu"},
			members:     withPriority,
			wantSpec: map[string]any{
				"minMember": int64(3), "queue": "gpu", "priorityClassName": "high",
				"minResources": map[string]any{"cpu": "1500m", "memory": "3Gi"},
			},
		},
		"the default queue; no priority class or requests left empty": {
			members:  Members{Count: 2},
			wantSpec: map[string]any{"minMember": int64(2), "queue": "default"},
		},
		"a smaller minimum": {
			members: members(5),
			min:     2,
			wantSpec: map[string]any{
				"minMember": int64(2), "queue": "default",
				"minResources": map[string]any{"cpu": "2500m", "memory": "5Gi"},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := testGroup(Volcano, tc.annotations, tc.members, tc.min).volcanoPodGroup()
			want := map[string]any{
				"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
				"metadata": wantUnstructuredMeta(),
				"spec":     tc.wantSpec,
			}
			if diff := cmp.Diff(want, got.Object); diff != "" {
				t.Errorf("Volcano PodGroup (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestCoschedulingPodGroup(t *testing.T) {
	withPriority := members(3)
	withPriority.PriorityClassName = "high"
	for name, tc := range map[string]struct {
		annotations map[string]string
		members     Members
		wantSpec    map[string]any
	}{
		"timeout from the job's annotation and requests": {
			annotations: map[string]string{AnnotationScheduleTimeout: "90", AnnotationVolcanoQueue: "ignored"},
			members:     withPriority,
			wantSpec: map[string]any{
				"minMember": int64(3), "scheduleTimeoutSeconds": int64(90),
				"minResources": map[string]any{"cpu": "1500m", "memory": "3Gi"},
			},
		},
		"no timeout: the plugin's default": {
			members:  Members{Count: 2},
			wantSpec: map[string]any{"minMember": int64(2)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := testGroup(Coscheduling, tc.annotations, tc.members, 0).coschedulingPodGroup()
			want := map[string]any{
				"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
				"metadata": wantUnstructuredMeta(),
				"spec":     tc.wantSpec,
			}
			if diff := cmp.Diff(want, got.Object); diff != "" {
				t.Errorf("coscheduling PodGroup (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestGroupMinimum: the gang counts the job's pods but those made before it
// had this gang, and never asks for more than it has or less than one.
func TestGroupMinimum(t *testing.T) {
	p := &Plan{Mode: Coscheduling, Name: testGroupName, owner: newJob(nil, nil), ownerKind: testKind}
	inGroup := pod(p, "in", "", "")
	outside := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "before-the-gang", Namespace: testNamespace}}
	leaving := outside.DeepCopy()
	leaving.DeletionTimestamp = ptr.To(metav1.Now())
	for name, tc := range map[string]struct {
		count   int32
		min     int32
		live    []*corev1.Pod
		wantMin int32
	}{
		"every pod":                         {count: 4, wantMin: 4},
		"pods in the group count":           {count: 4, live: []*corev1.Pod{inGroup}, wantMin: 4},
		"a pod made before the gang is out": {count: 4, live: []*corev1.Pod{inGroup, outside}, wantMin: 3},
		"a terminating pod is not subtracted": {
			count: 4, live: []*corev1.Pod{leaving}, wantMin: 4,
		},
		"the annotation's minimum":         {count: 4, min: 2, wantMin: 2},
		"a minimum above the count is cut": {count: 4, min: 9, live: []*corev1.Pod{outside}, wantMin: 3},
		"never below one":                  {count: 1, live: []*corev1.Pod{outside, outside}, wantMin: 1},
	} {
		t.Run(name, func(t *testing.T) {
			p.min = tc.min
			g := p.group(Members{Count: tc.count}, tc.live)
			if g.min != tc.wantMin {
				t.Errorf("minimum = %d, want %d", g.min, tc.wantMin)
			}
		})
	}
}

func TestSpecDiffers(t *testing.T) {
	have := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	}
	want := map[string]any{"minMember": int64(3), "queue": "default", "minResources": map[string]any{"cpu": "1"}}
	for name, tc := range map[string]struct {
		have map[string]any
		want bool
	}{
		"same":                                 {have: map[string]any{"minMember": int64(3), "queue": "default", "minResources": map[string]any{"cpu": "1"}}},
		"a float64 of the same number":         {have: map[string]any{"minMember": float64(3), "queue": "default", "minResources": map[string]any{"cpu": "1"}}},
		"fields others set are left out":       {have: map[string]any{"minMember": int64(3), "queue": "default", "minResources": map[string]any{"cpu": "1"}, "minTaskMember": map[string]any{"a": int64(1)}}},
		"another minimum":                      {have: map[string]any{"minMember": int64(2), "queue": "default", "minResources": map[string]any{"cpu": "1"}}, want: true},
		"other requests":                       {have: map[string]any{"minMember": int64(3), "queue": "default", "minResources": map[string]any{"cpu": "2"}}, want: true},
		"a field Nereid no longer sets":        {have: map[string]any{"minMember": int64(3), "queue": "default", "minResources": map[string]any{"cpu": "1"}, "priorityClassName": "high"}, want: true},
		"a timeout Nereid no longer sets":      {have: map[string]any{"minMember": int64(3), "queue": "default", "minResources": map[string]any{"cpu": "1"}, "scheduleTimeoutSeconds": int64(60)}, want: true},
		"a field Nereid sets is missing":       {have: map[string]any{"minMember": int64(3), "minResources": map[string]any{"cpu": "1"}}, want: true},
		"no spec":                              {want: true},
		"a fractional float is another number": {have: map[string]any{"minMember": 3.5, "queue": "default", "minResources": map[string]any{"cpu": "1"}}, want: true},
	} {
		t.Run(name, func(t *testing.T) {
			if got := specDiffers(have(tc.have), want); got != tc.want {
				t.Errorf("specDiffers = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWithSpecKeepsOthersFields(t *testing.T) {
	have := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "g", "resourceVersion": "7"},
		"spec": map[string]any{
			"minMember": int64(2), "queue": "default", "minTaskMember": map[string]any{"a": int64(1)},
			"priorityClassName": "old", "scheduleTimeoutSeconds": int64(60),
		},
		"status": map[string]any{"phase": "Pending"},
	}}
	before := have.DeepCopy()
	got := withSpec(have, map[string]any{"minMember": int64(5), "queue": "gpu"})
	want := map[string]any{
		"metadata": map[string]any{"name": "g", "resourceVersion": "7"},
		"spec":     map[string]any{"minMember": int64(5), "queue": "gpu", "minTaskMember": map[string]any{"a": int64(1)}},
		"status":   map[string]any{"phase": "Pending"},
	}
	if diff := cmp.Diff(want, got.Object); diff != "" {
		t.Errorf("withSpec (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(before.Object, have.Object); diff != "" {
		t.Errorf("withSpec changed the cached object (-before,+after):\n%s", diff)
	}
}
