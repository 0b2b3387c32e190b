package common

import (
	corev1 "k8s.io/api/core/v1"
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
// deletion observes a deletion. It only enqueues; nothing else.
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
	handle := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		m, err := apimeta.Accessor(obj)
		if err != nil {
			return
		}
		if key, ok := OwnerKey(m, ownerKind); ok {
			enqueue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, newObj any) { handle(newObj) },
		DeleteFunc: handle,
	}
}
