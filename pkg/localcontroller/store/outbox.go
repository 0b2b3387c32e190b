package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"
)

// Report is a worker report waiting in the outbox for the GlobalManager's
// acknowledgement.
type Report struct {
	// ID orders the reports and names them in acknowledgements. It is never
	// reused, even after an acknowledgement or a restart, so the GlobalManager
	// can tell a report it has already applied from a new one.
	ID   uint64
	Data []byte
}

// Report IDs are big-endian on disk so the bucket's byte order is ID order.
func reportKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), id)
}

// AppendReport adds a report to the outbox and returns its ID, the next in
// a sequence kept in the file itself. It returns only once the report is
// committed to disk, because the worker is answered only then and a report a
// worker was told is taken must survive a LocalController restart.
//
// It is for workers' reports, which fill at most the workers' share of the
// outbox: (1 - 1/ReservedOutboxShare) of MaxOutboxReports and of
// MaxOutboxBytes. The rest is kept for the LocalController's own reports
// (AppendReportWithState: train triggers, deploys, dataset counts), so that
// a worker, or anyone who reaches the worker API, filling the outbox does
// not stop them. When one more report would pass the workers' share it
// returns an error wrapping ErrOutboxFull and stores nothing: the outbox
// drops neither the new report silently nor an old one to make room, and the
// worker is told to retry. A report larger than the share by itself gets
// ErrReportTooLarge instead.
func (s *Store) AppendReport(data []byte) (uint64, error) {
	return s.appendReport(data, "", nil, true, "")
}

// AppendWorkerReport appends a report of the worker named worker, as
// AppendReport does, and holds each worker to its share: once the workers'
// reports fill half of their share of the outbox, a worker that holds more
// than the share divided by the workers of the node's objects is refused
// (ErrOutboxFull), so one worker, or anyone who reaches the worker API as
// it, cannot take the room of the others. A node with one worker may still
// fill the whole share.
func (s *Store) AppendWorkerReport(worker string, data []byte) (uint64, error) {
	return s.appendReport(data, "", nil, true, worker)
}

// held is what one worker's reports hold of the outbox.
type held struct {
	count int
	bytes int64
}

// ReservedOutboxShare: one in ReservedOutboxShare of the outbox's bounds is
// kept for the LocalController's own reports.
const ReservedOutboxShare = 10

// workersShare is the part of bound workers' reports may fill: at least
// one is kept for the LocalController's own when the bound allows two.
func workersShare[N int | int64](bound N) N {
	if bound < 2 {
		return bound
	}
	return bound - max(1, bound/ReservedOutboxShare)
}

// AppendReportWithState appends a report as AppendReport does and, in the
// same transaction, sets the LocalController state stored under stateKey to
// state (see PutState). Either both are on disk or neither is: a manager that
// records "round 3 prepared" with the report saying so can never, after a
// crash, hold one without the other. An empty stateKey sets nothing.
func (s *Store) AppendReportWithState(data []byte, stateKey string, state []byte) (uint64, error) {
	return s.appendReport(data, stateKey, state, false, "")
}

func (s *Store) appendReport(data []byte, stateKey string, state []byte, worker bool, name string) (uint64, error) {
	size := int64(len(data))
	maxReports, maxBytes, whose := s.opts.MaxOutboxReports, s.opts.MaxOutboxBytes, ""
	if worker {
		maxReports, maxBytes, whose = workersShare(maxReports), workersShare(maxBytes), "workers' share: "
	}
	if size > maxBytes {
		return 0, fmt.Errorf("appending report of %d bytes: %w of %s%d bytes", size, ErrReportTooLarge, whose, maxBytes)
	}

	s.outboxMu.Lock()
	defer s.outboxMu.Unlock()
	if s.outboxCount+1 > maxReports || s.outboxBytes+size > maxBytes {
		return 0, fmt.Errorf("appending report of %d bytes: %w: %s%d reports of at most %d, %d bytes of at most %d",
			size, ErrOutboxFull, whose, s.outboxCount, maxReports, s.outboxBytes, maxBytes)
	}
	if name != "" && (s.outboxCount+1 > maxReports/2 || s.outboxBytes+size > maxBytes/2) {
		workers := max(1, s.workers.names())
		fairReports, fairBytes := max(1, maxReports/workers), max(1, maxBytes/int64(workers))
		if h := s.heldBy[name]; h.count+1 > fairReports || h.bytes+size > fairBytes {
			return 0, fmt.Errorf("appending report of %d bytes: %w: the outbox is over half full and worker %s holds %d reports (%d bytes), "+
				"its share is %d reports (%d bytes) of %d workers'", size, ErrOutboxFull, name, h.count, h.bytes, fairReports, fairBytes, workers)
		}
	}
	var id uint64
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(outboxBucket)
		var err error
		if id, err = b.NextSequence(); err != nil {
			return err
		}
		if stateKey != "" {
			if err := tx.Bucket(stateBucket).Put([]byte(stateKey), state); err != nil {
				return err
			}
		}
		if name != "" {
			if err := tx.Bucket(outboxWorkersBucket).Put(reportKey(id), []byte(name)); err != nil {
				return err
			}
		}
		return b.Put(reportKey(id), data)
	})
	if err != nil {
		return 0, fmt.Errorf("appending report: %w", err)
	}
	s.outboxCount++
	s.outboxBytes += size
	if name != "" {
		h := s.heldBy[name]
		s.heldBy[name] = held{count: h.count + 1, bytes: h.bytes + size}
	}
	return id, nil
}

