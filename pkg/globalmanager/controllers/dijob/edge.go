package dijob

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// LinkChecker says whether an edge node's link to the cloud is down, and
// since when (links.Reader reads it from the node's Lease).
type LinkChecker interface {
	LinkDown(ctx context.Context, node string, now time.Time) (down bool, since time.Time, err error)
}

// DefaultEdgeLinkGrace is how long a replica on an edge node whose link is
// down is held as running by default.
const DefaultEdgeLinkGrace = 10 * time.Minute

// held is a pod on an edge node whose link is down: what the cloud sees of
// it (not ready, a failed or unknown phase the node controller gave it) is
// not trusted until the grace ends, so it neither restarts the job nor
// counts as lost.
type held struct {
	pod   string
	node  string
	until time.Time
}

func (h held) String() string {
	return fmt.Sprintf("%s on %s (held until %s)", h.pod, h.node, h.until.UTC().Format(time.RFC3339))
}

// linkState is what a sync read of a node's link.
type linkState struct {
	down  bool
	since time.Time
	err   error
}

// heldByLink says whether p is on an edge node whose link went down less than
// the grace ago; a pod it holds is re-synced when the grace ends. links
// keeps what this sync read, so each node's Lease is read once.
func (c *Controller) heldByLink(ctx context.Context, key string, p *corev1.Pod, now time.Time, links map[string]linkState) (held, bool) {
	if c.config.Links == nil || p.Spec.NodeName == "" {
		return held{}, false
	}
	st, ok := links[p.Spec.NodeName]
	if !ok {
		st.down, st.since, st.err = c.config.Links.LinkDown(ctx, p.Spec.NodeName, now)
		links[p.Spec.NodeName] = st
	}
	if st.err != nil {
		klog.FromContext(ctx).Error(st.err, "Cannot tell whether the pod's edge link is down; taking its phase as it is", "pod", klog.KObj(p))
		return held{}, false
	}
	if !st.down || st.since.IsZero() {
		return held{}, false
	}
	until := st.since.Add(c.config.EdgeLinkGrace)
	if !now.Before(until) {
		return held{}, false
	}
	c.queue.AddAfter(key, until.Sub(now)+time.Second)
	return held{pod: p.Name, node: p.Spec.NodeName, until: until}, true
}

// heldList names held pods for a condition message.
func heldList(hs []held) string {
	parts := make([]string, 0, len(hs))
	for _, h := range hs {
		parts = append(parts, h.String())
	}
	return strings.Join(parts, ", ")
}
