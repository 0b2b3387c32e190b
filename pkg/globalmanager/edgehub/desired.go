package edgehub

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// The indexes the hub adds to the informers. Their names are the hub's own
// so they never clash with a controller's indexes on the same informer;
// objects by the Models they name is the shared common.ByModel.
const (
	// indexNode keys objects by the nodes their templates name and the node
	// they are placed on.
	indexNode = "edgehub.nereid.io/node"
	// indexDataset keys objects by namespace/dataset for each Dataset they
	// name.
	indexDataset = "edgehub.nereid.io/dataset"
	// indexUID keys objects by UID, to find a worker pod's owner.
	indexUID = "edgehub.nereid.io/uid"

	// podIndexNode keys worker pods by the node they are bound to.
	podIndexNode = "edgehub.nereid.io/pod-node"
	// podIndexOwnerNode keys worker pods by owner UID/node.
	podIndexOwnerNode = "edgehub.nereid.io/pod-owner-node"
)

// The object kinds others name: Datasets bring the objects that name them to
// their node, and a node needs the Models of what it runs.
var (
	datasetKind = sednav1.DatasetKind.Kind
	modelKind   = sednav1.ModelKind.Kind
)

// objVersion is what tells two versions of an object on a node apart: what
// the edge uses of it (its digest; see edgeVersion), and which of its pods
// are on the node. resourceVersion goes with them, for the LocalController.
type objVersion struct {
	resourceVersion string
	digest          string // edgeproto.ObjectDigest of the object as sent
	workers         string // edgeproto.WorkersDigest of the workers
}

func versionOf(v edgeproto.ObjectVersion) objVersion {
	return objVersion{resourceVersion: v.ResourceVersion, digest: v.Digest, workers: v.Workers}
}

// sameOnEdge says whether a LocalController that holds v needs nothing of w:
// the same workers, and the same digest (an object whose status alone
// changed is not sent again) or, where one has no digest (a LocalController
// that predates them), the same resourceVersion.
func (v objVersion) sameOnEdge(w objVersion) bool {
	if v.workers != w.workers {
		return false
	}
	if v.digest != "" && w.digest != "" {
		return v.digest == w.digest
	}
	return v.resourceVersion == w.resourceVersion
}

// desiredObject is the latest version of an object that concerns a node.
type desiredObject struct {
	kind    *kind
	obj     metav1.Object
	workers []edgeproto.Worker // its pods on the node, sorted by name
	version objVersion
}

// objectVersion is d's ObjectVersion under ref.
func (d desiredObject) objectVersion(ref edgeproto.ObjectRef) edgeproto.ObjectVersion {
	return edgeproto.ObjectVersion{ObjectRef: ref, ResourceVersion: d.version.resourceVersion, Digest: d.version.digest, Workers: d.version.workers}
}

func nsKey(namespace, name string) string { return namespace + "/" + name }

// addIndexers adds the hub's indexes to the informers; it must run before
// they start.
func (h *Hub) addIndexers() error {
	keys := func(ns string, names []string) []string {
		out := make([]string, 0, len(names))
		for _, n := range names {
			out = append(out, nsKey(ns, n))
		}
		return out
	}
	for _, k := range h.kinds {
		err := k.informer.AddIndexers(cache.Indexers{
			indexNode: func(obj any) ([]string, error) {
				if o, ok := obj.(metav1.Object); ok {
					return templateNodes(o), nil
				}
				return nil, nil
			},
			indexDataset: func(obj any) ([]string, error) {
				if o, ok := obj.(metav1.Object); ok {
					return keys(o.GetNamespace(), datasetNames(o)), nil
				}
				return nil, nil
			},
			indexUID: func(obj any) ([]string, error) {
				if o, ok := obj.(metav1.Object); ok {
					return []string{string(o.GetUID())}, nil
				}
				return nil, nil
			},
		})
		if err != nil {
			return fmt.Errorf("adding edge hub indexers to the %s informer: %w", k.name, err)
		}
		// Objects by the Models they name: the index the controllers and the
		// Model protection share.
		if err := common.IndexByModel(k.informer); err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
	}
	ownerNode := func(obj any) (owner, node string) {
		if p, ok := obj.(*corev1.Pod); ok {
			return p.Labels[common.LabelOwnerUID], p.Spec.NodeName
		}
		return "", ""
	}
	err := h.pods.AddIndexers(cache.Indexers{
		podIndexNode: func(obj any) ([]string, error) {
			if owner, node := ownerNode(obj); owner != "" && node != "" {
				return []string{node}, nil
			}
			return nil, nil
		},
		podIndexOwnerNode: func(obj any) ([]string, error) {
			if owner, node := ownerNode(obj); owner != "" && node != "" {
				return []string{owner + "/" + node}, nil
			}
			return nil, nil
		},
	})
	if err != nil {
		return fmt.Errorf("adding edge hub indexers to the pod informer: %w", err)
	}
	// An object's pods, wherever bound, by the index the controllers find
	// their children by (added here too when no controller shares the
	// informer).
	if _, err := common.IndexChildren(h.pods); err != nil {
		return fmt.Errorf("adding the owner index to the pod informer: %w", err)
	}
	return nil
}