// PendingReports returns up to limit reports (all of them if limit <= 0) with
// an ID above afterID, in ID order. The cloud link sends them in that order
// and, after a reconnect, starts again from afterID 0: whatever is still here
// was not acknowledged.
func (s *Store) PendingReports(afterID uint64, limit int) ([]Report, error) {
	if afterID == math.MaxUint64 {
		return nil, nil
	}
	var reports []Report
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(outboxBucket).Cursor()
		for k, v := c.Seek(reportKey(afterID + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(reports) == limit {
				break
			}
			reports = append(reports, Report{ID: binary.BigEndian.Uint64(k), Data: bytes.Clone(v)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading pending reports: %w", err)
	}
	return reports, nil
}

// AckReports removes the acknowledged reports from the outbox, freeing room
// under the bound. IDs that are absent are ignored, since an acknowledgement
// can arrive twice (after a reconnect, for instance).
func (s *Store) AckReports(ids ...uint64) error {
	if len(ids) == 0 {
		return nil
	}
	s.outboxMu.Lock()
	defer s.outboxMu.Unlock()
	var (
		removed      int
		removedBytes int64
	)
	freed := make(map[string]held)
	err := s.db.Update(func(tx *bolt.Tx) error {
		// A cursor, not Get, tells an absent report from an empty one.
		c := tx.Bucket(outboxBucket).Cursor()
		names := tx.Bucket(outboxWorkersBucket)
		clear(freed)
		removed, removedBytes = 0, 0
		for _, id := range ids {
			want := reportKey(id)
			k, v := c.Seek(want)
			if !bytes.Equal(k, want) {
				continue
			}
			// Read the size before Delete: v belongs to the page being changed.
			size := int64(len(v))
			if err := c.Delete(); err != nil {
				return err
			}
			removed++
			removedBytes += size
			if name := names.Get(want); name != nil {
				h := freed[string(name)]
				freed[string(name)] = held{count: h.count + 1, bytes: h.bytes + size}
				if err := names.Delete(want); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("acknowledging reports: %w", err)
	}
	s.outboxCount -= removed
	s.outboxBytes -= removedBytes
	for name, f := range freed {
		if h := s.heldBy[name]; h.count <= f.count {
			delete(s.heldBy, name)
		} else {
			s.heldBy[name] = held{count: h.count - f.count, bytes: h.bytes - f.bytes}
		}
	}
	return nil
}

// OutboxLen returns how many reports the outbox holds and their total size in
// bytes, to compare with the bound (and to export as metrics).
func (s *Store) OutboxLen() (count int, size int64, err error) {
	s.outboxMu.Lock()
	defer s.outboxMu.Unlock()
	return s.outboxCount, s.outboxBytes, nil
}

// OutboxBounds returns the most reports and bytes the outbox holds
// (Options.MaxOutboxReports and MaxOutboxBytes, with their defaults), to
// export beside OutboxLen so that an alert can see the outbox fill before a
// worker is refused.
func (s *Store) OutboxBounds() (maxReports int, maxBytes int64) {
	return s.opts.MaxOutboxReports, s.opts.MaxOutboxBytes
}

// LastReportID is the highest ID the outbox has given a report, 0 for none:
// what the LocalController states in its Hello (edgeproto.Hello.LastReportID).
func (s *Store) LastReportID() (uint64, error) {
	var id uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		id = tx.Bucket(outboxBucket).Sequence()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading the last report ID: %w", err)
	}
	return id, nil
}
