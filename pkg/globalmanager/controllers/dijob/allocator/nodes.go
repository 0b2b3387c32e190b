package allocator

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// EdgeNodeLabel marks an edge node, whatever its value. Edge nodes are a
// pool of their own (see the package documentation).
const EdgeNodeLabel = links.EdgeNodeRole

// Node is a node as the allocator sees it.
type Node struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	// Allocatable is the node's status.allocatable.
	Allocatable corev1.ResourceList
	// Used is what the pods counted on the node request, with "pods" their
	// number.
	Used corev1.ResourceList
	// Schedulable is false for a cordoned node (spec.unschedulable) or one
	// that is not Ready: no replica goes there.
	Schedulable bool
}

// Nodes returns the allocator's view of nodes, sorted by name. A node's Used
// counts the pods on it that have not finished (phase Succeeded or Failed):
// the pods bound to it (spec.nodeName), and the pods not yet bound whose
// required node affinity pins them to it (see common.Pin), since a job's pods are
// created pinned and wait for the scheduler a while. Pods for which exclude
// returns true are not counted (exclude may be nil): the pods of the
// preemptible jobs handed to Optimize, or a job's own pods when it is placed
// again. Requests are counted as the scheduler counts them: a container
// being resized at the larger of its sizes.
func Nodes(nodes []*corev1.Node, pods []*corev1.Pod, exclude func(*corev1.Pod) bool) []Node {
	used := make(map[string]corev1.ResourceList, len(nodes))
	for _, n := range nodes {
		used[n.Name] = corev1.ResourceList{}
	}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		list, ok := used[common.PinnedNode(pod)]
		if !ok || (exclude != nil && exclude(pod)) {
			continue
		}
		requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true})
		for name, q := range requests {
			sum := list[name]
			sum.Add(q)
			list[name] = sum
		}
		count := list[corev1.ResourcePods]
		count.Add(*resource.NewQuantity(1, resource.DecimalSI))
		list[corev1.ResourcePods] = count
	}
	views := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		views = append(views, Node{
			Name:        n.Name,
			Labels:      n.Labels,
			Taints:      n.Spec.Taints,
			Allocatable: n.Status.Allocatable,
			Used:        used[n.Name],
			Schedulable: !n.Spec.Unschedulable && ready(n),
		})
	}
	slices.SortFunc(views, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return views
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Slim is the transform of the allocator's cache: pods by SlimPod, nodes by
// SlimNode, anything else as it is.
func Slim(obj any) (any, error) {
	if node, ok := obj.(*corev1.Node); ok {
		return SlimNode(node), nil
	}
	return SlimPod(obj)
}

// SlimNode is a node as the allocator reads it (Nodes): its name, labels,
// taints, whether it is cordoned, what it can hold, and whether it is Ready;
// nothing of its images, addresses, other conditions or managed fields,
// which a cache of every node of the cluster would otherwise hold.
func SlimNode(node *corev1.Node) *corev1.Node {
	slim := &corev1.Node{}
	slim.Name, slim.UID, slim.ResourceVersion, slim.Labels = node.Name, node.UID, node.ResourceVersion, node.Labels
	slim.DeletionTimestamp = node.DeletionTimestamp
	slim.Spec.Taints, slim.Spec.Unschedulable = node.Spec.Taints, node.Spec.Unschedulable
	slim.Status.Allocatable = node.Status.Allocatable
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			slim.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return slim
}

// SlimPod is an informer transform for a cache of every pod of the cluster
// that only Nodes reads: it keeps what Nodes counts (phase, node, pinning
// affinity, the containers' requests, overhead and resize status) and the
// owner references (whose pod it is), and drops
// the rest (environment, volumes, managed fields…), so the cache costs a
// fraction of full pods.
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{}
	slim.Name, slim.Namespace, slim.UID, slim.ResourceVersion = pod.Name, pod.Namespace, pod.UID, pod.ResourceVersion
	slim.DeletionTimestamp = pod.DeletionTimestamp
	// Whose pod it is: Optimize leaves the pods of the jobs it moves out.
	slim.OwnerReferences = pod.OwnerReferences
	slim.Spec.NodeName, slim.Spec.Affinity, slim.Spec.Overhead, slim.Spec.Resources = pod.Spec.NodeName, pod.Spec.Affinity, pod.Spec.Overhead, pod.Spec.Resources
	slim.Spec.Containers = slimContainers(pod.Spec.Containers)
	slim.Spec.InitContainers = slimContainers(pod.Spec.InitContainers)
	slim.Status.Phase = pod.Status.Phase
	for _, cs := range pod.Status.ContainerStatuses {
		slim.Status.ContainerStatuses = append(slim.Status.ContainerStatuses, corev1.ContainerStatus{Name: cs.Name, Resources: cs.Resources})
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		slim.Status.InitContainerStatuses = append(slim.Status.InitContainerStatuses, corev1.ContainerStatus{Name: cs.Name, Resources: cs.Resources})
	}
	return slim, nil
}

func slimContainers(cs []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, 0, len(cs))
	for _, c := range cs {
		out = append(out, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
	}
	return out
}
