package edgehub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/internal/cached"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// ConditionEdgeLinked says whether every node an object needs a
// LocalController on has one connected: a Dataset's node, the nodes of a
// job's Datasets, and the edge nodes its workers are pinned to or run on
// (any node, for the learning cycles, whose every worker reports through
// its node's LocalController).
// A job is told of a link that is down or never came up at once; a Dataset
// of no such node, a node LocalControllers do not serve, or one no
// LocalController ever connected from at once, and of a link that is down
// only once it has been down for as long as a Lease lasts (datasetTold).
// False names each node that has none and why; it goes True again once they
// all have. An object that never missed one has no such condition: the hub
// writes nothing for objects whose nodes are all linked. The DIJob
// controller sets the same condition on DIJobs (links.ConditionEdgeLinked).
const ConditionEdgeLinked = links.ConditionEdgeLinked

// The reasons of ConditionEdgeLinked, the first that applies to any node.
const (
	// ReasonNoSuchNode: the object names a node the cluster does not have.
	ReasonNoSuchNode = "NoSuchNode"
	// ReasonNoLocalController: the node is not one LocalControllers serve
	// (it does not match the hub's node selector), or no LocalController
	// has ever connected from it.
	ReasonNoLocalController = "NoLocalController"
	// ReasonLinkDown: the node's LocalController was connected and is not.
	ReasonLinkDown = links.ReasonLinkDown
	// ReasonLinked: every node has its LocalController connected again.
	ReasonLinked = links.ReasonLinked
)

// DefaultReachPeriod is how often the hub may look at every object's nodes:
// it does so when something a scan reads changed since the last (an object
// the hub sends, a worker pod, an edge node, a link), when the last scan
// left a node to be judged later, and at least every reachResync.
const DefaultReachPeriod = 2 * time.Second

// reachResync is the longest between two scans when nothing the hub
// watches changed: what it reads rather than watches (whether a node
// LocalControllers do not serve exists) is looked at again then. At rest,
// a fleet of thousands of objects is not walked every period.
const reachResync = 30 * time.Second

// nodeCacheTTL is how long the hub trusts what it read of a node it does
// not watch (one LocalControllers do not serve).
const nodeCacheTTL = 10 * time.Second

// leaseCacheTTL is how long the hub trusts what it read of the Lease of an
// edge node it has not heard from since it started: that the node has none,
// or that its link is down. Either changes only when a LocalController
// connects, and LocalControllers connect to the hub of the leader, which
// then knows the node itself (links.Writer.State) and reads no Lease; what
// is cached outlives only a hand-over between leaders. Without it, a scan
// would read the Leases of every node never heard from, every period.
const leaseCacheTTL = 10 * time.Minute

// nodeReach is why a node fails an object; reason "" is a node that serves,
// unless unknown: the node is not judged yet (a hub that just started gives
// nodes time to reconnect, a node's Lease is read by a later scan), and an
// object with such a node and none failing keeps the condition it has. link
// marks what the node's link says (down, or never up) rather than the
// cluster's shape, and since when it has said so (zero: never up, or not
// known). Jobs are told it at once; Datasets only once it has lasted
// linkSettle (datasetTold).
type nodeReach struct {
	reason, why string
	link        bool
	since       time.Time
	unknown     bool
}

// notYet is the nodeReach of a node not judged yet.
var notYet = nodeReach{unknown: true}

// datasetTold says whether a Dataset is told of j at now. A node may hold
// thousands of Datasets, so a link's blip must not write each of them
// twice: a Dataset hears of a link that is down only once it has been down
// for settle (the Lease's duration), which bounds the writes to two per
// Dataset per outage that long. What the cluster's shape says (no such
// node, a node LocalControllers do not serve, no LocalController ever
// connected) does not flap, and is told at once.
func (j nodeReach) datasetTold(now time.Time, settle time.Duration) bool {
	return !j.link || j.since.IsZero() || now.Sub(j.since) >= settle
}

