// Package store is the LocalController's on-disk state: the sedna.io objects the
// GlobalManager sent for this node, and the outbox of worker reports the
// GlobalManager has not yet acknowledged.
//
// Both halves exist for the cloud–edge channel's guarantees. The LocalController
// acknowledges an object only once it is persisted, so that what the
// GlobalManager believes the node holds is really on disk; and it answers a
// worker only once its report is in the outbox, so that a partition, a
// LocalController restart or a GlobalManager restart loses no report. Every
// write therefore commits a bbolt transaction (fsynced) before it returns.
//
// The store is a single bbolt file, pure Go, so an edge node needs no cgo and
// no database server to keep serving its workers while the cloud is away.
//
// Each store file has a key, 32 random bytes written into it when it is
// created, and an identity derived from it (edgeproto.StoreIdentity). Report
// IDs count per store, and a store that is wiped or replaced starts them
// again at 1; the identity, which the LocalController states in its Hello
// with the key, is how the GlobalManager tells the new store's report 1 from
// the old store's report 1 it has already applied. The identity is public
// (it is on the node's Lease); the key is what proves a connection speaks
// for the store, so no one without the node's disk can claim its reports'
// IDs. A file made before stores had keys gets one when it is next opened,
// and so a new identity: reports it held that the GlobalManager had applied
// but not acknowledged are applied again, once.
package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// Defaults of Options. The outbox bound is what an edge node buffers while the
// cloud is unreachable. Sedna's worker library posts each report once and does
// not retry a 503, so the bound is sized for a long outage of a busy node: a
// joint inference worker's report is about 500 bytes as stored, so 100,000
// reports take about 50 MB (under the byte bound) and, at the default report
// period of 30 s, last 35 days of one worker, or 3.5 days of ten on one node.
const (
	DefaultMaxOutboxReports       = edgeproto.DefaultMaxOutboxReports
	DefaultMaxOutboxBytes   int64 = 64 << 20
	DefaultLockTimeout            = 2 * time.Second
)

var (
	// ErrOutboxFull is returned by AppendReport when one more report would pass
	// the outbox bound. Nothing is stored and nothing already buffered is
	// dropped: the worker API answers 503 and the worker retries later, once the
	// GlobalManager has acknowledged (and so freed) older reports.
	ErrOutboxFull = errors.New("outbox full")

	// ErrReportTooLarge is returned by AppendReport for a report larger than
	// the whole outbox byte bound: it could never be stored, so retrying is
	// pointless (the worker API answers 413, not 503).
	ErrReportTooLarge = errors.New("report larger than the outbox bound")

	// ErrLocked is returned by Open when another process (another
	// LocalController on the same data directory) holds the file's lock.
	ErrLocked = errors.New("store file is locked by another process")
)

// Options bound the store. A zero field takes its default.
type Options struct {
	// MaxOutboxReports is the most reports the outbox holds (default 100000).
	MaxOutboxReports int
	// MaxOutboxBytes is the most report payload bytes the outbox holds
	// (default 64 MiB).
	MaxOutboxBytes int64
	// LockTimeout is how long Open waits for the file lock before failing
	// with ErrLocked (default 2 s), so that a second LocalController on the
	// same file stops with a clear error instead of hanging.
	LockTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.MaxOutboxReports <= 0 {
		o.MaxOutboxReports = DefaultMaxOutboxReports
	}
	if o.MaxOutboxBytes <= 0 {
		o.MaxOutboxBytes = DefaultMaxOutboxBytes
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	return o
}

var (
	objectsBucket = []byte("objects")
	outboxBucket  = []byte("outbox")
	// outboxWorkersBucket names the worker of each report of the outbox
	// that AppendWorkerReport appended, by the report's key.
	outboxWorkersBucket = []byte("outbox-workers")
	stateBucket         = []byte("state")
	// metaBucket holds what describes the file itself: identityKey.
	metaBucket = []byte("meta")
	// storeKey is the file's key (edgeproto.NewStoreKey).
	storeKey = []byte("key")
)

// Store is the LocalController's on-disk store. It is safe for concurrent use.
type Store struct {
	db   *bolt.DB
	opts Options
	// key is the file's key, identity the identity it gives.
	key, identity string

	// outboxMu is held across every outbox write transaction and guards the
	// counters below, so the bound check and the counters always agree with
	// what is committed. bbolt serializes writers anyway, so it costs nothing.
	outboxMu    sync.Mutex
	outboxCount int
	outboxBytes int64
	// heldBy is what each worker's reports hold of the outbox
	// (AppendWorkerReport), by worker name.
	heldBy map[string]held

	// workers indexes the stored objects' workers by address.
	workers *workerIndex
}

// Open opens the store file at path, creating it (and its directory) if
// needed. It fails with ErrLocked after opts.LockTimeout if another process
// has the file open.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating store directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("opening store %s: %w (waited %s; is another LocalController using this data directory?)",
			path, ErrLocked, opts.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	s := &Store{db: db, opts: opts, workers: newWorkerIndex(), heldBy: make(map[string]held)}
	// The counters are recomputed from the outbox itself rather than kept on
	// disk, so there is no second record that could disagree with it.
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(objectsBucket); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(stateBucket); err != nil {
			return err
		}
		key, err := fileKey(tx)
		if err != nil {
			return err
		}
		s.key, s.identity = key, edgeproto.StoreIdentity(key)
		if err := s.workers.load(tx); err != nil {
			return err
		}
		b, err := tx.CreateBucketIfNotExists(outboxBucket)
		if err != nil {
			return err
		}
		names, err := tx.CreateBucketIfNotExists(outboxWorkersBucket)
		if err != nil {
			return err
		}
		return b.ForEach(func(k, v []byte) error {
			s.outboxCount++
			s.outboxBytes += int64(len(v))
			if name := names.Get(k); name != nil {
				h := s.heldBy[string(name)]
				s.heldBy[string(name)] = held{count: h.count + 1, bytes: h.bytes + int64(len(v))}
			}
			return nil
		})
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("initializing store %s: %w", path, err), db.Close())
	}
	return s, nil
}

// fileKey reads the file's key, creating it in a file that has none: a new
// file, or one made before stores had keys.
func fileKey(tx *bolt.Tx) (string, error) {
	meta, err := tx.CreateBucketIfNotExists(metaBucket)
	if err != nil {
		return "", err
	}
	if key := meta.Get(storeKey); len(key) > 0 {
		return string(key), nil
	}
	key := edgeproto.NewStoreKey()
	if err := meta.Put(storeKey, []byte(key)); err != nil {
		return "", err
	}
	return key, nil
}

// Identity is the store file's identity, edgeproto.StoreIdentity of its key:
// a wiped or replaced store has a new one. The report IDs of AppendReport
// are unique per identity.
func (s *Store) Identity() string {
	return s.identity
}

// Key is the store file's key, which proves to the GlobalManager that a
// connection speaks for the store (edgeproto.Hello.StoreKey).
func (s *Store) Key() string {
	return s.key
}

// Close closes the store file, releasing its lock.
func (s *Store) Close() error {
	return s.db.Close()
}
