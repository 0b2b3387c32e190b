package edgehub

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
	LabelEdgeNode            = "nereid.io/edge-node"
	AnnotationLink           = "nereid.io/link"
	AnnotationLastReportID   = "nereid.io/last-report-id"
	AnnotationReportStore    = "nereid.io/report-store"
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
	session      *session // the current connection, when connected
	connectedAt  time.Time
	lastHeard    time.Time
	store        string // of the current (or last) connection's Hello
	lastReportID uint64 // of store: report IDs count per store
	unacked      int
	outbox       string // AnnotationOutbox's value, "" until heard

	urgent      bool      // a connect or disconnect not yet written
	changed     bool      // something not yet written
	lastWritten time.Time // zero: never written by this hub
	lease       *coordinationv1.Lease
}

// links keeps every node's link state and writes it to the node's Lease.
type links struct {
	client    kubernetes.Interface
	namespace string
	owner     Owner         // of the Leases, if set
	period    time.Duration // the shortest between two renewals of a node
	rate      float64       // renewals a second, at most
	grace     time.Duration // added to a renewal's period in leaseDurationSeconds
	clock     clock.WithTicker

	mu    sync.Mutex
	nodes map[string]*link
	kick  chan struct{}
	// credit is how many renewals may go out now, by the rate since
	// creditAt (renewalBudget), so that rounds a kick adds between ticks
	// do not add to the rate.
	credit   float64
	creditAt time.Time
}

func newLinks(client kubernetes.Interface, cfg Config, clk clock.WithTicker) *links {
	return &links{
		client:    client,
		namespace: cfg.Namespace,
		owner:     cfg.Owner,
		period:    cfg.LeaseUpdatePeriod,
		rate:      cfg.LeaseWriteRate,
		grace:     cfg.ReadTimeout,
		clock:     clk,
		nodes:     make(map[string]*link),
		kick:      make(chan struct{}, 1),
	}
}

func (l *links) get(node string) *link {
	k := l.nodes[node]
	if k == nil {
		k = &link{}
		l.nodes[node] = k
	}
	return k
}

func (l *links) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// connected records that s is node's connection now.
func (l *links) connected(s *session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.get(s.node)
	now := l.clock.Now()
	k.connected, k.session, k.connectedAt, k.lastHeard = true, s, now, now
	k.unacked = 0
	if k.store != s.hello.Store {
		// A new store counts its reports from 1: the last ID of the old one
		// says nothing about it.
		k.store, k.lastReportID = s.hello.Store, 0
	}
	k.urgent, k.changed = true, true
	l.wake()
}

// disconnected records that s ended, unless a newer connection replaced it.
func (l *links) disconnected(s *session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.get(s.node)
	if k.session != s {
		return
	}
	k.connected, k.session = false, nil
	k.urgent, k.changed = true, true
	l.wake()
}

// heard records a frame from s.
func (l *links) heard(s *session) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.get(s.node); k.session == s {
		k.lastHeard = l.clock.Now()
		k.changed = true
	}
}

// reportAcked records the last report ID acknowledged to s.
func (l *links) reportAcked(s *session, id uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.get(s.node); k.session == s && id > k.lastReportID {
		k.lastReportID = id
		k.changed = true
	}
}

// setUnacked records how many objects sent on s wait for an Ack.
func (l *links) setUnacked(s *session, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.get(s.node); k.session == s && k.unacked != n {
		k.unacked = n
		k.changed = true
	}
}

// setOutbox records the outbox fill s's LocalController last said.
func (l *links) setOutbox(s *session, fill edgeproto.OutboxFill) {
	text := fmt.Sprintf("%d%% (%d/%d reports, %d/%d bytes)", fill.Percent(), fill.Reports, fill.MaxReports, fill.Bytes, fill.MaxBytes)
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.get(s.node); k.session == s && k.outbox != text {
		k.outbox = text
		k.changed = true
	}
}

// run writes the Leases until ctx is done: connects and disconnects at once,
// other changes at most every period per node, and at most rate a second
// in all, in rounds of a tenth of the period: a thousand nodes' renewals go
// out fifty a second, not five hundred at once every ten seconds, a burst
// that queued the hub's status writes behind it in the API server's fair
// queue of this client. A failed write is tried again on the next round.
func (l *links) run(ctx context.Context) {
	ticker := l.clock.NewTicker(l.round())
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-l.kick:
		}
		l.writeDue(ctx, false)
	}
}

// roundsPerPeriod is how many rounds of renewals run in a period.
const roundsPerPeriod = 10

// round is the time between two rounds of renewals (a millisecond at
// least, however short a test's period).
func (l *links) round() time.Duration { return max(time.Millisecond, l.period/roundsPerPeriod) }

// renewalBudget is how many of due renewals may go out at now, by the
// rate. The credit carries over at most a round's worth (one more for a
// tick a little early, then one a little late), and the time a round's
// writes ran past the round (an API server slow to answer): what the rate
// allowed meanwhile is written when it answers again, up to a period's
// worth. l.mu is held.
func (l *links) renewalBudget(now time.Time, due int) int {
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
func (l *links) renewal(connected int) time.Duration {
	if l.rate <= 0 {
		return l.period
	}
	return max(l.period, time.Duration(float64(connected)/l.rate*float64(time.Second)))
}

// writeDue writes the Leases that are due, all that changed when force.
// Renewals beyond the rate's share of one round wait for the next, those
// written longest ago first.
func (l *links) writeDue(ctx context.Context, force bool) {
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
	for _, d := range todo {
		// Cleared now so that a change made while the write is in
		// flight is written next time; put back if the write fails.
		k := l.nodes[d.node]
		k.urgent, k.changed = false, false
		k.lastWritten = now
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
			}
		}
		l.mu.Unlock()
		if err != nil {
			klog.FromContext(ctx).Error(err, "Writing the link state of an edge node", "node", d.node)
		}
	})
}

// leaseWriters is how many Lease writes writeDue has in flight at most.
const leaseWriters = 32

// write puts k into node's Lease, valid for duration, and returns the Lease
// written.
func (l *links) write(ctx context.Context, node string, k *link, duration time.Duration) (*coordinationv1.Lease, error) {
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
		if id, err := strconv.ParseUint(got.Annotations[AnnotationLastReportID], 10, 64); err == nil && id > k.lastReportID &&
			got.Annotations[AnnotationReportStore] == k.store {
			k.lastReportID = id
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
func (l *links) fill(lease *coordinationv1.Lease, node string, k *link, duration time.Duration) *coordinationv1.Lease {
	if lease.Labels == nil {
		lease.Labels = map[string]string{}
	}
	lease.Labels[LabelEdgeNode] = labelValue(node)
	OwnedBy(&lease.ObjectMeta, l.owner.ref())
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

// state is node's link as this hub knows it: connected now, when last
// heard from, and whether it has known the node at all since it started.
func (l *links) state(node string) (connected bool, lastHeard time.Time, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.nodes[node]
	if !ok {
		return false, time.Time{}, false
	}
	return k.connected, k.lastHeard, true
}
