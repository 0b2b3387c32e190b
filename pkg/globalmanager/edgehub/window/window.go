package window

import (
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
)

// Set is what a node should hold, by ref.
type Set = map[edgeproto.ObjectRef]desired.Object

// Sender sends the window's Upserts and Deletes on a connection.
type Sender interface {
	// Upsert sends d as ref. It returns false, and no error, when d cannot
	// be sent at its version whatever is tried again (too large, say);
	// an error ends the window's work.
	Upsert(ref edgeproto.ObjectRef, d desired.Object) (sent bool, err error)
	// Delete sends the Delete of ref, held at v.
	Delete(ref edgeproto.ObjectRef, v desired.Version) error
	// Between runs between two sends of a long run (Fill): the connection
	// takes what it has ready, Acks among them, without waiting.
	Between() error
}

// Config is what a Window needs.
type Config struct {
	// Size is the most Upserts and Deletes sent and not yet acknowledged.
	Size int
	// ResendAfter is how long one waits for its Ack before it may be sent
	// again (see Resend).
	ResendAfter time.Duration
	// Compare orders refs: the order in which a difference is sent.
	Compare func(a, b edgeproto.ObjectRef) int
	// Desired is what the node should hold now.
	Desired func() Set
	// Held is what the LocalController says it holds, in its Hello.
	Held []edgeproto.ObjectVersion
	Out  Sender
	// Clock says when things are sent and acknowledged.
	Clock clock.PassiveClock
	// Resent, when set, is called for each Upsert or Delete sent again at
	// the same version; Acked with the time from its first send to its Ack.
	Resent func()
	Acked  func(latency time.Duration)
}

// inflight is an Upsert or Delete sent and not yet acknowledged.
type inflight struct {
	version   desired.Version
	delete    bool
	firstSent time.Time // of this version, for the ack latency
	lastSent  time.Time
	seq       uint64 // the window's count of Upserts and Deletes at its last send
}

// queued is an Upsert or Delete of the difference that waits for room in the
// window.
type queued struct {
	ref     edgeproto.ObjectRef
	desired desired.Object // the Upsert's object, unless delete
	delete  bool
	version desired.Version // the Delete's version
}

// Window is one connection's downstream window. It is not safe for
// concurrent use: the connection's writer owns it.
type Window struct {
	cfg        Config
	held       map[edgeproto.ObjectRef]desired.Version // what the LC holds, by its Hello and Acks
	inflight   map[edgeproto.ObjectRef]*inflight
	unsendable map[edgeproto.ObjectRef]desired.Version // versions the Sender could not send
	// queue[next:] is the rest of the difference, in the order to send it,
	// as of the last Sync; each goes out when the window has room.
	queue []queued
	next  int
	// sentSeq counts the Upserts and Deletes sent; ackedSeq is the highest
	// count of one acknowledged, and lastAcked when an Ack last settled
	// one (or the window began). See Resend.
	sentSeq, ackedSeq uint64
	lastAcked         time.Time
}

// New is the window of a connection whose LocalController holds cfg.Held.
func New(cfg Config) *Window {
	w := &Window{
		cfg:        cfg,
		held:       make(map[edgeproto.ObjectRef]desired.Version, len(cfg.Held)),
		inflight:   make(map[edgeproto.ObjectRef]*inflight),
		unsendable: make(map[edgeproto.ObjectRef]desired.Version),
		lastAcked:  cfg.Clock.Now(),
	}
	for _, v := range cfg.Held {
		w.held[v.ObjectRef] = desired.VersionOf(v)
	}
	w.cfg.Held = nil // not kept alive: held has it
	return w
}

// Held is how many objects the LocalController holds, as far as it said.
func (w *Window) Held() int { return len(w.held) }

// Inflight is how many Upserts and Deletes wait for their Ack.
func (w *Window) Inflight() int { return len(w.inflight) }

// Queued is how many Upserts and Deletes of the difference wait for room in
// the window.
func (w *Window) Queued() int { return len(w.queue) - w.next }

// Full says whether the window has no room for another send.
func (w *Window) Full() bool { return len(w.inflight) >= w.cfg.Size }

// known is the version of ref the LocalController holds or is being sent,
// the zero version for none.
func (w *Window) known(ref edgeproto.ObjectRef) desired.Version {
	if f := w.inflight[ref]; f != nil {
		if f.delete {
			return desired.Version{}
		}
		return f.version
	}
	return w.held[ref]
}

