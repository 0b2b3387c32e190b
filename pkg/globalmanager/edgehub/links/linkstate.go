package links

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LinkDown reads a node's Lease: the link is down when the hub said so
// (nereid.io/link disconnected) or when the hub has not renewed the Lease
// within its duration (the hub itself may be gone). since is when the node
// was last heard from.
func LinkDown(lease *coordinationv1.Lease, now time.Time) (down bool, since time.Time) {
	if lease.Spec.RenewTime != nil {
		since = lease.Spec.RenewTime.Time
	}
	if lease.Annotations[AnnotationLink] == LinkDisconnected {
		return true, since
	}
	if lease.Spec.LeaseDurationSeconds != nil && !since.IsZero() {
		return now.Sub(since) > time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second, since
	}
	return false, since
}

// Reader reads the link of edge nodes from their Leases in the hub's
// namespace.
type Reader struct {
	Client    kubernetes.Interface
	Namespace string
}

// LinkDown says whether node's link is down now, and since when; a node with
// no Lease (never connected, or no edge node) is not down.
func (l Reader) LinkDown(ctx context.Context, node string, now time.Time) (bool, time.Time, error) {
	lease, err := l.Client.CoordinationV1().Leases(l.Namespace).Get(ctx, LeaseName(node), metav1.GetOptions{})
	return linkDownRead(node, lease, err, now)
}

// linkDownRead is LinkDown of node's Lease as read (lease, err): a Lease
// not found says the link is not down.
func linkDownRead(node string, lease *coordinationv1.Lease, err error, now time.Time) (bool, time.Time, error) {
	if apierrors.IsNotFound(err) {
		return false, time.Time{}, nil
	} else if err != nil {
		return false, time.Time{}, fmt.Errorf("reading the link Lease of node %s: %w", node, err)
	}
	down, since := LinkDown(lease, now)
	return down, since, nil
}
