package allocator

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Taints the node lifecycle controller puts on a node it lost contact with.
var linkLossTaints = []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady}

// TolerateLinkLoss lets a pod of an edge node stay through a link outage of
// grace before the taint manager evicts it (Kubernetes' default is 300 s),
// unless the template says otherwise for those taints.
func TolerateLinkLoss(spec *corev1.PodSpec, grace time.Duration) {
	seconds := int64(grace / time.Second)
	for _, key := range linkLossTaints {
		mine := false
		for _, t := range spec.Tolerations {
			if t.Key == key || (t.Key == "" && t.Operator == corev1.TolerationOpExists) {
				mine = true
			}
		}
		if !mine {
			spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &seconds,
			})
		}
	}
}

// SelectsEdge says whether a pod template asks for edge nodes.
func SelectsEdge(spec *corev1.PodSpec) bool {
	if _, ok := spec.NodeSelector[EdgeNodeLabel]; ok {
		return true
	}
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == EdgeNodeLabel && r.Operator != corev1.NodeSelectorOpNotIn && r.Operator != corev1.NodeSelectorOpDoesNotExist {
				return true
			}
		}
	}
	return false
}
