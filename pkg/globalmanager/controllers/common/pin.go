package common

import corev1 "k8s.io/api/core/v1"

// nodeNameField is the one field a node selector term may match.
const nodeNameField = "metadata.name"

// Pin returns a copy of affinity whose required node affinity also requires
// the node named node: the affinity of a pod that must run there but still
// goes through the scheduler (a DIJob replica on its allocated node, a gang
// member whose template named a node). Every term of an existing required
// node affinity gets the requirement, so the template's own terms still
// hold.
func Pin(affinity *corev1.Affinity, node string) *corev1.Affinity {
	pinned := affinity.DeepCopy()
	if pinned == nil {
		pinned = &corev1.Affinity{}
	}
	if pinned.NodeAffinity == nil {
		pinned.NodeAffinity = &corev1.NodeAffinity{}
	}
	required := pinned.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if required == nil {
		required = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
		pinned.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = required
	}
	for i := range required.NodeSelectorTerms {
		term := &required.NodeSelectorTerms[i]
		term.MatchFields = append(term.MatchFields, corev1.NodeSelectorRequirement{
			Key: nodeNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
		})
	}
	return pinned
}

// PinnedNode returns the node a pod is bound to, or, for a pod not yet
// bound, the one node its required node affinity allows by name (every term
// requires metadata.name In [that node], as Pin writes); "" when neither.
func PinnedNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	affinity := pod.Spec.Affinity
	if affinity == nil || affinity.NodeAffinity == nil || affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	node := ""
	for _, term := range affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		named := termNode(term)
		if named == "" || (node != "" && named != node) {
			return ""
		}
		node = named
	}
	return node
}

// termNode returns the node a term names alone, or "".
func termNode(term corev1.NodeSelectorTerm) string {
	for _, r := range term.MatchFields {
		if r.Key == nodeNameField && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}