// byIndex returns the objects an informer's index holds under key.
func byIndex(inf cache.SharedIndexInformer, index, key string) []metav1.Object {
	found, err := inf.GetIndexer().ByIndex(index, key)
	if err != nil {
		return nil // not reached: the index is the hub's own
	}
	out := make([]metav1.Object, 0, len(found))
	for _, o := range found {
		if m, ok := o.(metav1.Object); ok {
			out = append(out, m)
		}
	}
	return out
}

// getCached returns the object an informer's cache holds under
// namespace/name.
func getCached(inf cache.SharedIndexInformer, namespace, name string) (metav1.Object, bool) {
	o, exists, err := inf.GetIndexer().GetByKey(nsKey(namespace, name))
	if err != nil || !exists {
		return nil, false
	}
	m, ok := o.(metav1.Object)
	return m, ok
}

// workersOn are obj's pods bound to node, sorted by name, with their
// addresses. A pod counts where it was scheduled, whatever its template
// said.
func (h *Hub) workersOn(obj metav1.Object, node string) []edgeproto.Worker {
	pods := byIndex(h.pods, podIndexOwnerNode, string(obj.GetUID())+"/"+node)
	workers := make([]edgeproto.Worker, 0, len(pods))
	for _, p := range pods {
		if h.chain.IsWorkerPod(p, obj) {
			workers = append(workers, edgeproto.Worker{Name: p.GetName(), IPs: workerIPs(p), Done: finished(p)})
		}
	}
	slices.SortFunc(workers, func(a, b edgeproto.Worker) int { return strings.Compare(a.Name, b.Name) })
	return workers
}

