package links

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// The label and annotations of the per-node Leases.
const (
	LabelEdgeNode          = "nereid.io/edge-node"
	AnnotationLink         = "nereid.io/link"
	AnnotationLastReportID = "nereid.io/last-report-id"
	AnnotationReportStore  = "nereid.io/report-store"
	// AnnotationStatedReportID is the highest last report ID a Hello of
	// the store stated that the hub took: with AnnotationLastReportID, what
	// bounds the next Hello's claim (Recorded).
	AnnotationStatedReportID = "nereid.io/stated-report-id"
	AnnotationUnackedObjects = "nereid.io/unacked-objects"
	// AnnotationOutbox says how full the node's outbox is, as its
	// LocalController's last heartbeat said: "<percent>% (<reports>/<max>
	// reports, <bytes>/<max> bytes)", the percent by the nearer bound.
	AnnotationOutbox = "nereid.io/outbox"

	LinkConnected    = "connected"
	LinkDisconnected = "disconnected"

	leasePrefix = "nereid-edge-"
)

// LeaseName is the name of node's Lease.
func LeaseName(node string) string {
	name := leasePrefix + node
	if len(name) <= 253 {
		return name
	}
	sum := sha256.Sum256([]byte(node))
	return name[:253-17] + "-" + hex.EncodeToString(sum[:8])
}

// LeaseNode is the node a link Lease is about: its holder, which the hub
// sets to the node's name (the label LabelEdgeNode may be shortened), else
// that label.
func LeaseNode(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		return *l.Spec.HolderIdentity
	}
	return l.Labels[LabelEdgeNode]
}

// labelValue is node as a label value, shortened when a node's name (up to
// 253 characters) is longer than a label value may be.
func labelValue(node string) string {
	if len(node) <= 63 {
		return node
	}
	sum := sha256.Sum256([]byte(node))
	return node[:46] + "-" + hex.EncodeToString(sum[:8])
}

// link is what the hub knows of one node's link, for its Lease.
type link struct {
	connected    bool
	conn         *Conn // the current connection, when connected
	connectedAt  time.Time
	lastHeard    time.Time
	store        string // of the current (or last) connection's Hello
	lastReportID uint64 // of store: report IDs count per store
	statedID     uint64 // of store: the highest LastReportID of its Hellos taken
	unacked      int
	outbox       string                // AnnotationOutbox's value, "" until heard
	fill         *edgeproto.OutboxFill // what outbox says, nil until heard

	urgent      bool      // a connect or disconnect not yet written
	changed     bool      // something not yet written
	lastWritten time.Time // zero: never written by this hub
	lease       *coordinationv1.Lease
}

// Config is what a Writer needs.
type Config struct {
	Client    kubernetes.Interface
	Namespace string // of the Leases
	// Own, when set, adds the Leases' owner to their metadata as they are
	// written, saying whether it added it.
	Own func(*metav1.ObjectMeta) bool
	// Period is the shortest time between two renewals of a node's Lease.
	Period time.Duration
	// Rate bounds the renewals of all nodes' Leases, in writes a second
	// (none when not positive).
	Rate float64
	// Grace is added to a renewal's period in leaseDurationSeconds (the
	// hub's read timeout: how long a node may be silent and still up).
	Grace time.Duration
	Clock clock.WithTicker
	// Changed, if set, is called (with the Writer's lock held) when a node
	// connects or disconnects.
	Changed func()
}

// Writer keeps every node's link state and writes it to the node's Lease.
// It is safe for concurrent use.
type Writer struct {
	client    kubernetes.Interface
	namespace string
	own       func(*metav1.ObjectMeta) bool // of the Leases, if set
	period    time.Duration                 // the shortest between two renewals of a node
	rate      float64                       // renewals a second, at most
	grace     time.Duration                 // added to a renewal's period in leaseDurationSeconds
	clock     clock.WithTicker

	mu    sync.Mutex
	nodes map[string]*link
	// prior are the nodes' Leases as Prime read them (or Recorded), until
	// their link's first write takes them; primed says Prime read them all,
	// so that a node without one has no Lease.
	prior  map[string]*coordinationv1.Lease
	primed bool
	kick   chan struct{}
	// changed is Config.Changed, or nothing.
	changed func()
	// credit is how many renewals may go out now, by the rate since
	// creditAt (renewalBudget), so that rounds a kick adds between ticks
	// do not add to the rate.
	credit   float64
	creditAt time.Time
}

