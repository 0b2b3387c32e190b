package coordinated

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
)

// Place applies where a v1 job's replica may run, as for v2alpha1 jobs: a
// collector whose template selects edge nodes runs there and tolerates a
// link outage of linkGrace before eviction; every other replica (the
// coordinator, learners, aggregators, DDP learners and collectors that do
// not ask for the edge) runs in the cloud, a required node affinity keeping
// it off nodes labelled allocator.EdgeNodeLabel, as DI-orchestrator, which
// knew no edge, never put one there.
func Place(pod *corev1.Pod, linkGrace time.Duration) {
	if TypeOf(pod) == Collector && allocator.SelectsEdge(&pod.Spec) {
		allocator.TolerateLinkLoss(&pod.Spec, linkGrace)
		return
	}
	notEdge := corev1.NodeSelectorRequirement{Key: allocator.EdgeNodeLabel, Operator: corev1.NodeSelectorOpDoesNotExist}
	a := pod.Spec.Affinity
	if a == nil {
		a = &corev1.Affinity{}
		pod.Spec.Affinity = a
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{notEdge}}},
		}
		return
	}
	// Terms are ORed: each must keep off edge nodes.
	for i := range req.NodeSelectorTerms {
		req.NodeSelectorTerms[i].MatchExpressions = append(req.NodeSelectorTerms[i].MatchExpressions, notEdge)
	}
}