// linkSettle is as long as a Lease lasts: the hub takes a node's silence
// for a loss only after it (a hub that just started), and tells Datasets of
// a link down only after it.
func (r *reach) linkSettle() time.Duration {
	return r.hub.cfg.ReadTimeout + r.hub.cfg.LeaseUpdatePeriod
}

// readNode is what the hub read of a node outside its edge nodes' cache.
type readNode struct {
	exists bool
	at     time.Time
}

// reach judges nodes and sets the objects' EdgeLinked conditions. It runs
// in the hub's leader only, as the hub does.
type reach struct {
	hub     *Hub
	started time.Time
	// edgeNodes caches the nodes LocalControllers serve; state is a node's
	// link as the hub knows it (links.Writer.State).
	edgeNodes cache.Store
	state     func(node string) (connected bool, lastHeard time.Time, known bool)
	// nodes caches node reads for nodeCacheTTL, and leases Lease reads
	// for leaseCacheTTL; the scan is their only user.
	nodes  map[string]readNode
	leases map[string]readLease
	// reads is how many nodes this scan may still read: node names come
	// from objects anyone who may create a Dataset writes, and must not
	// turn into a flood of reads of the API server.
	reads int
	// scanned is when the last scan ran; again says it left something
	// that only time settles (a node not judged yet, a Dataset not told
	// yet, a Lease another hub renews), so the next period scans again.
	scanned time.Time
	again   bool
}

// Bounds on what the node names of objects cost: reads a scan, and cached
// reads kept.
const (
	nodeReadsPerScan = 50
	maxCachedNodes   = 10000
)

func (h *Hub) runReach(ctx context.Context) {
	if h.cfg.ReachPeriod < 0 {
		return
	}
	r := &reach{hub: h, started: h.clock.Now(), nodes: map[string]readNode{}, leases: map[string]readLease{},
		edgeNodes: h.auth.Caches().EdgeNodes, state: h.links.State}
	for ctx.Err() == nil {
		if r.due(h.reachChanged.Swap(false), h.clock.Now()) {
			r.scan(ctx)
			h.metrics.reachScans.Inc()
		}
		select {
		case <-ctx.Done():
		case <-h.clock.After(h.cfg.ReachPeriod):
		}
	}
}

// due says whether a scan is due at now: something it reads changed since
// the last (changed), the last left something for later, or reachResync
// has passed since it.
func (r *reach) due(changed bool, now time.Time) bool {
	return changed || r.again || r.scanned.IsZero() || now.Sub(r.scanned) >= reachResync
}

// reachSaw says that something a reach scan reads changed: the next period
// scans.
func (h *Hub) reachSaw() { h.reachChanged.Store(true) }

// reached says whether the reach scan looks at k's objects: the kinds with
// workers, and Datasets.
func (k *kind) reached() bool { return k.Workers || k.Name == desired.DatasetKind }

// reachSawKind is reachSaw for an object of k that came or went.
func (h *Hub) reachSawKind(k *kind) {
	if k.reached() {
		h.reachSaw()
	}
}

// reachSees says whether an update of an object of k changes what a reach
// scan reads of it: whether it is being deleted, its EdgeLinked condition
// (which another writer may have dropped), and the nodes and Datasets it
// names. A change to anything else (a Dataset's URL, a job's counts) does
// not start a scan.
func reachSees(k *kind, oldObj, newObj any) bool {
	if !k.reached() {
		return false
	}
	o, okOld := oldObj.(metav1.Object)
	n, okNew := newObj.(metav1.Object)
	if !okOld || !okNew {
		return true
	}
	if (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil) {
		return true
	}
	oldStatus, oldSaid := k.conditions.status(o, ConditionEdgeLinked)
	newStatus, newSaid := k.conditions.status(n, ConditionEdgeLinked)
	return oldStatus != newStatus || oldSaid != newSaid || !slices.Equal(namesReached(o), namesReached(n))
}

