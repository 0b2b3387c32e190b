package edgehub

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
)

// The downstream window of a session: the difference between what its node
// should hold and what it holds, sent in order as Acks make room
// (Config.SendWindow), and what is not acknowledged sent again. The
// session's writer owns it (session.write).

// inflight is an Upsert or Delete sent and not yet acknowledged.
type inflight struct {
	version   desired.Version
	delete    bool
	firstSent time.Time // of this version, for the ack latency
	lastSent  time.Time
	seq       uint64 // the session's count of Upserts and Deletes at its last send
}

// queued is an Upsert or Delete of the difference that waits for room in the
// window.
type queued struct {
	ref     edgeproto.ObjectRef
	desired desired.Object // the Upsert's object, unless delete
	delete  bool
	version desired.Version // the Delete's version
}

// known is the version of ref the LocalController holds or is being sent,
// the zero version for none.
func (s *session) known(ref edgeproto.ObjectRef) desired.Version {
	if f := s.inflight[ref]; f != nil {
		if f.delete {
			return desired.Version{}
		}
		return f.version
	}
	return s.held[ref]
}

// sync plans what makes the LocalController's store the node's set: an
// Upsert for each object it lacks or holds at another version, a Delete for
// each it holds that left the set. What replaces an Upsert or Delete in
// flight goes at once, since it takes no more room in the window; the rest
// is queued, and fill sends it. force names refs to send again even when
// already sent (resends).
func (s *session) sync(force map[edgeproto.ObjectRef]bool) error {
	desired := s.hub.sets.Of(s.node)
	refs := make([]edgeproto.ObjectRef, 0, len(desired))
	for ref := range desired {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, s.hub.compareRefs)
	// The queue is planned afresh from the latest state: what an earlier
	// plan still held is in this one, at its latest version, or is no
	// longer due.
	clear(s.queue)
	s.queue, s.next = s.queue[:0], 0
	for _, ref := range refs {
		d := desired[ref]
		if (s.known(ref).SameOnEdge(d.Version) && !force[ref]) || s.unsendable[ref].SameOnEdge(d.Version) {
			continue
		}
		if s.inflight[ref] == nil {
			s.queue = append(s.queue, queued{ref: ref, desired: d})
			continue
		}
		if err := s.sendUpsert(ref, d); err != nil {
			return err
		}
	}

	var gone []edgeproto.ObjectRef
	for ref := range s.held {
		if _, ok := desired[ref]; !ok && s.inflight[ref] == nil {
			gone = append(gone, ref)
		}
	}
	for ref, f := range s.inflight {
		if _, ok := desired[ref]; !ok && (!f.delete || force[ref]) {
			gone = append(gone, ref)
		}
	}
	slices.SortFunc(gone, s.hub.compareRefs)
	for _, ref := range gone {
		f := s.inflight[ref]
		if f == nil {
			s.queue = append(s.queue, queued{ref: ref, delete: true, version: s.held[ref]})
			continue
		}
		if err := s.sendDelete(ref, f.version); err != nil {
			return err
		}
	}
	return s.fill()
}

// queued is how many Upserts and Deletes of the difference wait for room in
// the window.
func (s *session) queued() int { return len(s.queue) - s.next }

// fill sends from the queue while the window has room, at most a window's
// worth, so that the writer's loop gets its turn between two fills.
func (s *session) fill() error {
	window := s.hub.cfg.SendWindow
	for n := 0; n < window && s.queued() > 0 && len(s.inflight) < window; n++ {
		q := s.queue[s.next]
		s.queue[s.next] = queued{} // the object is not kept alive by the queue
		s.next++
		var err error
		switch {
		case s.inflight[q.ref] != nil:
			// Sent since the plan was made: nothing left to do.
		case q.delete:
			err = s.sendDelete(q.ref, q.version)
		case !s.known(q.ref).SameOnEdge(q.desired.Version) && !s.unsendable[q.ref].SameOnEdge(q.desired.Version):
			err = s.sendUpsert(q.ref, q.desired)
		}
		if err != nil {
			return err
		}
		if err := s.between(); err != nil {
			return err
		}
	}
	return nil
}