// New returns a Writer of cfg, holding no node yet.
func New(cfg Config) *Writer {
	w := &Writer{
		client:    cfg.Client,
		namespace: cfg.Namespace,
		own:       cfg.Own,
		period:    cfg.Period,
		rate:      cfg.Rate,
		grace:     cfg.Grace,
		clock:     cfg.Clock,
		nodes:     make(map[string]*link),
		prior:     make(map[string]*coordinationv1.Lease),
		kick:      make(chan struct{}, 1),
		changed:   cfg.Changed,
	}
	if w.changed == nil {
		w.changed = func() {}
	}
	return w
}

// Conn stands for one connection of a node: what is recorded through it
// counts only while it is the node's current connection, so that the end
// of a connection a newer one replaced changes nothing.
type Conn struct{ node string }

func (l *Writer) get(node string) *link {
	k := l.nodes[node]
	if k == nil {
		k = &link{}
		l.nodes[node] = k
	}
	return k
}

func (l *Writer) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Connected records that node connected now, its LocalController's store
// being store and its last report ID stated (the Hello's), and returns the
// connection's handle.
func (l *Writer) Connected(node, store string, stated uint64) *Conn {
	c := &Conn{node: node}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.get(node)
	now := l.clock.Now()
	k.connected, k.conn, k.connectedAt, k.lastHeard = true, c, now, now
	k.unacked = 0
	if k.store != store {
		// A new store counts its reports from 1: the last ID of the old one
		// says nothing about it.
		k.store, k.lastReportID, k.statedID = store, 0, 0
	}
	k.statedID = max(k.statedID, stated)
	k.urgent, k.changed = true, true
	l.changed()
	l.wake()
	return c
}