// namesReached are the names obj gives that neededNodes reads: its node,
// its Datasets' and its templates' nodes, each marked with what it is.
func namesReached(obj metav1.Object) []string {
	var out []string
	if p, ok := obj.(desired.Placed); ok {
		out = append(out, "node "+p.NodeName())
	}
	for _, name := range desired.DatasetNames(obj) {
		out = append(out, "dataset "+name)
	}
	if t, ok := obj.(desired.Templated); ok {
		for _, tmpl := range t.PodTemplates() {
			out = append(out, "template "+tmpl.Spec.NodeName)
		}
	}
	return out
}

// scan looks at every object the hub sends and wants the condition its
// nodes call for.
func (r *reach) scan(ctx context.Context) {
	now := r.hub.clock.Now()
	r.scanned, r.again = now, false
	r.reads = nodeReadsPerScan
	if len(r.nodes) > maxCachedNodes {
		clear(r.nodes)
	}
	if len(r.leases) > maxCachedNodes {
		clear(r.leases)
	}
	judged := map[string]nodeReach{}
	judge := func(node string, pinned bool) nodeReach {
		key := node
		if pinned {
			key = "\x00" + node
		}
		if j, ok := judged[key]; ok {
			return j
		}
		j := r.judge(ctx, node, pinned, now)
		judged[key] = j
		r.again = r.again || j.unknown
		return j
	}
	onEdge, offEdge := r.podNodes()
	for _, k := range r.hub.kinds {
		if !k.reached() {
			continue
		}
		for _, item := range k.Informer.GetStore().List() {
			obj, ok := item.(metav1.Object)
			if !ok || obj.GetDeletionTimestamp() != nil || !common.RunByNereid(obj) {
				continue // going, or another controller's: no condition of Nereid's
			}
			running := onEdge[string(obj.GetUID())]
			if k.WorkersNeedLocalController {
				running = append(running, offEdge[string(obj.GetUID())]...)
			}
			if failing, told := r.failing(ctx, k, obj, running, judge, now); told {
				r.want(k, obj, failing)
			}
		}
	}
}

// failing are the nodes obj needs that fail it, as judge says. The nodes
// failing are told at once, whatever the others are; that none fails is
// told only once every node is judged: told is false while none fails and
// one is not judged yet, and obj then keeps the condition it has (a node
// not judged is not one that serves).
func (r *reach) failing(ctx context.Context, k *kind, obj metav1.Object, running []string,
	judge func(node string, pinned bool) nodeReach, now time.Time) (failing map[string]nodeReach, told bool) {
	failing = map[string]nodeReach{}
	judged := true
	for node, pinned := range r.neededNodes(ctx, k, obj, running) {
		switch j := judge(node, pinned); {
		case j.unknown:
			judged = false
		case j.reason == "":
		case k.Workers || j.datasetTold(now, r.linkSettle()):
			failing[node] = j
		default:
			r.again = true // the Dataset is told once the outage lasted
		}
	}
	return failing, judged || len(failing) > 0
}

// neededNodes are the nodes obj needs a LocalController on, each saying
// whether obj names it itself (a Dataset's node, a Dataset's of the job, a
// template's nodeName, a worker of a kind whose every worker needs one)
// rather than finding a worker there.
func (r *reach) neededNodes(ctx context.Context, k *kind, obj metav1.Object, running []string) map[string]bool {
	out := map[string]bool{}
	if p, ok := obj.(desired.Placed); ok && p.NodeName() != "" {
		out[p.NodeName()] = true
	}
	if ds := r.hub.byName[desired.DatasetKind]; ds != nil {
		for _, name := range desired.DatasetNames(obj) {
			if d, ok := r.hub.sets.Cached(desired.DatasetKind, obj.GetNamespace(), name); ok {
				if p, ok := d.(desired.Placed); ok && p.NodeName() != "" {
					out[p.NodeName()] = true
				}
			}
		}
	}
	if k.Workers {
		// A pinned template names its node; only an edge node needs a
		// LocalController for it (a cloud worker pinned to a cloud node
		// needs none), and a node that does not exist is said so. A kind
		// whose every worker reports through its node's LocalController
		// (the learning cycles) needs one wherever its workers are.
		everywhere := k.WorkersNeedLocalController
		if t, ok := obj.(desired.Templated); ok {
			for _, tmpl := range t.PodTemplates() {
				if n := tmpl.Spec.NodeName; n != "" {
					if _, isEdge := r.edgeNode(n); everywhere || isEdge || !r.nodeExists(ctx, n) {
						out[n] = true
					}
				}
			}
		}
		for _, n := range running {
			if _, ok := out[n]; !ok {
				out[n] = everywhere
			}
		}
	}
	return out
}

