package gang

import (
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// What a job's annotations and labels say to the gang, and what pods carry.
const (
	// AnnotationScheduler on a job overrides --gang-scheduler for it: one of
	// auto, kubernetes, volcano, coscheduling, none.
	AnnotationScheduler = "nereid.io/gang-scheduler"
	// AnnotationMinMember on a DIJob sets how many of its pods the gang
	// needs placed together (default: all of them).
	AnnotationMinMember = "nereid.io/gang-min-member"
	// AnnotationScheduleTimeout on a job sets the coscheduling PodGroup's
	// scheduleTimeoutSeconds (the plugin's default when absent).
	AnnotationScheduleTimeout = "nereid.io/gang-schedule-timeout-seconds"

	// AnnotationVolcanoQueue on a job names the Volcano queue of its
	// PodGroup (Volcano's own annotation; "default" when absent).
	AnnotationVolcanoQueue = "scheduling.volcano.sh/queue-name"
	// VolcanoSchedulerName is the scheduler name of Volcano's pods.
	VolcanoSchedulerName = "volcano"
	// AnnotationVolcanoGroup on a pod names its Volcano PodGroup.
	AnnotationVolcanoGroup = "scheduling.k8s.io/group-name"
	// LabelCoschedulingGroup on a pod names its coscheduling PodGroup.
	LabelCoschedulingGroup = "scheduling.x-k8s.io/pod-group"

	// LabelKueueQueue on a job sends it to that Kueue LocalQueue; its pods
	// carry it too.
	LabelKueueQueue = "kueue.x-k8s.io/queue-name"
	// LabelKueueGroup and AnnotationKueueTotal make Kueue admit a job's pods
	// as one workload (Kueue's plain pod groups).
	LabelKueueGroup      = "kueue.x-k8s.io/pod-group-name"
	AnnotationKueueTotal = "kueue.x-k8s.io/pod-group-total-count"
)

// templateName is the one PodGroup template of a job's Workload.
const templateName = "workers"

// group is what the objects of one job's gang are built from.
type group struct {
	name      string
	owner     common.Owner
	ownerKind schema.GroupVersionKind
	// count is how many pods the group has; min how many must be placed together.
	count, min        int32
	requests          corev1.ResourceList
	priorityClassName string
	// queue is the Volcano queue; timeout the coscheduling timeout (0: unset).
	queue   string
	timeout int32
}

func (g *group) meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            g.name,
		Namespace:       g.owner.GetNamespace(),
		Labels:          common.OwnerLabels(g.owner, common.LowerKind(g.ownerKind)),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(g.owner, g.ownerKind)},
	}
}

func (g *group) gangPolicy() schedulingv1beta1.PodGroupSchedulingPolicy {
	return schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: g.min}}
}

// workload is the job's Workload: one PodGroup template, a gang of min.
func (g *group) workload() *schedulingv1beta1.Workload {
	return &schedulingv1beta1.Workload{
		ObjectMeta: g.meta(),
		Spec: schedulingv1beta1.WorkloadSpec{
			ControllerRef: &schedulingv1beta1.TypedLocalObjectReference{
				APIGroup: g.ownerKind.Group, Kind: g.ownerKind.Kind, Name: g.owner.GetName(),
			},
			PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{Name: templateName, SchedulingPolicy: g.gangPolicy(),
				PriorityClassName: g.priorityClassName}},
		},
	}
}

// podGroup is the job's PodGroup, made from the Workload's template.
func (g *group) podGroup() *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: g.meta(),
		Spec: schedulingv1beta1.PodGroupSpec{
			WorkloadRef:       &schedulingv1beta1.WorkloadReference{WorkloadName: g.name, TemplateName: templateName},
			SchedulingPolicy:  g.gangPolicy(),
			PriorityClassName: g.priorityClassName,
		},
	}
}

// unstructuredPodGroup is a PodGroup of Volcano or coscheduling: its
// metadata and the spec fields Nereid sets.
func (g *group) unstructuredPodGroup(gvr schema.GroupVersionResource, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind("PodGroup")
	m := g.meta()
	u.SetName(m.Name)
	u.SetNamespace(m.Namespace)
	u.SetLabels(m.Labels)
	u.SetOwnerReferences(m.OwnerReferences)
	u.Object["spec"] = spec
	return u
}

// volcanoPodGroup is the job's scheduling.volcano.sh/v1beta1 PodGroup.
func (g *group) volcanoPodGroup() *unstructured.Unstructured {
	spec := map[string]any{
		"minMember": int64(g.min),
		"queue":     g.queue,
	}
	if g.priorityClassName != "" {
		spec["priorityClassName"] = g.priorityClassName
	}
	if len(g.requests) > 0 {
		spec["minResources"] = quantities(g.requests)
	}
	return g.unstructuredPodGroup(volcanoPodGroupsResource, spec)
}

// coschedulingPodGroup is the job's scheduling.x-k8s.io/v1alpha1 PodGroup.
func (g *group) coschedulingPodGroup() *unstructured.Unstructured {
	spec := map[string]any{"minMember": int64(g.min)}
	if g.timeout > 0 {
		spec["scheduleTimeoutSeconds"] = int64(g.timeout)
	}
	if len(g.requests) > 0 {
		spec["minResources"] = quantities(g.requests)
	}
	return g.unstructuredPodGroup(coschedulingPodGroupsResource, spec)
}

// quantities is a resource list as JSON has it: name → canonical string.
func quantities(l corev1.ResourceList) map[string]any {
	out := make(map[string]any, len(l))
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		out[string(name)] = q.String()
	}
	return out
}

// specDiffers says whether the spec fields Nereid sets differ in have from
// want; fields others set (a webhook's defaults) are left out.
func specDiffers(have *unstructured.Unstructured, want map[string]any) bool {
	spec, _ := have.Object["spec"].(map[string]any)
	for k, v := range want {
		if !equality.Semantic.DeepEqual(normalize(spec[k]), normalize(v)) {
			return true
		}
	}
	// A field Nereid no longer sets (a timeout annotation removed) is stale too.
	for _, k := range []string{"priorityClassName", "minResources", "scheduleTimeoutSeconds"} {
		if _, set := want[k]; !set && spec[k] != nil {
			return true
		}
	}
	return false
}

// normalize makes JSON numbers comparable: the API server's int64 and a
// float64 from another decoder are the same number.
func normalize(v any) any {
	switch n := v.(type) {
	case int32:
		return int64(n)
	case int:
		return int64(n)
	case float64:
		if n == float64(int64(n)) {
			return int64(n)
		}
	}
	return v
}

// withSpec is have with Nereid's fields of its spec set to want's, others kept.
func withSpec(have *unstructured.Unstructured, want map[string]any) *unstructured.Unstructured {
	out := have.DeepCopy()
	spec, _ := out.Object["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	for _, k := range []string{"priorityClassName", "minResources", "scheduleTimeoutSeconds"} {
		delete(spec, k)
	}
	maps.Copy(spec, want)
	out.Object["spec"] = spec
	return out
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
