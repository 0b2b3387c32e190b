package edgehub

import (
	"cmp"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
)

// A session's Upserts and Deletes, as its downstream window (package window)
// decides them: the session is the window's Sender. The session's writer
// owns the window (session.write).

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

// The session is its window's window.Sender.

// Upsert sends d as ref, or says why it cannot be sent at this version.
func (s *session) Upsert(ref edgeproto.ObjectRef, d desired.Object) (bool, error) {
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
		// Not something a retry mends: the window does not try this
		// version again.
		s.hub.metrics.unsendable.Inc()
		if objectFails {
			s.hub.conditions.unsendable(ref, err)
		}
		s.logger.Error(err, "Cannot send an object to an edge node", "object", d.ObjectVersion(ref))
		if ro, ok := d.Obj.(runtime.Object); ok {
			s.hub.recorder.Eventf(ro, corev1.EventTypeWarning, ReasonUnsendable,
				"Cannot be sent to edge node %s, whose LocalController keeps the previous version or none: %v", s.node, err)
		}
		return false, nil
	}
	if err := s.sendFrame(edgeproto.TypeUpsert, frame); err != nil {
		return false, err
	}
	s.hub.conditions.sent(s.hub.byName[ref.Kind], ref, d.Obj)
	s.logger.V(4).Info("Sent object", "object", d.ObjectVersion(ref))
	return true, nil
}

// Delete sends the Delete of ref, held at v.
func (s *session) Delete(ref edgeproto.ObjectRef, v desired.Version) error {
	ov := edgeproto.ObjectVersion{ObjectRef: ref, ResourceVersion: v.ResourceVersion, Digest: v.Digest, Workers: v.Workers}
	if err := s.send(&edgeproto.Delete{ObjectVersion: ov}); err != nil {
		return err
	}
	s.logger.V(4).Info("Sent delete", "object", ov)
	return nil
}

// Between takes, without waiting, the acknowledgements the reader and the
// reporter have ready: between two sends of a long run, so that neither waits
// on the writer for more than one frame.
func (s *session) Between() error {
	for {
		select {
		case acks := <-s.acks:
			s.downstream.Ack(acks)
		case <-s.reports.Ready():
			if err := s.ackReports(); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}