// podNodes are, by owner UID, the edge nodes the owner's unfinished worker
// pods are bound to, and the other nodes they are bound to.
func (r *reach) podNodes() (onEdge, offEdge map[string][]string) {
	onEdge, offEdge = map[string][]string{}, map[string][]string{}
	for _, item := range r.hub.sets.Pods().GetStore().List() {
		p, ok := item.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || desired.Finished(p) || p.DeletionTimestamp != nil {
			continue
		}
		owner := p.Labels[common.LabelOwnerUID]
		if owner == "" {
			continue
		}
		out := onEdge
		if _, isEdge := r.edgeNode(p.Spec.NodeName); !isEdge {
			out = offEdge
		}
		// The label is the pod's maker's to choose: the pod counts only
		// for the object its controllers lead to.
		if !slices.Contains(out[owner], p.Spec.NodeName) && r.hub.sets.OwnsWorker(p) {
			out[owner] = append(out[owner], p.Spec.NodeName)
		}
	}
	return onEdge, offEdge
}

// edgeNode says whether node is one the hub's node selector picks (so one
// LocalControllers serve), from the hub's cache of them.
func (r *reach) edgeNode(node string) (*corev1.Node, bool) {
	return cached.Get[*corev1.Node](r.edgeNodes, node)
}

// nodeExists reads a node the hub does not watch, at most once per
// nodeCacheTTL and within the scan's reads; an error reading it, or a read
// left for a later scan, counts as existing (nothing is said yet).
func (r *reach) nodeExists(ctx context.Context, node string) bool {
	now := r.hub.clock.Now()
	if c, ok := r.nodes[node]; ok && now.Sub(c.at) < nodeCacheTTL {
		return c.exists
	}
	if r.reads <= 0 {
		r.again = true
		return true
	}
	r.reads--
	_, err := r.hub.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	exists := !apierrors.IsNotFound(err)
	if err != nil && exists {
		klog.FromContext(ctx).V(2).Info("Cannot read a node an object names", "node", node, "err", err)
	}
	r.nodes[node] = readNode{exists: exists, at: now}
	return exists
}

// judge says whether node has a LocalController connected, and if not why.
func (r *reach) judge(ctx context.Context, node string, pinned bool, now time.Time) nodeReach {
	if _, isEdge := r.edgeNode(node); !isEdge {
		if !r.nodeExists(ctx, node) {
			return nodeReach{reason: ReasonNoSuchNode, why: fmt.Sprintf("no node %s exists", node)}
		}
		if !pinned {
			return nodeReach{} // a worker the scheduler put on a cloud node
		}
		return nodeReach{reason: ReasonNoLocalController, why: fmt.Sprintf(
			"node %s runs no LocalController: LocalControllers serve the nodes matching %q (the chart's localController.nodeSelector; localController.everyNode=true runs them on every node, as Sedna does)",
			node, r.hub.cfg.NodeSelector)}
	}
	connected, lastHeard, known := r.state(node)
	if connected {
		return nodeReach{}
	}
	var since time.Time
	if known {
		// A LocalController that restarts is back within a heartbeat.
		if now.Sub(lastHeard) < r.hub.cfg.HeartbeatPeriod {
			return notYet
		}
		since = lastHeard
	} else {
		// A hub that just started gives the nodes a heartbeat to connect.
		// A node with no Lease never connected to any hub: that is said
		// then. One with a Lease gets as long as a Lease lasts to
		// reconnect before its silence is taken for a loss; then the
		// Lease says when it was last heard from.
		up := now.Sub(r.started)
		if up < r.hub.cfg.HeartbeatPeriod {
			return notYet
		}
		read, ok := r.lease(ctx, node, now)
		switch {
		case !ok:
			return notYet // its Lease is read by a later scan
		case !read.exists:
			return nodeReach{reason: ReasonNoLocalController, link: true, why: fmt.Sprintf(
				"no LocalController has connected from edge node %s (is its LocalController Pod running there?)", node)}
		case !read.down:
			return nodeReach{}
		case up < r.linkSettle():
			return notYet
		}
		since = read.heard
	}
	return nodeReach{reason: ReasonLinkDown, why: links.DownMessage(node, since), link: true, since: since}
}

