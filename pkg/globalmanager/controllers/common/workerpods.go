package common

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// WorkerChain holds what IsWorkerPod follows from a pod up to its object:
// the caches of the ReplicaSets and Deployments that stand between a
// service's pods and the service. Either may be nil (no such chain is then
// followed).
type WorkerChain struct {
	ReplicaSets cache.Indexer
	Deployments cache.Indexer
}

// IsWorkerPod says whether pod is one of obj's workers: a pod Nereid made
// for it, controlled by obj itself (a job's pods) or by a ReplicaSet that a
// Deployment controls which obj controls (a service's pods), each controller
// reference naming the object the cache holds under that name, UID for UID.
// Labels say nothing here: anyone who may create pods or ReplicaSets in the
// namespace may copy them, and a pod taken for a worker is sent its object
// and reports for it.
func (c WorkerChain) IsWorkerPod(pod, obj metav1.Object) bool {
	if pod.GetNamespace() != obj.GetNamespace() {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return false
	}
	if ref.UID == obj.GetUID() {
		return true
	}
	if ref.APIVersion != "apps/v1" || ref.Kind != "ReplicaSet" {
		return false
	}
	rs, ok := controlledBy(c.ReplicaSets, pod.GetNamespace(), ref)
	if !ok {
		return false
	}
	ref = metav1.GetControllerOfNoCopy(rs)
	if ref == nil || ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" {
		return false
	}
	d, ok := controlledBy(c.Deployments, pod.GetNamespace(), ref)
	if !ok {
		return false
	}
	ref = metav1.GetControllerOfNoCopy(d)
	return ref != nil && ref.UID == obj.GetUID()
}

// controlledBy is the object of indexer that ref names in namespace, if its
// UID is ref's.
func controlledBy(indexer cache.Indexer, namespace string, ref *metav1.OwnerReference) (metav1.Object, bool) {
	if indexer == nil {
		return nil, false
	}
	o, exists, err := indexer.GetByKey(namespace + "/" + ref.Name)
	if err != nil || !exists {
		return nil, false
	}
	m, ok := o.(metav1.Object)
	if !ok || m.GetUID() != ref.UID {
		return nil, false
	}
	return m, true
}

// Pods are obj's worker pods in pods (a cache with IndexOwner): those its
// owner-uid label finds that IsWorkerPod takes for obj's, so a pod anyone
// labelled says nothing of obj.
func (c WorkerChain) Pods(pods cache.Indexer, obj metav1.Object) ([]*corev1.Pod, error) {
	labelled, err := ListOwned[*corev1.Pod](pods, obj)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(labelled, func(p *corev1.Pod) bool { return !c.IsWorkerPod(p, obj) }), nil
}
