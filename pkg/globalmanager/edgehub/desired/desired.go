package desired

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
	DatasetKind = sednav1.DatasetKind.Kind
	modelKind   = sednav1.ModelKind.Kind
)

// Version is what tells two versions of an object on a node apart: what
// the edge uses of it (its digest; see EncodeObject), and which of its pods
// are on the node. ResourceVersion goes with them, for the LocalController.
type Version struct {
	ResourceVersion string
	Digest          string // edgeproto.ObjectDigest of the object as sent
	Workers         string // edgeproto.WorkersDigest of the workers
}

// VersionOf is the Version a LocalController states.
func VersionOf(v edgeproto.ObjectVersion) Version {
	return Version{ResourceVersion: v.ResourceVersion, Digest: v.Digest, Workers: v.Workers}
}

// SameOnEdge says whether a LocalController that holds v needs nothing of w:
// the same workers, and the same digest (an object whose status alone
// changed is not sent again) or, where one has no digest (a LocalController
// that predates them), the same resourceVersion.
func (v Version) SameOnEdge(w Version) bool {
	if v.Workers != w.Workers {
		return false
	}
	if v.Digest != "" && w.Digest != "" {
		return v.Digest == w.Digest
	}
	return v.ResourceVersion == w.ResourceVersion
}

// Object is the latest version of an object that concerns a node.
type Object struct {
	Kind    *Kind
	Obj     metav1.Object
	Workers []edgeproto.Worker // its pods on the node, sorted by name
	Version Version
}

// ObjectVersion is d's ObjectVersion under ref.
func (d Object) ObjectVersion(ref edgeproto.ObjectRef) edgeproto.ObjectVersion {
	return edgeproto.ObjectVersion{ObjectRef: ref, ResourceVersion: d.Version.ResourceVersion, Digest: d.Version.Digest, Workers: d.Version.Workers}
}

// Sets compute each node's desired set from the informers' caches: the
// objects of the kinds the hub sends, and the GlobalManager's worker pods.
type Sets struct {
	kinds  []*Kind
	byName map[string]*Kind // by API kind
	// pods are the GlobalManager's worker pods (the children cache).
	pods cache.SharedIndexInformer
	// chain finds a pod's object through its controllers (IsWorkerPod).
	chain common.WorkerChain
	// digests are the objects' digests, by UID (see encode.go).
	digests Digests
}

// NewSets returns the Sets of edgeKinds, whose workers are pods. Workers
// are found through the controllers between them (FollowReplicaSets).
// AddIndexers must run before the informers start.
func NewSets(edgeKinds []*Kind, pods cache.SharedIndexInformer) *Sets {
	s := &Sets{kinds: edgeKinds, byName: make(map[string]*Kind, len(edgeKinds)), pods: pods}
	for _, k := range edgeKinds {
		s.byName[k.Name] = k
	}
	return s
}

// FollowReplicaSets and FollowDeployments set the caches of the
// ReplicaSets and Deployments between an object and its worker pods; before
// the informers start. Without them, only pods an object controls itself
// are its workers.
func (s *Sets) FollowReplicaSets(replicaSets cache.Indexer) { s.chain.ReplicaSets = replicaSets }

// FollowDeployments: see FollowReplicaSets.
func (s *Sets) FollowDeployments(deployments cache.Indexer) { s.chain.Deployments = deployments }

// Kind is the kind of API kind name, nil when the hub does not send it.
func (s *Sets) Kind(name string) *Kind { return s.byName[name] }

// Digests are the objects' digests.
func (s *Sets) Digests() *Digests { return &s.digests }

// Pods is the cache of the GlobalManager's worker pods.
func (s *Sets) Pods() cache.SharedIndexInformer { return s.pods }

func nsKey(namespace, name string) string { return namespace + "/" + name }

// Cached is the object of kind (an API kind the hub sends) namespace/name
// in its cache, if it holds one.
func (s *Sets) Cached(kind, namespace, name string) (metav1.Object, bool) {
	k := s.byName[kind]
	if k == nil {
		return nil, false
	}
	return getCached(k.Informer, namespace, name)
}

// OwnsWorker says whether pod is a worker of the object its owner-uid
// label names, of a kind with workers: the label only finds the object, the
// pod counts only for the object its controllers lead to.
func (s *Sets) OwnsWorker(pod *corev1.Pod) bool {
	owner := pod.Labels[common.LabelOwnerUID]
	if owner == "" {
		return false
	}
	for _, k := range s.kinds {
		if !k.Workers {
			continue
		}
		for _, obj := range byIndex(k.Informer, indexUID, owner) {
			if s.chain.IsWorkerPod(pod, obj) {
				return true
			}
		}
	}
	return false
}