// Prime reads every node's Lease at once, before the hub serves: what an
// earlier hub recorded of each node's store is then known without a read
// per node, when its Hello comes (Recorded) and when its link is first
// written. When it fails, those read the node's Lease themselves.
func (l *Writer) Prime(ctx context.Context) error {
	list, err := l.client.CoordinationV1().Leases(l.namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelEdgeNode})
	if err != nil {
		return fmt.Errorf("listing the edge nodes' leases in %s: %w", l.namespace, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range list.Items {
		lease := &list.Items[i]
		if node := lease.Spec.HolderIdentity; node != nil && LeaseName(*node) == lease.Name {
			lease.ManagedFields = nil
			l.prior[*node] = lease
		}
	}
	l.primed = true
	return nil
}

// Record is what the cloud recorded of a node's report IDs, for its next
// Hello (Writer.Recorded).
type Record struct {
	// Last is the highest report ID of the Hello's store the cloud
	// recorded: acknowledged, or stated by a Hello the hub took.
	Last uint64
	// Known says whether the cloud holds a record of that store at all;
	// NodeKnown whether it holds one of any store of the node.
	Known, NodeKnown bool
}

// Recorded is what the cloud recorded of store, node's LocalController's
// store, as this hub knows it and as the node's Lease says (an earlier
// hub's record). A Lease it reads is kept for the link's first write.
func (l *Writer) Recorded(ctx context.Context, node, store string) (Record, error) {
	l.mu.Lock()
	lease := l.leaseOf(node)
	read := lease != nil || l.primed
	l.mu.Unlock()
	var err error
	if !read {
		lease, err = l.client.CoordinationV1().Leases(l.namespace).Get(ctx, LeaseName(node), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease, err = nil, nil
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var r Record
	if k := l.nodes[node]; k != nil && k.store != "" {
		r.NodeKnown = true
		if k.store == store {
			r.Last, r.Known = max(k.lastReportID, k.statedID), true
		}
	}
	if lease != nil {
		if k := l.nodes[node]; (k == nil || k.lease == nil) && l.prior[node] == nil {
			lease.ManagedFields = nil
			l.prior[node] = lease
		}
		leased := lease.Annotations[AnnotationReportStore]
		r.NodeKnown = r.NodeKnown || leased != ""
		if leased == store && store != "" {
			var k link
			k.merge(lease)
			r.Last, r.Known = max(r.Last, k.lastReportID, k.statedID), true
		}
	}
	return r, err
}

// takePrior gives k, node's link not yet written, the Lease Prime or
// Recorded read, keeping what it says of k's store as write does of a
// Lease it reads; it says whether there was one. l.mu is held.
func (l *Writer) takePrior(node string, k *link) bool {
	lease := l.prior[node]
	if lease == nil {
		return false
	}
	delete(l.prior, node)
	if lease.Annotations[AnnotationReportStore] == k.store {
		k.merge(lease)
	}
	k.lease = lease
	return true
}

// leaseOf is node's Lease as last read or written, nil when not read.
func (l *Writer) leaseOf(node string) *coordinationv1.Lease {
	if k := l.nodes[node]; k != nil && k.lease != nil {
		return k.lease
	}
	return l.prior[node]
}

// merge keeps what lease, of k's store, says was acknowledged and stated
// beyond what k holds.
func (k *link) merge(lease *coordinationv1.Lease) {
	if id, err := strconv.ParseUint(lease.Annotations[AnnotationLastReportID], 10, 64); err == nil {
		k.lastReportID = max(k.lastReportID, id)
	}
	if id, err := strconv.ParseUint(lease.Annotations[AnnotationStatedReportID], 10, 64); err == nil {
		k.statedID = max(k.statedID, id)
	}
}

// Disconnected records that c ended, unless a newer connection replaced it.
func (l *Writer) Disconnected(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.get(c.node)
	if k.conn != c {
		return
	}
	k.connected, k.conn = false, nil
	k.urgent, k.changed = true, true
	l.changed()
	l.wake()
}

// Heard records a frame from c.
func (l *Writer) Heard(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.get(c.node); k.conn == c {
		k.lastHeard = l.clock.Now()
		k.changed = true
	}
}

// ReportAcked records the last report ID acknowledged on c.
func (l *Writer) ReportAcked(c *Conn, id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.get(c.node); k.conn == c && id > k.lastReportID {
		k.lastReportID = id
		k.changed = true
	}
}

// SetUnacked records how many objects sent on c wait for an Ack.
func (l *Writer) SetUnacked(c *Conn, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.get(c.node); k.conn == c && k.unacked != n {
		k.unacked = n
		k.changed = true
	}
}

// SetOutbox records the outbox fill c's LocalController last said.
func (l *Writer) SetOutbox(c *Conn, fill edgeproto.OutboxFill) {
	text := fmt.Sprintf("%d%% (%d/%d reports, %d/%d bytes)", fill.Percent(), fill.Reports, fill.MaxReports, fill.Bytes, fill.MaxBytes)
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.get(c.node); k.conn == c {
		k.fill = &fill
		if k.outbox != text {
			k.outbox = text
			k.changed = true
		}
	}
}

// Run writes the Leases until ctx is done: connects and disconnects at once,
// other changes at most every period per node, and at most rate a second
// in all, in rounds of a tenth of the period: a thousand nodes' renewals go
// out fifty a second, not five hundred at once every ten seconds, a burst
// that queued the hub's status writes behind it in the API server's fair
// queue of this client. A failed write is tried again on the next round.
func (l *Writer) Run(ctx context.Context) {
	ticker := l.clock.NewTicker(l.round())
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-l.kick:
		}
		l.WriteDue(ctx, false)
	}
}

// roundsPerPeriod is how many rounds of renewals run in a period.
const roundsPerPeriod = 10

// round is the time between two rounds of renewals (a millisecond at
// least, however short a test's period).
func (l *Writer) round() time.Duration { return max(time.Millisecond, l.period/roundsPerPeriod) }

// renewalBudget is how many of due renewals may go out at now, by the
// rate. The credit carries over at most a round's worth (one more for a
// tick a little early, then one a little late), and the time a round's
// writes ran past the round (an API server slow to answer): what the rate
// allowed meanwhile is written when it answers again, up to a period's
// worth. l.mu is held.
func (l *Writer) renewalBudget(now time.Time, due int) int {
	perRound := max(1, l.rate*l.round().Seconds())
	if l.creditAt.IsZero() {
		l.credit = perRound
	} else {
		elapsed := max(0, now.Sub(l.creditAt))
		late := min(max(0, elapsed-l.round()), l.period)
		l.credit = min(perRound+1+l.rate*late.Seconds(), l.credit+l.rate*elapsed.Seconds())
	}
	l.creditAt = now
	if l.credit >= float64(due) {
		return due
	}
	return int(l.credit)
}

// renewal is how often each of connected nodes is renewed: period, or
// longer where rate would not write them all in period.
func (l *Writer) renewal(connected int) time.Duration {
	if l.rate <= 0 {
		return l.period
	}
	return max(l.period, time.Duration(float64(connected)/l.rate*float64(time.Second)))
}

// WriteDue writes the Leases that are due, all that changed when force
// (as the hub stops).
// Renewals beyond the rate's share of one round wait for the next, those
// written longest ago first.
func (l *Writer) WriteDue(ctx context.Context, force bool) {
	type due struct {
		node string
		k    link
	}
	var todo, renew []due
	l.mu.Lock()
	now := l.clock.Now()
	connected := 0
	for node, k := range l.nodes {
		if k.connected {
			connected++
		}
		switch {
		case k.urgent || (force && k.changed):
			todo = append(todo, due{node, *k})
		case k.changed && now.Sub(k.lastWritten) >= l.period:
			renew = append(renew, due{node, *k})
		}
	}
	if !force && l.rate > 0 {
		if budget := l.renewalBudget(now, len(renew)); len(renew) > budget {
			slices.SortFunc(renew, func(a, b due) int { return a.k.lastWritten.Compare(b.k.lastWritten) })
			renew = renew[:budget]
		}
		l.credit -= float64(len(renew))
	}
	todo = append(todo, renew...)
	for i := range todo {
		// Cleared now so that a change made while the write is in
		// flight is written next time; put back if the write fails.
		k := l.nodes[todo[i].node]
		k.urgent, k.changed = false, false
		k.lastWritten = now
		if k.lease == nil && l.takePrior(todo[i].node, k) {
			todo[i].k = *k
		}
	}
	l.mu.Unlock()
	// A node's next renewal may come a round after its turn.
	duration := l.renewal(connected) + l.round() + l.grace

	// In parallel: a GlobalManager that stops marks every node disconnected
	// at once, and one write after another would take a thousand nodes
	// past its shutdown timeout.
	workqueue.ParallelizeUntil(ctx, leaseWriters, len(todo), func(i int) {
		d := todo[i]
		lease, err := l.write(ctx, d.node, &d.k, duration)
		l.mu.Lock()
		k := l.nodes[d.node]
		if err != nil {
			k.urgent = k.urgent || d.k.urgent
			k.changed = true
			// Its turn again at once, not after every other node's.
			k.lastWritten = d.k.lastWritten
			k.lease = nil // read it again
		} else {
			// The next write sends it back: an update without managedFields
			// keeps the server's (only an empty list clears them), and a
			// thousand nodes' copies need not hold them.
			lease.ManagedFields = nil
			k.lease = lease
			if k.store == d.k.store {
				k.lastReportID = max(k.lastReportID, d.k.lastReportID)
				k.statedID = max(k.statedID, d.k.statedID)
			}
		}
		l.mu.Unlock()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Writing the link state of an edge node", "node", d.node)
		}
	})
}

