// Package placement says why a job's pod cannot be placed, in words a
// person can act on: the pod, the node it is pinned to, and what is wrong
// there (no such node, cordoned, a taint it does not tolerate, too little
// of a resource free), with what the scheduler itself wrote on the pod. A
// gang's Scheduled condition and a job without a gang say it alike.
package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// AnnotationPinnedNode is, on a pod whose template named a node
// (spec.nodeName) that gang scheduling turned into a required node
// affinity, that node.
const AnnotationPinnedNode = "nereid.io/pinned-node"

// ReasonUnschedulable is the reason of a job's Scheduled condition while a
// pod of it, without a gang, cannot be placed, or, in a gang, while the
// node a pod is pinned to refuses it until a person acts (Refusal.Lasts).
const ReasonUnschedulable = "Unschedulable"

// maxSchedulerSays bounds what is quoted of the scheduler's message: it
// counts every node of the cluster, and a condition is read by a person.
const maxSchedulerSays = 1024

// PinnedNode is the one node pod may run on, by name: the node it is bound
// to, the node its template named (AnnotationPinnedNode), its node
// selector's kubernetes.io/hostname, or the one node its required node
// affinity allows (by metadata.name or kubernetes.io/hostname); "" when
// none. A hostname label is taken as the node's name, as it is unless a
// kubelet was told otherwise.
func PinnedNode(pod *corev1.Pod) string {
	if node := common.PinnedNode(pod); node != "" {
		return node
	}
	if node := pod.Annotations[AnnotationPinnedNode]; node != "" {
		return node
	}
	if node := pod.Spec.NodeSelector[corev1.LabelHostname]; node != "" {
		return node
	}
	return hostnameAffinity(pod)
}

// hostnameAffinity is the one kubernetes.io/hostname every term of pod's
// required node affinity asks for, "" when there is none.
func hostnameAffinity(pod *corev1.Pod) string {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	node := ""
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		named := ""
		for _, r := range term.MatchExpressions {
			if r.Key == corev1.LabelHostname && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				named = r.Values[0]
			}
		}
		if named == "" || (node != "" && named != node) {
			return ""
		}
		node = named
	}
	return node
}

// Refusal is why the node a pod is pinned to refuses it.
type Refusal struct {
	// Says is "pod <pod> is pinned to node <node>, <why>"; "" when the pod
	// is not pinned or nothing is wrong with its node that Nodes can see.
	Says string
	// Lasts is true when the refusal holds until a person acts: the node
	// does not exist, is cordoned, has a taint the pod does not tolerate,
	// or can never hold what the pod asks for. A node only too full for
	// now (its pods will end) does not last.
	Lasts bool
}

// NodeSays is why pod, when it is pinned to a node, may not go there.
func (r *Nodes) NodeSays(ctx context.Context, pod *corev1.Pod) Refusal {
	node := PinnedNode(pod)
	why, lasts := r.nodeSays(ctx, pod, node)
	if why == "" {
		return Refusal{}
	}
	return Refusal{Says: fmt.Sprintf("pod %s is pinned to node %s, %s", pod.Name, node, why), Lasts: lasts}
}

// SchedulerSays is what the scheduler last wrote on pod while it could not
// place it (its PodScheduled condition, False), cut to a bounded length;
// "" when it wrote nothing.
func SchedulerSays(pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return common.ClipText(c.Message, maxSchedulerSays)
		}
	}
	return ""
}

// unschedulable says whether the scheduler gave up on pod for now.
func unschedulable(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
	})
}

// Unplaced says why pods that cannot be placed are not: the first of them
// by name, its node and what is wrong there, what the scheduler says, and
// how many others cannot be placed. A pod cannot be placed when the
// scheduler gave up on it (PodScheduled False, Unschedulable), or its node
// says why it cannot go there (a pod bound by its template's spec.nodeName
// to a node that does not exist is never seen by a scheduler). "" when
// every pod is placed or only waits its turn.
func (r *Nodes) Unplaced(ctx context.Context, pods []*corev1.Pod) string {
	type stuck struct {
		pod       *corev1.Pod
		nodeSays  string
		scheduler string
	}
	var all []stuck
	for _, pod := range pods {
		if common.PodTerminating(pod) || common.PodFinished(pod) || pod.Status.Phase == corev1.PodRunning {
			continue
		}
		s := stuck{pod: pod, nodeSays: r.NodeSays(ctx, pod).Says}
		if pod.Spec.NodeName == "" {
			s.scheduler = SchedulerSays(pod)
		}
		if s.nodeSays == "" && !(pod.Spec.NodeName == "" && unschedulable(pod)) {
			continue
		}
		all = append(all, s)
	}
	if len(all) == 0 {
		return ""
	}
	slices.SortFunc(all, func(a, b stuck) int { return strings.Compare(a.pod.Name, b.pod.Name) })
	first := all[0]
	msg := first.nodeSays
	if msg == "" {
		msg = "pod " + first.pod.Name
		if node := PinnedNode(first.pod); node != "" {
			msg += ", pinned to node " + node + ","
		}
		msg += " cannot be placed"
	}
	if first.scheduler != "" {
		msg += "; the scheduler says: " + first.scheduler
	}
	if len(all) > 1 {
		msg += fmt.Sprintf(" (and %d more pods cannot be placed)", len(all)-1)
	}
	return common.ClipConditionMessage(msg)
}