// between takes, without waiting, the acknowledgements the reader and the
// reporter have ready: between two sends of a long run, so that neither waits
// on the writer for more than one frame.
func (s *session) between() error {
	for {
		select {
		case acks := <-s.acks:
			s.ack(acks)
		case <-s.reports.Ready():
			if err := s.ackReports(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// compareRefs orders refs by their kinds' order (Datasets and Models before
// the jobs that name them), then by kind, namespace and name.
func (h *Hub) compareRefs(a, b edgeproto.ObjectRef) int {
	rank := func(name string) int {
		if k := h.byName[name]; k != nil {
			return k.Order
		}
		return len(h.kinds)
	}
	return cmp.Or(cmp.Compare(rank(a.Kind), rank(b.Kind)), cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func (s *session) sendUpsert(ref edgeproto.ObjectRef, d desired.Object) error {
	obj, _, err := desired.EncodeObject(d.Kind, d.Obj)
	// Whether the object can be sent at all is decided on the object alone,
	// the same for every node, so that the sessions of two nodes never want
	// opposite conditions on it; a node whose worker list does not fit beside
	// it is told by its event alone.
	if limit := edgeproto.MaxObjectFrameBytes - workerNamesReserve; err == nil && len(obj) > limit {
		err = fmt.Errorf("%w: %s %s is %d bytes, over the %d a frame carries beside its worker names", edgeproto.ErrTooLarge,
			ref.Kind, ref.Namespace+"/"+ref.Name, len(obj), limit)
	}
	objectFails := err != nil
	var frame []byte
	if err == nil {
		frame, err = edgeproto.Encode(&edgeproto.Upsert{
			ObjectVersion: d.ObjectVersion(ref),
			Object:        obj,
			WorkerPods:    d.Workers,
		})
	}
	if err != nil {
		// Not something a retry mends; the next version may be sendable.
		s.unsendable[ref] = d.Version
		s.hub.metrics.unsendable.Inc()
		if objectFails {
			s.hub.conditions.unsendable(ref, err)
		}
		s.logger.Error(err, "Cannot send an object to an edge node", "object", d.ObjectVersion(ref))
		if ro, ok := d.Obj.(runtime.Object); ok {
			s.hub.recorder.Eventf(ro, corev1.EventTypeWarning, ReasonUnsendable,
				"Cannot be sent to edge node %s, whose LocalController keeps the previous version or none: %v", s.node, err)
		}
		return nil
	}
	if err := s.sendFrame(edgeproto.TypeUpsert, frame); err != nil {
		return err
	}
	s.sent(ref, d.Version, false)
	s.hub.conditions.sent(s.hub.byName[ref.Kind], ref, d.Obj)
	s.logger.V(4).Info("Sent object", "object", d.ObjectVersion(ref))
	return nil
}

func (s *session) sendDelete(ref edgeproto.ObjectRef, v desired.Version) error {
	ov := edgeproto.ObjectVersion{ObjectRef: ref, ResourceVersion: v.ResourceVersion, Digest: v.Digest, Workers: v.Workers}
	if err := s.send(&edgeproto.Delete{ObjectVersion: ov}); err != nil {
		return err
	}
	s.sent(ref, v, true)
	s.logger.V(4).Info("Sent delete", "object", ov)
	return nil
}

// sent records an Upsert or Delete as waiting for its Ack.
func (s *session) sent(ref edgeproto.ObjectRef, v desired.Version, isDelete bool) {
	now := s.hub.clock.Now()
	s.sentSeq++
	f := s.inflight[ref]
	if f != nil && f.version == v && f.delete == isDelete {
		s.hub.metrics.resends.Inc()
		f.lastSent, f.seq = now, s.sentSeq
		return
	}
	s.inflight[ref] = &inflight{version: v, delete: isDelete, firstSent: now, lastSent: now, seq: s.sentSeq}
}

// ack settles what the LocalController acknowledged. An Ack of a version
// other than the one last sent settles nothing: the newer one is on its way.
func (s *session) ack(versions []edgeproto.ObjectVersion) {
	now := s.hub.clock.Now()
	for _, v := range versions {
		f := s.inflight[v.ObjectRef]
		if f == nil || !f.version.SameOnEdge(desired.VersionOf(v)) || f.version.ResourceVersion != v.ResourceVersion {
			continue
		}
		s.hub.metrics.ackLatency.Observe(now.Sub(f.firstSent).Seconds())
		s.ackedSeq, s.lastAcked = max(s.ackedSeq, f.seq), now
		if f.delete {
			delete(s.held, v.ObjectRef)
		} else {
			s.held[v.ObjectRef] = f.version
		}
		delete(s.inflight, v.ObjectRef)
	}
}

// resend sends again, at its latest version, what has waited ResendAfter for
// its Ack and that the LocalController has either gone past (it acknowledged
// something sent after it: it reads and persists in order) or may have lost
// (it has settled nothing for ResendAfter). Waiting alone is no sign of loss:
// behind a full window on a node with a slow disk, the last Upsert waits for
// all those before it.
func (s *session) resend() error {
	now := s.hub.clock.Now()
	after := s.hub.cfg.ResendAfter
	silent := now.Sub(s.lastAcked) >= after
	var force map[edgeproto.ObjectRef]bool
	for ref, f := range s.inflight {
		if now.Sub(f.lastSent) >= after && (f.seq < s.ackedSeq || silent) {
			if force == nil {
				force = make(map[edgeproto.ObjectRef]bool)
			}
			force[ref] = true
		}
	}
	if force == nil {
		return nil
	}
	return s.sync(force)
}
