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
// controller deletes a Job: in the foreground, so what it owns goes first,
// and only if it is still the owner with that UID. Before then the owner
// is synced again when its time comes. done says the owner was deleted:
// nothing more is done of it.
func (p *Syncer[T]) expireAfterFinished(ctx context.Context, s *Sync[T], spec LifecycleSpec, finished, now metav1.Time) (done bool, err error) {
	if spec.TTLSecondsAfterFinished == nil {
		return false, nil
	}
	expires := finished.Add(time.Duration(*spec.TTLSecondsAfterFinished) * time.Second)
	if now.Time.Before(expires) {
		p.requeueAt(s.Key, expires, now.Time)
		return false, nil
	}
	uid := s.Owner.GetUID()
	foreground := metav1.DeletePropagationForeground
	err = p.Client(s.Owner.GetNamespace()).Delete(ctx, s.Owner.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid},
		PropagationPolicy: &foreground,
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return true, nil // gone already, or another object of that name by now
	}
	if err != nil {
		return true, fmt.Errorf("deleting %s %d s after it finished (ttlSecondsAfterFinished): %w", s.Key, *spec.TTLSecondsAfterFinished, err)
	}
	klog.FromContext(ctx).V(2).Info("Deleted: finished longer ago than ttlSecondsAfterFinished", "finished", finished, "ttlSecondsAfterFinished", *spec.TTLSecondsAfterFinished)
	return true, nil
}