// Sync plans what makes the LocalController's store the node's set: an
// Upsert for each object it lacks or holds at another version, a Delete for
// each it holds that left the set. What replaces an Upsert or Delete in
// flight goes at once, since it takes no more room in the window; the rest
// is queued, and Fill sends it. force names refs to send again even when
// already sent (resends).
func (w *Window) Sync(force map[edgeproto.ObjectRef]bool) error {
	set := w.cfg.Desired()
	refs := make([]edgeproto.ObjectRef, 0, len(set))
	for ref := range set {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, w.cfg.Compare)
	// The queue is planned afresh from the latest state: what an earlier
	// plan still held is in this one, at its latest version, or is no
	// longer due.
	clear(w.queue)
	w.queue, w.next = w.queue[:0], 0
	for _, ref := range refs {
		d := set[ref]
		if (w.known(ref).SameOnEdge(d.Version) && !force[ref]) || w.unsendable[ref].SameOnEdge(d.Version) {
			continue
		}
		if w.inflight[ref] == nil {
			w.queue = append(w.queue, queued{ref: ref, desired: d})
			continue
		}
		if err := w.upsert(ref, d); err != nil {
			return err
		}
	}

	var gone []edgeproto.ObjectRef
	for ref := range w.held {
		if _, ok := set[ref]; !ok && w.inflight[ref] == nil {
			gone = append(gone, ref)
		}
	}
	for ref, f := range w.inflight {
		if _, ok := set[ref]; !ok && (!f.delete || force[ref]) {
			gone = append(gone, ref)
		}
	}
	slices.SortFunc(gone, w.cfg.Compare)
	for _, ref := range gone {
		f := w.inflight[ref]
		if f == nil {
			w.queue = append(w.queue, queued{ref: ref, delete: true, version: w.held[ref]})
			continue
		}
		if err := w.delete(ref, f.version); err != nil {
			return err
		}
	}
	return w.Fill()
}

// Fill sends from the queue while the window has room, at most a window's
// worth, so that the writer's loop gets its turn between two fills.
func (w *Window) Fill() error {
	size := w.cfg.Size
	for n := 0; n < size && w.Queued() > 0 && len(w.inflight) < size; n++ {
		q := w.queue[w.next]
		w.queue[w.next] = queued{} // the object is not kept alive by the queue
		w.next++
		var err error
		switch {
		case w.inflight[q.ref] != nil:
			// Sent since the plan was made: nothing left to do.
		case q.delete:
			err = w.delete(q.ref, q.version)
		case !w.known(q.ref).SameOnEdge(q.desired.Version) && !w.unsendable[q.ref].SameOnEdge(q.desired.Version):
			err = w.upsert(q.ref, q.desired)
		}
		if err != nil {
			return err
		}
		if err := w.cfg.Out.Between(); err != nil {
			return err
		}
	}
	return nil
}

func (w *Window) upsert(ref edgeproto.ObjectRef, d desired.Object) error {
	sent, err := w.cfg.Out.Upsert(ref, d)
	if err != nil {
		return err
	}
	if !sent {
		// Not something a retry mends; the next version may be sendable.
		w.unsendable[ref] = d.Version
		return nil
	}
	w.sent(ref, d.Version, false)
	return nil
}

func (w *Window) delete(ref edgeproto.ObjectRef, v desired.Version) error {
	if err := w.cfg.Out.Delete(ref, v); err != nil {
		return err
	}
	w.sent(ref, v, true)
	return nil
}

// sent records an Upsert or Delete as waiting for its Ack.
func (w *Window) sent(ref edgeproto.ObjectRef, v desired.Version, isDelete bool) {
	now := w.cfg.Clock.Now()
	w.sentSeq++
	f := w.inflight[ref]
	if f != nil && f.version == v && f.delete == isDelete {
		if w.cfg.Resent != nil {
			w.cfg.Resent()
		}
		f.lastSent, f.seq = now, w.sentSeq
		return
	}
	w.inflight[ref] = &inflight{version: v, delete: isDelete, firstSent: now, lastSent: now, seq: w.sentSeq}
}

// Ack settles what the LocalController acknowledged. An Ack of a version
// other than the one last sent settles nothing: the newer one is on its way.
func (w *Window) Ack(versions []edgeproto.ObjectVersion) {
	now := w.cfg.Clock.Now()
	for _, v := range versions {
		f := w.inflight[v.ObjectRef]
		if f == nil || !f.version.SameOnEdge(desired.VersionOf(v)) || f.version.ResourceVersion != v.ResourceVersion {
			continue
		}
		if w.cfg.Acked != nil {
			w.cfg.Acked(now.Sub(f.firstSent))
		}
		w.ackedSeq, w.lastAcked = max(w.ackedSeq, f.seq), now
		if f.delete {
			delete(w.held, v.ObjectRef)
		} else {
			w.held[v.ObjectRef] = f.version
		}
		delete(w.inflight, v.ObjectRef)
	}
}

// Resend sends again, at its latest version, what has waited ResendAfter for
// its Ack and that the LocalController has either gone past (it acknowledged
// something sent after it: it reads and persists in order) or may have lost
// (it has settled nothing for ResendAfter). Waiting alone is no sign of loss:
// behind a full window on a node with a slow disk, the last Upsert waits for
// all those before it.
func (w *Window) Resend() error {
	now := w.cfg.Clock.Now()
	after := w.cfg.ResendAfter
	silent := now.Sub(w.lastAcked) >= after
	var force map[edgeproto.ObjectRef]bool
	for ref, f := range w.inflight {
		if now.Sub(f.lastSent) >= after && (f.seq < w.ackedSeq || silent) {
			if force == nil {
				force = make(map[edgeproto.ObjectRef]bool)
			}
			force[ref] = true
		}
	}
	if force == nil {
		return nil
	}
	return w.Sync(force)
}
