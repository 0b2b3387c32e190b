package dijob

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
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

// readLinks reads the link of each node the job's live pods are on, once a
// sync; nil without a LinkChecker.
func (c *Controller) readLinks(ctx context.Context, pods []*corev1.Pod, now time.Time) map[string]linkState {
	if c.config.Links == nil {
		return nil
	}
	out := map[string]linkState{}
	for _, p := range pods {
		if _, ok := out[p.Spec.NodeName]; ok || p.Spec.NodeName == "" || common.PodTerminating(p) {
			continue
		}
		var st linkState
		st.down, st.since, st.err = c.config.Links.LinkDown(ctx, p.Spec.NodeName, now)
		out[p.Spec.NodeName] = st
	}
	return out
}

// heldByLink says whether p is on an edge node whose link went down less than
// the grace ago (links, as readLinks read them); a pod it holds is re-synced
// when the grace ends.
func (c *Controller) heldByLink(ctx context.Context, key string, p *corev1.Pod, now time.Time, links map[string]linkState) (held, bool) {
	st, ok := links[p.Spec.NodeName]
	if !ok {
		return held{}, false
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

// setEdgeLinked sets the job's EdgeLinked condition from the links the sync
// read (setEdgeLinked).
func (sc *syncCtx) setEdgeLinked() []common.Event {
	return setEdgeLinked(sc.status, sc.links, sc.now)
}

// setEdgeLinked sets a job's EdgeLinked condition in status from the links
// a sync read (readLinks): False naming each node of a live pod whose link
// is down and since when, in the words Sedna's kinds use
// (links.DownMessage); True once none is, for a job that had it False; none
// for a job that never missed one. A Warning says the link went down, a
// Normal event that it came back. A v1 job has it too, in the v2 status
// its v1 status is written as.
func setEdgeLinked(status *div2.DIJobStatus, lks map[string]linkState, now metav1.Time) []common.Event {
	if lks == nil {
		return nil // not read: nothing known
	}
	var whys []string
	for _, node := range slices.Sorted(maps.Keys(lks)) {
		if st := lks[node]; st.err == nil && st.down {
			whys = append(whys, links.DownMessage(node, st.since))
		}
	}
	events := func(had, was bool, _ string) []common.Event {
		switch {
		case len(whys) > 0 && (!had || was):
			return []common.Event{{Type: corev1.EventTypeWarning, Reason: links.ReasonLinkDown, Message: strings.Join(whys, "; ")}}
		case len(whys) == 0 && had && !was:
			return []common.Event{{Type: corev1.EventTypeNormal, Reason: links.ReasonLinked, Message: links.LinkedMessage}}
		}
		return nil
	}
	if len(whys) == 0 {
		if !slices.ContainsFunc(status.Conditions, func(c div2.JobCondition) bool { return c.Type == div2.ConditionEdgeLinked }) {
			return nil
		}
		return setCondition(status, div2.ConditionEdgeLinked, true, links.ReasonLinked, links.LinkedMessage, now, events)
	}
	return setCondition(status, div2.ConditionEdgeLinked, false, links.ReasonLinkDown,
		common.ClipConditionMessage(strings.Join(whys, "; ")), now, events)
}

// podsByNode indexes the pods the controllers cache by their node.
const podsByNode = "dijob-node"

// watchLinks re-syncs the jobs with pods on a node whose link Lease says
// the link went down or came back (a renewal changes nothing); it returns
// what the first sync waits for.
func (c *Controller) watchLinks(leases, pods cache.SharedIndexInformer) ([]cache.InformerSynced, error) {
	if err := pods.AddIndexers(cache.Indexers{podsByNode: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("indexing pods by node: %w", err)
	}
	enqueue := func(obj any) {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return
		}
		onNode, _ := pods.GetIndexer().ByIndex(podsByNode, links.LeaseNode(l))
		for _, o := range onNode {
			if p, ok := o.(*corev1.Pod); ok {
				if key, ok := common.OwnerKey(p, jobKind); ok {
					c.queue.Add(key)
				}
			}
		}
	}
	return common.AddHandlers(common.Handler{Informer: leases, Handler: cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, updated any) {
			o, ok1 := old.(*coordinationv1.Lease)
			n, ok2 := updated.(*coordinationv1.Lease)
			if ok1 && ok2 && links.LinkChanged(o, n) {
				enqueue(n)
			}
		},
	}})
}