// AddIndexers adds the hub's indexes to the informers; it must run before
// they start.
func (s *Sets) AddIndexers() error {
	keys := func(ns string, names []string) []string {
		out := make([]string, 0, len(names))
		for _, n := range names {
			out = append(out, nsKey(ns, n))
		}
		return out
	}
	for _, k := range s.kinds {
		err := k.Informer.AddIndexers(cache.Indexers{
			indexNode: func(obj any) ([]string, error) {
				if o, ok := obj.(metav1.Object); ok {
					return templateNodes(o), nil
				}
				return nil, nil
			},
			indexDataset: func(obj any) ([]string, error) {
				if o, ok := obj.(metav1.Object); ok {
					return keys(o.GetNamespace(), DatasetNames(o)), nil
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
			return fmt.Errorf("adding edge hub indexers to the %s informer: %w", k.Name, err)
		}
		// Objects by the Models they name: the index the controllers and the
		// Model protection share.
		if err := common.IndexByModel(k.Informer); err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
	}
	ownerNode := func(obj any) (owner, node string) {
		if p, ok := obj.(*corev1.Pod); ok {
			return p.Labels[common.LabelOwnerUID], p.Spec.NodeName
		}
		return "", ""
	}
	err := s.pods.AddIndexers(cache.Indexers{
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
	if _, err := common.IndexChildren(s.pods); err != nil {
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

// WorkersOn are obj's pods bound to node, sorted by name, with their
// addresses. A pod counts where it was scheduled, whatever its template
// said.
func (s *Sets) WorkersOn(obj metav1.Object, node string) []edgeproto.Worker {
	pods := byIndex(s.pods, podIndexOwnerNode, string(obj.GetUID())+"/"+node)
	workers := make([]edgeproto.Worker, 0, len(pods))
	for _, p := range pods {
		if s.chain.IsWorkerPod(p, obj) {
			workers = append(workers, edgeproto.Worker{Name: p.GetName(), IPs: WorkerIPs(p), Done: Finished(p)})
		}
	}
	slices.SortFunc(workers, func(a, b edgeproto.Worker) int { return strings.Compare(a.Name, b.Name) })
	return workers
}

// WorkerIPs are the addresses a worker pod's reports come from: its IPs
// (status.podIPs; a hostNetwork pod's are its node's), in canonical form, at
// most edgeproto.MaxWorkerIPs. A pod that has finished has none: its
// address may be given to another pod.
func WorkerIPs(o metav1.Object) []string {
	pod, ok := o.(*corev1.Pod)
	if !ok || Finished(pod) {
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
		if ip := addr.Unmap().String(); !Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	return ips
}

// Of is the latest version of every object that concerns node: those
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
// created) concerns nothing, nor does an object another controller runs
// (common.RunByNereid).
func (s *Sets) Of(node string) map[edgeproto.ObjectRef]Object {
	out := make(map[edgeproto.ObjectRef]Object)
	if node == "" {
		return out
	}
	add := func(k *Kind, obj metav1.Object) {
		if !common.RunByNereid(obj) {
			return // another controller's (spec.managedBy): nothing of it goes to the edge
		}
		ref := edgeproto.ObjectRef{Kind: k.Name, Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if _, ok := out[ref]; ok {
			return
		}
		d := Object{Kind: k, Obj: obj, Version: Version{ResourceVersion: obj.GetResourceVersion(), Digest: s.digests.Of(k, obj)}}
		if k.Workers {
			d.Workers = s.WorkersOn(obj, node)
			d.Version.Workers = edgeproto.WorkersDigest(d.Workers)
		}
		out[ref] = d
	}
	for _, k := range s.kinds {
		for _, obj := range byIndex(k.Informer, indexNode, node) {
			add(k, obj)
		}
	}
	// By namespace and UID: a pod in another namespace that names an
	// owner's UID must not hide that owner's own pods on the node.
	seenOwner := make(map[string]bool)
	for _, pod := range byIndex(s.pods, podIndexNode, node) {
		uid := pod.GetLabels()[common.LabelOwnerUID]
		owner := nsKey(pod.GetNamespace(), uid)
		if seenOwner[owner] {
			continue
		}
		for _, k := range s.kinds {
			if !k.Workers {
				continue
			}
			for _, obj := range byIndex(k.Informer, indexUID, uid) {
				// The label only finds the object: a pod anyone labelled
				// brings it nowhere (another pod of the object may yet).
				if s.chain.IsWorkerPod(pod, obj) {
					seenOwner[owner] = true
					add(k, obj)
				}
			}
		}
	}
	if datasets := s.byName[DatasetKind]; datasets != nil {
		for _, ds := range byIndex(datasets.Informer, indexNode, node) {
			for _, k := range s.kinds {
				for _, obj := range byIndex(k.Informer, indexDataset, nsKey(ds.GetNamespace(), ds.GetName())) {
					add(k, obj)
				}
			}
		}
	}
	if models := s.byName[modelKind]; models != nil {
		var named []edgeproto.ObjectRef
		for ref, d := range out {
			for _, m := range modelNames(d.Obj) {
				named = append(named, edgeproto.ObjectRef{Kind: modelKind, Namespace: ref.Namespace, Name: m})
			}
		}
		for _, ref := range named {
			if m, ok := getCached(models.Informer, ref.Namespace, ref.Name); ok {
				add(models, m)
			}
		}
	}
	return out
}

// Finished says whether o is a pod that has finished.
func Finished(o metav1.Object) bool {
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

// CheckWorker refuses a report of worker about obj, of kind k, from node,
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
func (s *Sets) CheckWorker(node string, k *Kind, obj metav1.Object, worker, from string, receivedAt time.Time) error {
	if worker == edgeproto.LocalControllerWorker {
		if !k.OwnReports {
			return edgeproto.Refuse("the LocalController reports under its own name only for learning cycles, not for a %s", k.Name)
		}
		return nil
	}
	o, exists, err := s.pods.GetIndexer().GetByKey(nsKey(obj.GetNamespace(), worker))
	pod, isPod := o.(*corev1.Pod)
	switch {
	case err != nil || !exists || !isPod:
		return edgeproto.Refuse("worker %s is not a pod of %s/%s", worker, obj.GetNamespace(), obj.GetName())
	case !s.chain.IsWorkerPod(pod, obj):
		return edgeproto.Refuse("pod %s/%s is not a worker of %s", pod.Namespace, pod.Name, obj.GetName())
	case pod.Spec.NodeName != node:
		return edgeproto.Refuse("pod %s/%s runs on %q, not on node %s", pod.Namespace, pod.Name, pod.Spec.NodeName, node)
	case from != "" && !hasIP(pod, from):
		return edgeproto.Refuse("the report of pod %s/%s came from %s, which is not the pod's address", pod.Namespace, pod.Name, from)
	}
	if at := finishedAt(pod); from != "" && Finished(pod) && !at.IsZero() && receivedAt.After(at.Add(finishSlack)) {
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

// Concerns reports whether the object ref (a job, a service or a Dataset:
// what reports are about) concerns node now, by the caches, and returns it.
func (s *Sets) Concerns(node string, ref edgeproto.ObjectRef) (metav1.Object, *Kind, bool) {
	k := s.byName[ref.Kind]
	if k == nil || ref.Kind == modelKind || node == "" {
		return nil, nil, false
	}
	obj, ok := getCached(k.Informer, ref.Namespace, ref.Name)
	if !ok {
		return nil, nil, false
	}
	if Contains(templateNodes(obj), node) || (k.Workers && len(s.WorkersOn(obj, node)) > 0) {
		return obj, k, true
	}
	if datasets := s.byName[DatasetKind]; datasets != nil {
		for _, name := range DatasetNames(obj) {
			if ds, ok := getCached(datasets.Informer, obj.GetNamespace(), name); ok && Contains(templateNodes(ds), node) {
				return obj, k, true
			}
		}
	}
	return nil, nil, false
}

// AffectedNodes are the nodes whose set of concerning objects an event on
// obj, of kind k (a cached object, or a tombstone of one), may change.
func (s *Sets) AffectedNodes(k *Kind, obj any) []string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil
	}
	nodes := templateNodes(o)
	if k.Name == modelKind {
		// A Model goes where the objects that name it go.
		for _, kk := range s.kinds {
			for _, named := range byIndex(kk.Informer, common.ByModel, nsKey(o.GetNamespace(), o.GetName())) {
				nodes = append(nodes, s.AffectedNodes(kk, named)...)
			}
		}
		return nodes
	}
	// A Dataset's objects move with it: its node is the only one whose set
	// they enter or leave through it.
	if k.Workers {
		pods, _ := common.ListOwned[*corev1.Pod](s.pods.GetIndexer(), o) // the index is the hub's own (AddIndexers)
		for _, p := range pods {
			if p.Spec.NodeName != "" && !Contains(nodes, p.Spec.NodeName) {
				nodes = append(nodes, p.Spec.NodeName)
			}
		}
	}
	if datasets := s.byName[DatasetKind]; datasets != nil {
		for _, name := range DatasetNames(o) {
			if ds, ok := getCached(datasets.Informer, o.GetNamespace(), name); ok {
				nodes = append(nodes, templateNodes(ds)...)
			}
		}
	}
	return nodes
}

// PodNodes are the nodes whose sets a worker pod's event may change: the
// node it is bound to, before and after.
func PodNodes(oldObj, newObj any) []string {
	var nodes []string
	for _, obj := range []any{oldObj, newObj} {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[common.LabelOwnerUID] != "" && p.Spec.NodeName != "" && !Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	return nodes
}
