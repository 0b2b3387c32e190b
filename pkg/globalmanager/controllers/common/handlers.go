package common

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// OwnerKey returns the queue key of obj's controller when that controller is
// of kind gvk.
func OwnerKey(obj metav1.Object, gvk schema.GroupVersionKind) (string, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != gvk.Kind {
		return "", false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != gvk.Group {
		return "", false
	}
	return obj.GetNamespace() + "/" + ref.Name, true
}

// PodHandler turns pod events into the owner's key, and keeps the owner's
// expectations: an added pod observes a creation, a pod deleted or marked for
// deletion observes a deletion, a pod that carries an expected mark observes
// it. It only enqueues; nothing else.
func PodHandler(ownerKind schema.GroupVersionKind, exp *Expectations, enqueue func(key string)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			key, ok := OwnerKey(pod, ownerKind)
			if !ok {
				return
			}
			if PodTerminating(pod) {
				// Seen at start-up already going; it counts as deleted.
				exp.DeletionObserved(key, pod.UID)
			} else {
				exp.CreationObserved(key)
			}
			enqueue(key)
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldPod, ok1 := oldObj.(*corev1.Pod)
			pod, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 || oldPod.ResourceVersion == pod.ResourceVersion {
				return
			}
			key, ok := OwnerKey(pod, ownerKind)
			if !ok {
				return
			}
			if PodTerminating(pod) && !PodTerminating(oldPod) {
				exp.DeletionObserved(key, pod.UID)
			}
			exp.MarkObserved(key, pod)
			enqueue(key)
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			key, ok := OwnerKey(pod, ownerKind)
			if !ok {
				return
			}
			exp.DeletionObserved(key, pod.UID)
			enqueue(key)
		},
	}
}

// ChildHandler enqueues the owner of any other child kind (Services,
// Deployments, HPAs) on every event.
func ChildHandler(ownerKind schema.GroupVersionKind, enqueue func(key string)) cache.ResourceEventHandler {
	return onEveryEvent(func(m metav1.Object) {
		if key, ok := OwnerKey(m, ownerKind); ok {
			enqueue(key)
		}
	})
}

// LabelledChildHandler enqueues, on every event of a child whose
// controller is not its owner (a service's pods and their ReplicaSets), the
// owner its owner-uid label names in its namespace, found through the
// owners' IndexUID (IndexByUID). The label only finds the owner: the sync
// decides what of the owner's the child is (WorkerChain).
func LabelledChildHandler(owners cache.Indexer, enqueue func(key string)) cache.ResourceEventHandler {
	return onEveryEvent(func(m metav1.Object) {
		uid := m.GetLabels()[LabelOwnerUID]
		if uid == "" {
			return
		}
		found, err := owners.ByIndex(IndexUID, ownerIndexKey(m.GetNamespace(), uid))
		if err != nil {
			return
		}
		for _, o := range found {
			if key, ok := KeyOf(o); ok {
				enqueue(key)
			}
		}
	})
}

// onEveryEvent calls handle with the object of every event: the added,
// the updated one's new state, the deleted one's last (from its tombstone
// when the watch missed the delete).
func onEveryEvent(handle func(m metav1.Object)) cache.ResourceEventHandler {
	h := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if m, err := apimeta.Accessor(obj); err == nil {
			handle(m)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    h,
		UpdateFunc: func(_, newObj any) { h(newObj) },
		DeleteFunc: h,
	}
}