// readLease is what the hub read of a node's Lease: whether it has one,
// and whether its link is down and since when (heard).
type readLease struct {
	exists, down bool
	heard, at    time.Time
}

// lease reads node's Lease, within the scan's reads; ok false when it is
// left for a later scan, or cannot be read. That a node has no Lease or
// that its link is down is kept for leaseCacheTTL, and past it until a
// scan has reads left to read it again (so an object is not told a node
// less, then more); a Lease that says connected (renewed by another hub) is
// read again each scan, until the node connects here or the Lease runs out.
func (r *reach) lease(ctx context.Context, node string, now time.Time) (read readLease, ok bool) {
	c, cached := r.leases[node]
	if cached && now.Sub(c.at) < leaseCacheTTL {
		return c, true
	}
	if r.reads <= 0 {
		r.again = true
		return c, cached
	}
	r.reads--
	lease, err := r.hub.client.CoordinationV1().Leases(r.hub.cfg.Namespace).Get(ctx, links.LeaseName(node), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		read = readLease{at: now}
	case err != nil:
		klog.FromContext(ctx).V(2).Info("Cannot read a node's Lease", "node", node, "err", err)
		return readLease{}, false
	default:
		read = readLease{exists: true, at: now}
		read.down, read.heard = links.LinkDown(lease, now)
	}
	if !read.exists || read.down {
		r.leases[node] = read
	} else {
		r.again = true // another hub renews it: read again next scan
	}
	return read, true
}

// want wants obj's EdgeLinked condition for the nodes failing it: False
// naming them, or True where it was False. Nothing for an object that never
// had it and is fine, nor for one whose condition already says what holds:
// what an earlier scan wanted of either is dropped if not written yet.
func (r *reach) want(k *kind, obj metav1.Object, failing map[string]nodeReach) {
	ref := edgeproto.ObjectRef{Kind: k.Name, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	status, said := k.conditions.status(obj, ConditionEdgeLinked)
	if len(failing) == 0 {
		if status == corev1.ConditionFalse {
			r.hub.conditions.wants(ref, syncCondition{typ: ConditionEdgeLinked, ok: true, reason: ReasonLinked,
				message: links.LinkedMessage, eventType: corev1.EventTypeNormal})
		} else {
			r.hub.conditions.settled(ref, ConditionEdgeLinked)
		}
		return
	}
	nodes := make([]string, 0, len(failing))
	for n := range failing {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	reason := ""
	whys := make([]string, 0, len(nodes))
	for _, rank := range []string{ReasonNoSuchNode, ReasonNoLocalController, ReasonLinkDown} {
		for _, n := range nodes {
			if failing[n].reason == rank {
				if reason == "" {
					reason = rank
				}
				whys = append(whys, failing[n].why)
			}
		}
	}
	c := syncCondition{typ: ConditionEdgeLinked, reason: reason, message: common.ClipConditionMessage(strings.Join(whys, "; ")), eventType: corev1.EventTypeWarning}
	if status == corev1.ConditionFalse && said == c.message {
		r.hub.conditions.settled(ref, ConditionEdgeLinked)
		return
	}
	r.hub.conditions.wants(ref, c)
}
