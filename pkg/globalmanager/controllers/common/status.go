package common

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
)

// WriteStatus writes an object's status with update, by the one rule every
// kind follows, and says whether it was written. A conflict while the sync
// otherwise went well (actErr nil) is no error: the cache is behind the
// object (a report or an edit moved it), and the object's update event syncs
// it again, sooner than a backoff would; the sync ends there and records its
// events at that next sync. Any other failure is returned, joined with actErr,
// so the key is retried.
func WriteStatus(ctx context.Context, key string, actErr error, update func(ctx context.Context) error) (bool, error) {
	err := update(ctx)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsConflict(err) && actErr == nil:
		klog.FromContext(ctx).V(4).Info("Status write conflicted; waiting for the newer object", "key", key, "err", err)
		return false, nil
	default:
		return false, errors.Join(actErr, fmt.Errorf("updating status of %s: %w", key, err))
	}
}