// workerIPs are the addresses a worker pod's reports come from: its IPs
// (status.podIPs; a hostNetwork pod's are its node's), in canonical form, at
// most edgeproto.MaxWorkerIPs. A pod that has finished has none: its
// address may be given to another pod.
func workerIPs(o metav1.Object) []string {
	pod, ok := o.(*corev1.Pod)
	if !ok || finished(pod) {
		return nil
	}
	podIPs := pod.Status.PodIPs
	if len(podIPs) == 0 && pod.Status.PodIP != "" {
		podIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
	}
	var ips []string
	for _, p := range podIPs {
		addr, err := netip.ParseAddr(p.IP)
		if err != nil || len(ips) == edgeproto.MaxWorkerIPs {
			continue
		}
		if ip := addr.Unmap().String(); !contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	return ips
}

// desired is the latest version of every object that concerns node: those
// an edge node's LocalController needs because it runs, or may run, a worker
// of them, and the Datasets and Models those name.
//
//   - an object with a template pinned to node (spec.nodeName), or placed on
//     node (a Dataset);
//   - an object with a worker pod bound to node (placed by nodeSelector or
//     affinity, it counts where it was scheduled);
//   - an object that names a Dataset (same namespace) on node;
//   - a Model (same namespace) that an object above names.
//
// With each object of a kind that has workers go the names of its pods on
// node. What is missing from the caches (a Dataset or Model not yet
// created) concerns nothing.
func (h *Hub) desired(node string) map[edgeproto.ObjectRef]desiredObject {
	out := make(map[edgeproto.ObjectRef]desiredObject)
	if node == "" {
		return out
	}
	add := func(k *kind, obj metav1.Object) {
		ref := edgeproto.ObjectRef{Kind: k.name, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if _, ok := out[ref]; ok {
			return
		}
		d := desiredObject{kind: k, obj: obj, version: objVersion{resourceVersion: obj.GetResourceVersion(), digest: h.digests.of(k, obj)}}
		if k.workers {
			d.workers = h.workersOn(obj, node)
			d.version.workers = edgeproto.WorkersDigest(d.workers)
		}
		out[ref] = d
	}
	for _, k := range h.kinds {
		for _, obj := range byIndex(k.informer, indexNode, node) {
			add(k, obj)
		}
	}
	// By namespace and UID: a pod in another namespace that names an
	// owner's UID must not hide that owner's own pods on the node.
	seenOwner := make(map[string]bool)
	for _, pod := range byIndex(h.pods, podIndexNode, node) {
		uid := pod.GetLabels()[common.LabelOwnerUID]
		owner := nsKey(pod.GetNamespace(), uid)
		if seenOwner[owner] {
			continue
		}
		for _, k := range h.kinds {
			if !k.workers {
				continue
			}
			for _, obj := range byIndex(k.informer, indexUID, uid) {
				// The label only finds the object: a pod anyone labelled
				// brings it nowhere (another pod of the object may yet).
				if h.chain.IsWorkerPod(pod, obj) {
					seenOwner[owner] = true
					add(k, obj)
				}
			}
		}
	}
	if datasets := h.byName[datasetKind]; datasets != nil {
		for _, ds := range byIndex(datasets.informer, indexNode, node) {
			for _, k := range h.kinds {
				for _, obj := range byIndex(k.informer, indexDataset, nsKey(ds.GetNamespace(), ds.GetName())) {
					add(k, obj)
				}
			}
		}
	}
	if models := h.byName[modelKind]; models != nil {
		var named []edgeproto.ObjectRef
		for ref, d := range out {
			for _, m := range modelNames(d.obj) {
				named = append(named, edgeproto.ObjectRef{Kind: modelKind, Namespace: ref.Namespace, Name: m})
			}
		}
		for _, ref := range named {
			if m, ok := getCached(models.informer, ref.Namespace, ref.Name); ok {
				add(models, m)
			}
		}
	}
	return out
}

// finished says whether o is a pod that has finished.
func finished(o metav1.Object) bool {
	pod, ok := o.(*corev1.Pod)
	return ok && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)
}

// finishedAt is when pod's last container finished, zero when no container
// says.
func finishedAt(pod *corev1.Pod) time.Time {
	var last time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(last) {
			last = t.FinishedAt.Time
		}
	}
	return last
}

// finishSlack is how much later than a pod's last container finished its
// node's LocalController may have taken a report of it: both clocks are the
// node's, and the kubelet writes the time a moment after the process ends.
const finishSlack = 2 * time.Second

