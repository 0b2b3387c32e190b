package allocator

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// resources builds a resource list from name, quantity pairs.
func resources(kv ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		list[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return list
}

func pairs(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

type nodeOption func(*Node)

// cloudNode is a schedulable node with cpu cores, 16Gi of memory and 110
// pods, nothing used.
func cloudNode(name, cpu string, opts ...nodeOption) Node {
	n := Node{
		Name:        name,
		Labels:      pairs("kubernetes.io/hostname", name),
		Allocatable: resources("cpu", cpu, "memory", "16Gi", "pods", "110"),
		Used:        corev1.ResourceList{},
		Schedulable: true,
	}
	for _, opt := range opts {
		opt(&n)
	}
	return n
}

func edgeNode(name, cpu string, opts ...nodeOption) Node {
	return cloudNode(name, cpu, append([]nodeOption{withLabels(EdgeNodeLabel, "")}, opts...)...)
}

func withUsed(kv ...string) nodeOption {
	return func(n *Node) { n.Used = resources(kv...) }
}

func withLabels(kv ...string) nodeOption {
	return func(n *Node) {
		for k, v := range pairs(kv...) {
			n.Labels[k] = v
		}
	}
}

func withAllocatable(kv ...string) nodeOption {
	return func(n *Node) {
		for k, v := range resources(kv...) {
			n.Allocatable[k] = v
		}
	}
}

func withoutAllocatable(name corev1.ResourceName) nodeOption {
	return func(n *Node) { delete(n.Allocatable, name) }
}

func withTaint(key, value string, effect corev1.TaintEffect) nodeOption {
	return func(n *Node) { n.Taints = append(n.Taints, corev1.Taint{Key: key, Value: value, Effect: effect}) }
}

func cordoned(n *Node) { n.Schedulable = false }

type taskOption func(*v2alpha1.Task)

// task is a task of replicas whose one container requests requests.
func task(typ v2alpha1.TaskType, replicas int32, requests corev1.ResourceList, opts ...taskOption) v2alpha1.Task {
	t := v2alpha1.Task{Type: typ, Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "di", Resources: corev1.ResourceRequirements{Requests: requests}}},
	}}}
	for _, opt := range opts {
		opt(&t)
	}
	return t
}

func named(name string) taskOption {
	return func(t *v2alpha1.Task) { t.Name = name }
}

func selecting(kv ...string) taskOption {
	return func(t *v2alpha1.Task) { t.Template.Spec.NodeSelector = pairs(kv...) }
}

// requiring sets the required node affinity: the terms are ORed.
func requiring(terms ...corev1.NodeSelectorTerm) taskOption {
	return func(t *v2alpha1.Task) {
		if t.Template.Spec.Affinity == nil {
			t.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		}
		t.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: terms}
	}
}

func preferring(weight int32, term corev1.NodeSelectorTerm) taskOption {
	return func(t *v2alpha1.Task) {
		if t.Template.Spec.Affinity == nil {
			t.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
		}
		na := t.Template.Spec.Affinity.NodeAffinity
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: term})
	}
}

// expression is a term of one label requirement.
func expression(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func tolerating(key string, op corev1.TolerationOperator, value string, effect corev1.TaintEffect) taskOption {
	return func(t *v2alpha1.Task) {
		t.Template.Spec.Tolerations = append(t.Template.Spec.Tolerations, corev1.Toleration{Key: key, Operator: op, Value: value, Effect: effect})
	}
}

// created is when the fixtures' jobs were created, give or take minutes.
var created = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// dijob is a DIJob ns/name of tasks, created created.
func dijob(name string, tasks ...v2alpha1.Task) *v2alpha1.DIJob {
	return &v2alpha1.DIJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v2alpha1.DIJobSpec{Tasks: tasks},
	}
}

// jobOf is the Job of a DIJob ns/job of tasks.
func jobOf(tasks ...v2alpha1.Task) Job {
	return JobOf(dijob("job", tasks...))
}

const (
	learner   = v2alpha1.TaskTypeLearner
	collector = v2alpha1.TaskTypeCollector
	evaluator = v2alpha1.TaskTypeEvaluator
	none      = v2alpha1.TaskTypeNone
)