// OwnerHandler enqueues an owner's key on every event of the owner itself.
func OwnerHandler(enqueue func(key string)) cache.ResourceEventHandler {
	handle := func(obj any) {
		if key, ok := KeyOf(obj); ok {
			enqueue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
		DeleteFunc: handle,
	}
}

// ReferenceHandler enqueues, when a referenced object (a Model, a Dataset)
// comes, goes or changes beyond its status, the owners that name it, found
// through the owners' index; the index keys owners by the namespace/name of
// what they reference. A sync reads a reference's spec and metadata, and of
// its status only a Dataset's Readable condition, which changes rarely; the
// rest of its status the edge's reports and the learning cycles write
// often: a Dataset's new count does not sync every job that names it.
func ReferenceHandler(owners cache.Indexer, index string, enqueue func(key string)) cache.ResourceEventHandler {
	handle := func(obj any) {
		key, ok := KeyOf(obj)
		if !ok {
			return
		}
		found, err := owners.ByIndex(index, key)
		if err != nil {
			return
		}
		for _, o := range found {
			if k, ok := KeyOf(o); ok {
				enqueue(k)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: handle,
		UpdateFunc: func(oldObj, obj any) {
			if !StatusOnly(oldObj, obj) || readableChanged(oldObj, obj) {
				handle(obj)
			}
		},
		DeleteFunc: handle,
	}
}

// readableChanged says whether an update changed a Dataset's Readable
// condition, which its jobs carry (SetDatasetsReadable): the one status
// change of a reference a sync reads; a new count is not one.
func readableChanged(oldObj, obj any) bool {
	type conditioned interface{ MetaConditions() *[]metav1.Condition }
	a, ok1 := oldObj.(conditioned)
	b, ok2 := obj.(conditioned)
	if !ok1 || !ok2 {
		return false
	}
	ca := apimeta.FindStatusCondition(*a.MetaConditions(), DatasetReadable)
	cb := apimeta.FindStatusCondition(*b.MetaConditions(), DatasetReadable)
	if ca == nil || cb == nil {
		return ca != cb
	}
	return ca.Status != cb.Status || ca.Reason != cb.Reason || ca.Message != cb.Message
}

// StatusOnly reports whether an update of an object with a status
// subresource changed at most its status: the same object (UID: one deleted
// and made again while the watch was down comes as an update after the
// relist, with generation 1 again), the same generation (the API server
// raises it on every change of the spec), labels, annotations, finalizers
// and deletion.
func StatusOnly(oldObj, newObj any) bool {
	o, err1 := apimeta.Accessor(oldObj)
	n, err2 := apimeta.Accessor(newObj)
	if err1 != nil || err2 != nil {
		return false
	}
	return o.GetUID() == n.GetUID() && o.GetGeneration() == n.GetGeneration() &&
		o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) &&
		maps.Equal(o.GetLabels(), n.GetLabels()) &&
		maps.Equal(o.GetAnnotations(), n.GetAnnotations()) &&
		slices.Equal(o.GetFinalizers(), n.GetFinalizers())
}

// Handler pairs an informer with the handler a controller gives it.
type Handler struct {
	Informer cache.SharedIndexInformer
	Handler  cache.ResourceEventHandler
}

// AddHandlers registers each handler with its informer and returns what a
// controller waits for before its first sync: each registration has synced
// once its informer's cache is filled and the handler has seen every object
// of the initial list.
func AddHandlers(handlers ...Handler) ([]cache.InformerSynced, error) {
	synced := make([]cache.InformerSynced, 0, len(handlers))
	for _, h := range handlers {
		reg, err := h.Informer.AddEventHandler(h.Handler)
		if err != nil {
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		synced = append(synced, reg.HasSynced)
	}
	return synced, nil
}

// ReadOwner starts a sync: it reads key's owner from the cache through get.
// ok is false when there is nothing to do: the key is malformed, the owner is
// gone, or it is being deleted (the garbage collector removes its children,
// and creating any would fight it). The owner is the cache's: deep-copy it
// before changing it.
func ReadOwner[T metav1.Object](key string, get func(namespace, name string) (T, error)) (owner T, ok bool, err error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return owner, false, nil // a malformed key never gets better
	}
	owner, err = get(ns, name)
	if apierrors.IsNotFound(err) {
		return owner, false, nil
	} else if err != nil {
		return owner, false, fmt.Errorf("reading %s: %w", key, err)
	}
	return owner, owner.GetDeletionTimestamp() == nil, nil
}

// DropManagedFields is an informer transform: the controllers never read
// metadata.managedFields, and on pods it is a large share of each cached
// object, so the caches keep objects without it.
func DropManagedFields(obj any) (any, error) {
	if m, err := apimeta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