// checkWorker refuses a report of worker about obj, of kind k, from node,
// that came from the address from ("" if the LocalController did not say)
// at receivedAt,
// unless worker is one of obj's pods bound to node and from is one of its
// IPs, or worker is the LocalController itself and k's LocalControllers
// report under their own name (the learning cycles'; the worker API refuses
// the name to workers). The LocalController has checked it already with
// the workers and addresses the hub sent; this is the cloud's own check,
// against the latest pods. A finished pod's IPs still count here: its last
// report may be applied after it has finished, but only a report taken
// before then: after, its address may be another pod's.
func (h *Hub) checkWorker(node string, k *kind, obj metav1.Object, worker, from string, receivedAt time.Time) error {
	if worker == edgeproto.LocalControllerWorker {
		if !k.ownReports {
			return edgeproto.Refuse("the LocalController reports under its own name only for learning cycles, not for a %s", k.name)
		}
		return nil
	}
	o, exists, err := h.pods.GetIndexer().GetByKey(nsKey(obj.GetNamespace(), worker))
	pod, isPod := o.(*corev1.Pod)
	switch {
	case err != nil || !exists || !isPod:
		return edgeproto.Refuse("worker %s is not a pod of %s/%s", worker, obj.GetNamespace(), obj.GetName())
	case !h.chain.IsWorkerPod(pod, obj):
		return edgeproto.Refuse("pod %s/%s is not a worker of %s", pod.Namespace, pod.Name, obj.GetName())
	case pod.Spec.NodeName != node:
		return edgeproto.Refuse("pod %s/%s runs on %q, not on node %s", pod.Namespace, pod.Name, pod.Spec.NodeName, node)
	case from != "" && !hasIP(pod, from):
		return edgeproto.Refuse("the report of pod %s/%s came from %s, which is not the pod's address", pod.Namespace, pod.Name, from)
	}
	if at := finishedAt(pod); from != "" && finished(pod) && !at.IsZero() && receivedAt.After(at.Add(finishSlack)) {
		return edgeproto.Refuse("the report of pod %s/%s was taken at %s, after the pod finished at %s: its address %s may be another pod's",
			pod.Namespace, pod.Name, receivedAt.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339), from)
	}
	return nil
}

// hasIP says whether ip (canonical) is one of pod's IPs, in any phase.
func hasIP(pod *corev1.Pod, ip string) bool {
	want, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, p := range append([]corev1.PodIP{{IP: pod.Status.PodIP}}, pod.Status.PodIPs...) {
		if addr, err := netip.ParseAddr(p.IP); err == nil && addr.Unmap() == want.Unmap() {
			return true
		}
	}
	return false
}

// concerns reports whether the object ref (a job, a service or a Dataset:
// what reports are about) concerns node now, by the caches, and returns it.
func (h *Hub) concerns(node string, ref edgeproto.ObjectRef) (metav1.Object, *kind, bool) {
	k := h.byName[ref.Kind]
	if k == nil || ref.Kind == modelKind || node == "" {
		return nil, nil, false
	}
	obj, ok := getCached(k.informer, ref.Namespace, ref.Name)
	if !ok {
		return nil, nil, false
	}
	if contains(templateNodes(obj), node) || (k.workers && len(h.workersOn(obj, node)) > 0) {
		return obj, k, true
	}
	if datasets := h.byName[datasetKind]; datasets != nil {
		for _, name := range datasetNames(obj) {
			if ds, ok := getCached(datasets.informer, obj.GetNamespace(), name); ok && contains(templateNodes(ds), node) {
				return obj, k, true
			}
		}
	}
	return nil, nil, false
}

// affectedNodes are the nodes whose set of concerning objects an event on
// obj, of kind k (a cached object, or a tombstone of one), may change.
func (h *Hub) affectedNodes(k *kind, obj any) []string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil
	}
	nodes := templateNodes(o)
	if k.name == modelKind {
		// A Model goes where the objects that name it go.
		for _, kk := range h.kinds {
			for _, named := range byIndex(kk.informer, common.ByModel, nsKey(o.GetNamespace(), o.GetName())) {
				nodes = append(nodes, h.affectedNodes(kk, named)...)
			}
		}
		return nodes
	}
	// A Dataset's objects move with it: its node is the only one whose set
	// they enter or leave through it.
	if k.workers {
		pods, _ := common.ListOwned[*corev1.Pod](h.pods.GetIndexer(), o) // the index is the hub's own (addIndexers)
		for _, p := range pods {
			if p.Spec.NodeName != "" && !contains(nodes, p.Spec.NodeName) {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
	}
	if datasets := h.byName[datasetKind]; datasets != nil {
		for _, name := range datasetNames(o) {
			if ds, ok := getCached(datasets.informer, o.GetNamespace(), name); ok {
				nodes = append(nodes, templateNodes(ds)...)
			}
		}
	}
	return nodes
}

// podNodes are the nodes whose sets a worker pod's event may change: the
// node it is bound to, before and after.
func podNodes(oldObj, newObj any) []string {
	var nodes []string
	for _, obj := range []any{oldObj, newObj} {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[common.LabelOwnerUID] != "" && p.Spec.NodeName != "" && !contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	return nodes
}
