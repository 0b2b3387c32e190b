package jointinference

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// workerPods finds a service's worker pods, which its Deployments' ReplicaSets
// control: the pods' owner-uid label finds them, the chain of controllers
// (pod, ReplicaSet, Deployment, service) says they are the service's.
type workerPods struct {
	pods  cache.Indexer
	chain common.WorkerChain
}

// watch caches the pods of the services' workers and their ReplicaSets, the
// pods indexed by owner, and returns the handlers that sync a service when
// one of its pods or ReplicaSets changes: a pod that comes before its
// ReplicaSet is the service's only once that comes. deployments is the
// cache of the services' Deployments.
func (w *workerPods) watch(d kinds.Deps, services cache.SharedIndexInformer, deployments cache.Indexer, enqueue func(key string)) ([]common.Handler, error) {
	podInformer, rsInformer := d.KubeInformers.Core().V1().Pods().Informer(), d.KubeInformers.Apps().V1().ReplicaSets().Informer()
	indexed, err := common.IndexChildren(podInformer)
	if err != nil {
		return nil, err
	}
	owners, err := common.IndexByUID(services)
	if err != nil {
		return nil, err
	}
	w.pods = indexed[0]
	w.chain = common.WorkerChain{ReplicaSets: rsInformer.GetIndexer(), Deployments: deployments}
	handler := common.LabelledChildHandler(owners, enqueue)
	return []common.Handler{{Informer: podInformer, Handler: handler}, {Informer: rsInformer, Handler: handler}}, nil
}

// of lists the worker pods of ji in the cache.
func (w *workerPods) of(ji *sednav1.JointInferenceService) ([]*corev1.Pod, error) {
	return w.chain.Pods(w.pods, ji)
}

// setScheduled sets the service's Scheduled condition from its worker pods,
// as a learning cycle's is set from its pods (gang.SetPlacementCondition):
// Unschedulable, naming the pod, the node it is pinned to and why, while a
// worker pod cannot be placed; Placed once none is refused any more; no
// condition on a service none of whose pods ever was. It returns the events
// of the change: one Warning when a pod is first refused.
func (c *Controller) setScheduled(ji *sednav1.JointInferenceService, pods []*corev1.Pod, now metav1.Time) []common.Event {
	var events []common.Event
	ji.Status.Conditions, events = gang.SetPlacementCondition(ji, ji.Status.Conditions, c.deps.Gangs.Placement(pods), now)
	return events
}
