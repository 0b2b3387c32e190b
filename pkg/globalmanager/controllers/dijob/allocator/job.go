package allocator

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// Replica is one pod replica to place. Its fields are read, never changed.
type Replica struct {
	// Task is the name of the replica's task (its type when the task has no
	// name).
	Task string
	// Type is the task's type: learners, evaluators and tasks of type none
	// are packed, collectors spread.
	Type v2alpha1.TaskType
	// Rank is the replica's global rank: the tasks in spec order, each
	// task's replicas from 0.
	Rank int
	// TaskRank is the replica's rank within its task.
	TaskRank int
	// Requests are the pod's effective requests, as the scheduler counts
	// them (see PodRequests).
	Requests corev1.ResourceList
	// NodeSelector is the pod's nodeSelector.
	NodeSelector map[string]string
	// Affinity is the pod's affinity; only its required node affinity
	// counts (preferred node affinity and pod (anti-)affinity are ignored).
	Affinity *corev1.Affinity
	// Tolerations are the pod's tolerations.
	Tolerations []corev1.Toleration
}

// Job is a DIJob as the allocator sees it.
type Job struct {
	// Key is the job's namespace/name.
	Key         string
	Preemptible bool
	// Priority orders the preemptible jobs in Optimize: high before normal.
	Priority v2alpha1.Priority
	// Created orders jobs of equal priority in Optimize: older first.
	Created time.Time
	// Replicas are the job's replicas in rank order.
	Replicas []Replica
}

// JobOf returns the allocator's view of a DIJob: its replicas in rank order,
// each from its task's pod template. The Job shares the DIJob's maps and
// slices (nodeSelector, affinity, tolerations); neither is changed.
func JobOf(job *v2alpha1.DIJob) Job {
	priority := job.Spec.Priority
	if priority == "" {
		priority = v2alpha1.PriorityNormal
	}
	j := Job{
		Key:         cache.MetaObjectToName(job).String(),
		Preemptible: job.Spec.Preemptible,
		Priority:    priority,
		Created:     job.CreationTimestamp.Time,
	}
	for t := range job.Spec.Tasks {
		task := &job.Spec.Tasks[t]
		name := task.TaskName()
		replicas := int(job.TaskReplicas(t))
		spec := &task.Template.Spec
		requests := PodRequests(spec)
		for i := range replicas {
			j.Replicas = append(j.Replicas, Replica{
				Task:         name,
				Type:         task.Type,
				Rank:         len(j.Replicas),
				TaskRank:     i,
				Requests:     requests,
				NodeSelector: spec.NodeSelector,
				Affinity:     spec.Affinity,
				Tolerations:  spec.Tolerations,
			})
		}
	}
	return j
}

// PodRequests returns the requests of a pod of this spec as the scheduler
// counts them (k8s.io/component-helpers/resource, the scheduler's own helper):
// the sum over its containers, raised to what each init container needs
// (with the restartable init containers, sidecars, before it), pod-level
// requests where the spec sets them, plus the spec's overhead. A template
// has no overhead yet: the RuntimeClass admission adds it to the pod.
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	return resourcehelper.PodRequests(&corev1.Pod{Spec: *spec}, resourcehelper.PodResourcesOptions{})
}
