// Package fakeapi makes client-go's fake clientsets behave more like the API
// server, for unit tests.
package fakeapi

import (
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// Clientset is what a generated fake clientset has.
type Clientset interface {
	PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
	Tracker() k8stesting.ObjectTracker
}

// ConditionalUpdates makes c's updates (of objects and of their
// subresources) conditional on resourceVersion, as the API server's are: an
// update whose resourceVersion is not the stored object's conflicts, and one
// that succeeds gives the object the next resourceVersion. The fake's own
// tracker does neither, so a write from a stale copy (a cache that has not
// caught up) silently wins there; here it fails as it would in a cluster.
// An object's first resourceVersion is whatever the test gave it ("" too).
func ConditionalUpdates(c Clientset) {
	tracker := c.Tracker()
	c.PrependReactor("update", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		update, ok := action.(k8stesting.UpdateAction)
		if !ok {
			return false, nil, nil
		}
		obj := update.GetObject().DeepCopyObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, nil
		}
		gvr, ns := action.GetResource(), action.GetNamespace()
		stored, err := tracker.Get(gvr, ns, m.GetName(), metav1.GetOptions{})
		if err != nil {
			return true, nil, err
		}
		sm, err := meta.Accessor(stored)
		if err != nil {
			return true, nil, err
		}
		if m.GetResourceVersion() != sm.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), m.GetName(),
				fmt.Errorf("the object has been modified: resourceVersion %q, stored %q", m.GetResourceVersion(), sm.GetResourceVersion()))
		}
		rv, _ := strconv.ParseUint(sm.GetResourceVersion(), 10, 64)
		m.SetResourceVersion(strconv.FormatUint(rv+1, 10))
		if err := tracker.Update(gvr, obj, ns); err != nil {
			return true, nil, err
		}
		return true, obj.DeepCopyObject(), nil
	})
}