// leaseWriters is how many Lease writes WriteDue has in flight at most.
const leaseWriters = 32

// write puts k into node's Lease, valid for duration, and returns the Lease
// written.
func (l *Writer) write(ctx context.Context, node string, k *link, duration time.Duration) (*coordinationv1.Lease, error) {
	leases := l.client.CoordinationV1().Leases(l.namespace)
	name := LeaseName(node)
	lease := k.lease
	if lease == nil {
		got, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			created, err := leases.Create(ctx, l.fill(&coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.namespace},
			}, node, k, duration), metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("creating lease %s/%s: %w", l.namespace, name, err)
			}
			return created, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading lease %s/%s: %w", l.namespace, name, err)
		}
		// After a restart, keep saying what an earlier hub acknowledged of
		// the same store.
		if got.Annotations[AnnotationReportStore] == k.store {
			k.merge(got)
		}
		lease = got
	}
	updated, err := leases.Update(ctx, l.fill(lease.DeepCopy(), node, k, duration), metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("updating lease %s/%s: %w", l.namespace, name, err)
	}
	return updated, nil
}

// fill sets the fields of lease the hub owns from k, valid for duration.
func (l *Writer) fill(lease *coordinationv1.Lease, node string, k *link, duration time.Duration) *coordinationv1.Lease {
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[LabelEdgeNode] = labelValue(node)
	if l.own != nil {
		l.own(&lease.ObjectMeta)
	}
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	state := LinkDisconnected
	if k.connected {
		state = LinkConnected
	}
	lease.Annotations[AnnotationLink] = state
	lease.Annotations[AnnotationLastReportID] = strconv.FormatUint(k.lastReportID, 10)
	lease.Annotations[AnnotationReportStore] = k.store
	lease.Annotations[AnnotationStatedReportID] = strconv.FormatUint(k.statedID, 10)
	lease.Annotations[AnnotationUnackedObjects] = strconv.Itoa(k.unacked)
	if k.outbox != "" {
		lease.Annotations[AnnotationOutbox] = k.outbox
	}
	holder := node
	seconds := int32((duration + time.Second - 1) / time.Second)
	lease.Spec.HolderIdentity = &holder
	lease.Spec.LeaseDurationSeconds = &seconds
	if !k.connectedAt.IsZero() {
		lease.Spec.AcquireTime = &metav1.MicroTime{Time: k.connectedAt}
	}
	if !k.lastHeard.IsZero() {
		lease.Spec.RenewTime = &metav1.MicroTime{Time: k.lastHeard}
	}
	return lease
}

// State is node's link as this hub knows it: connected now, when last
// heard from, and whether it has known the node at all since it started.
func (l *Writer) State(node string) (connected bool, lastHeard time.Time, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.nodes[node]
	if !ok {
		return false, time.Time{}, false
	}
	return k.connected, k.lastHeard, true
}

// Unacked is how many objects sent to node wait for its acknowledgement, as
// its Lease is to say.
func (l *Writer) Unacked(node string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k, ok := l.nodes[node]; ok {
		return k.unacked
	}
	return 0
}

// Node is one node's link as this hub knows it.
type Node struct {
	Name      string
	Connected bool
	// LastHeard is when the hub last heard from the node.
	LastHeard time.Time
	// Outbox is the outbox fill its LocalController last said; nil when it
	// said none since this hub started.
	Outbox *edgeproto.OutboxFill
}

// Nodes are the links of every node this hub has known since it started,
// connected or not, in no order.
func (l *Writer) Nodes() []Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Node, 0, len(l.nodes))
	for name, k := range l.nodes {
		n := Node{Name: name, Connected: k.connected, LastHeard: k.lastHeard}
		if k.fill != nil {
			fill := *k.fill
			n.Outbox = &fill
		}
		out = append(out, n)
	}
	return out
}
