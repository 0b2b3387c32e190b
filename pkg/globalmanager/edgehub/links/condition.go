package links

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
)

// EdgeNodeRole is KubeEdge's edge node role, the label (whatever its value)
// that marks an edge node: the nodes LocalControllers connect from by default
// (the hub's node selector), and a pool of their own to the DIJob allocator.
const EdgeNodeRole = "node-role.kubernetes.io/edge"

// ConditionEdgeLinked is the condition of an object whose work needs a
// LocalController on nodes: False names each node that has none connected
// and why, True again once all have. The edge hub sets it on the kinds it
// sends (Sedna's), the DIJob controller on DIJobs; both say a link that is
// down in the same words (DownMessage).
const ConditionEdgeLinked = "EdgeLinked"

// The reasons of ConditionEdgeLinked that are about a link, rather than
// about the cluster's shape (the hub's NoSuchNode, NoLocalController).
const (
	// ReasonLinkDown: the node's LocalController was connected and is not.
	ReasonLinkDown = "LinkDown"
	// ReasonLinked: every node has its LocalController connected again.
	ReasonLinked = "Linked"
)

// LinkedMessage is the message of ConditionEdgeLinked once it is True again.
const LinkedMessage = "every node it needs a LocalController on has one connected"

// DownMessage says that node's link is down, and since when its
// LocalController was last heard from when that is known.
func DownMessage(node string, since time.Time) string {
	why := fmt.Sprintf("the link of edge node %s is down", node)
	if !since.IsZero() {
		why += " since " + since.UTC().Format(time.RFC3339)
	}
	return why
}

// Lister reads the link of edge nodes from a cache of the Leases of the
// hub's namespace: no API request per read, so a controller may read every
// node its pods are on at each sync.
type Lister struct {
	Leases    coordinationlisters.LeaseLister
	Namespace string
}

// LinkDown says whether node's link is down now, and since when; a node with
// no Lease (never connected, or no edge node) is not down.
func (l Lister) LinkDown(_ context.Context, node string, now time.Time) (bool, time.Time, error) {
	lease, err := l.Leases.Leases(l.Namespace).Get(LeaseName(node))
	return linkDownRead(node, lease, err, now)
}

// LinkChanged says whether a Lease's update changed what it says of the
// link (connected or not): a renewal changes nothing.
func LinkChanged(old, updated *coordinationv1.Lease) bool {
	return old.Annotations[AnnotationLink] != updated.Annotations[AnnotationLink]
}
