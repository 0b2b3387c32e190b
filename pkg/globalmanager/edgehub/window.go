package edgehub

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// The downstream window of a session: the difference between what its node
// should hold and what it holds, sent in order as Acks make room
// (Config.SendWindow), and what is not acknowledged sent again. The
// session's writer owns it (session.write).

// inflight is an Upsert or Delete sent and not yet acknowledged.
type inflight struct {
	version   objVersion
	delete    bool
	firstSent time.Time // of this version, for the ack latency
	lastSent  time.Time
	seq       uint64 // the session's count of Upserts and Deletes at its last send
}

// queued is an Upsert or Delete of the difference that waits for room in the
// window.
type queued struct {
	ref     edgeproto.ObjectRef
	desired desiredObject // the Upsert's object, unless delete
	delete  bool
	version objVersion // the Delete's version
}

// known is the version of ref the LocalController holds or is being sent,
// the zero version for none.
func (s *session) known(ref edgeproto.ObjectRef) objVersion {
	if f := s.inflight[ref]; f != nil {
		if f.delete {
			return objVersion{}
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
	desired := s.hub.desired(s.node)
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
		if (s.known(ref).sameOnEdge(d.version) && !force[ref]) || s.unsendable[ref].sameOnEdge(d.version) {
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
		case !s.known(q.ref).sameOnEdge(q.desired.version) && !s.unsendable[q.ref].sameOnEdge(q.desired.version):
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
			return k.order
		}
		return len(h.kinds)
	}
	return cmp.Or(cmp.Compare(rank(a.Kind), rank(b.Kind)), cmp.Compare(a.Kind, b.Kind),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func (s *session) sendUpsert(ref edgeproto.ObjectRef, d desiredObject) error {
	obj, _, err := encodeObject(d.kind, d.obj)
	// Whether the object can be sent at all is decided on the object alone,
	// the same for every node, so that the sessions of two nodes never want
	// opposite conditions on it; a node whose worker list does not fit beside
	// it is told by its event alone.
	if limit := edgeproto.MaxObjectFrameBytes - workerNamesReserve; err == nil && len(obj) > limit {
		err = fmt.Errorf("%w: %s %s is %d bytes, over the %d a frame carries beside its worker names", edgeproto.ErrTooLarge,
			ref.Kind, nsKey(ref.Namespace, ref.Name), len(obj), limit)
	}
	objectFails := err != nil
	var frame []byte
	if err == nil {
		frame, err = edgeproto.Encode(&edgeproto.Upsert{
			ObjectVersion: d.objectVersion(ref),
			Object:        obj,
			WorkerPods:    d.workers,
		})
	}
	if err != nil {
		// Not something a retry mends; the next version may be sendable.
		s.unsendable[ref] = d.version
		s.hub.metrics.unsendable.Inc()
		if objectFails {
			s.hub.conditions.unsendable(ref, err)
		}
		s.logger.Error(err, "Cannot send an object to an edge node", "object", d.objectVersion(ref))
		if ro, ok := d.obj.(runtime.Object); ok {
			s.hub.recorder.Eventf(ro, corev1.EventTypeWarning, ReasonUnsendable,
				"Cannot be sent to edge node %s, whose LocalController keeps the previous version or none: %v", s.node, err)
		}
		return nil
	}
	if err := s.sendFrame(edgeproto.TypeUpsert, frame); err != nil {
		return err
	}
	s.sent(ref, d.version, false)
	s.hub.conditions.sent(d.kind, ref, d.obj)
	s.logger.V(4).Info("Sent object", "object", d.objectVersion(ref))
	return nil
}

func (s *session) sendDelete(ref edgeproto.ObjectRef, v objVersion) error {
	ov := edgeproto.ObjectVersion{ObjectRef: ref, ResourceVersion: v.resourceVersion, Digest: v.digest, Workers: v.workers}
	if err := s.send(&edgeproto.Delete{ObjectVersion: ov}); err != nil {
		return err
	}
	s.sent(ref, v, true)
	s.logger.V(4).Info("Sent delete", "object", ov)
	return nil
}

// sent records an Upsert or Delete as waiting for its Ack.
func (s *session) sent(ref edgeproto.ObjectRef, v objVersion, isDelete bool) {
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
		if f == nil || !f.version.sameOnEdge(versionOf(v)) || f.version.resourceVersion != v.ResourceVersion {
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
