package common

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// expireAfterFinished deletes a finished owner once ttlSecondsAfterFinished
// has passed since it finished, as the Kubernetes TTL-after-finished
// controller deletes a Job: it reads the owner afresh and decides again on
// what it reads (the cache may lag an edit of the TTL), then deletes it in
// the foreground, so what it owns goes first, and only if it is still that
// version of the owner with that UID. Before then the owner is synced
// again when its time comes. An owner whose finishing time is not known
// is kept. done says the owner was deleted, or the deletion failed:
// nothing more is done of it in this sync.
func (p *Syncer[T]) expireAfterFinished(ctx context.Context, s *Sync[T], spec LifecycleSpec, finished, now metav1.Time) (done bool, err error) {
	expires, ok := expiry(spec, finished)
	if !ok {
		return false, nil
	}
	if now.Time.Before(expires) {
		p.requeueAt(s.Key, expires, now.Time)
		return false, nil
	}
	client := p.Client(s.Owner.GetNamespace())
	fresh, err := client.Get(ctx, s.Owner.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return true, fmt.Errorf("reading %s before deleting it after its ttlSecondsAfterFinished: %w", s.Key, err)
	case fresh.GetUID() != s.Owner.GetUID():
		return true, nil // another object of that name: the cache will tell
	}
	l := p.Lifecycle
	at := l.Finished(fresh)
	if at == nil || !RunByNereid(fresh) {
		return false, nil
	}
	if expires, ok = expiry(l.Spec(fresh), *at); !ok || now.Time.Before(expires) {
		return false, nil // its TTL was changed: its update event syncs it again
	}
	uid, version := fresh.GetUID(), fresh.GetResourceVersion()
	foreground := metav1.DeletePropagationForeground
	err = client.Delete(ctx, fresh.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &version},
		PropagationPolicy: &foreground,
	})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsConflict(err):
		// It changed since it was read: decided again on the change.
		return true, fmt.Errorf("deleting %s after its ttlSecondsAfterFinished: it changed meanwhile: %w", s.Key, err)
	case err != nil:
		return true, fmt.Errorf("deleting %s after its ttlSecondsAfterFinished: %w", s.Key, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted: finished longer ago than ttlSecondsAfterFinished", "finished", at, "ttlSecondsAfterFinished", *spec.TTLSecondsAfterFinished)
	return true, nil
}

// expiry is when an owner that finished at finished expires, and false
// when it never does: it has no TTL, or when it finished is not known.
func expiry(spec LifecycleSpec, finished metav1.Time) (time.Time, bool) {
	if spec.TTLSecondsAfterFinished == nil || finished.IsZero() {
		return time.Time{}, false
	}
	return finished.Add(time.Duration(*spec.TTLSecondsAfterFinished) * time.Second), true
}
