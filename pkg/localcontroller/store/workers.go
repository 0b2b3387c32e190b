package store

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// workerIndex is, in memory, which worker names the stored objects give
// each address, and which of their workers have no address yet: what the
// worker API checks a caller against before it reads a byte of its body,
// and a connection against before it serves it; and which objects name each
// worker, which is whom its reports are for. It follows the objects bucket,
// counting (a pod may be named by more than one object).
type workerIndex struct {
	mu      sync.Mutex
	byAddr  map[netip.Addr]map[string]int
	pending map[string]int // workers without an address, by name
	// owners are the objects naming each worker that is not done.
	owners map[string]map[Key]struct{}
	// changed is closed, and replaced, at every change: what a caller
	// waiting for its worker's address waits on.
	changed chan struct{}
}

func newWorkerIndex() *workerIndex {
	return &workerIndex{byAddr: make(map[netip.Addr]map[string]int), pending: make(map[string]int),
		owners: make(map[string]map[Key]struct{}), changed: make(chan struct{})}
}

// keyedWorkers are an object's workers on this node.
type keyedWorkers struct {
	key     Key
	workers []edgeproto.Worker
}

// load indexes every stored object's workers; tx is Open's.
func (x *workerIndex) load(tx *bolt.Tx) error {
	var all []keyedWorkers
	err := tx.Bucket(objectsBucket).ForEach(func(k, v []byte) error {
		key, err := decodeKey(k)
		if err != nil {
			return err
		}
		o, err := decodeObject(key, v, false)
		if err != nil {
			return err
		}
		all = append(all, keyedWorkers{key, o.Workers})
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing the workers' addresses: %w", err)
	}
	x.update(nil, all)
	return nil
}

// update takes out the workers of gone and puts in those of added.
func (x *workerIndex) update(gone, added []keyedWorkers) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ws := range gone {
		for _, w := range ws.workers {
			x.add(ws.key, w, -1)
		}
	}
	for _, ws := range added {
		for _, w := range ws.workers {
			x.add(ws.key, w, 1)
		}
	}
	close(x.changed)
	x.changed = make(chan struct{})
}

// add counts w's addresses (or its lack of one) by n, and key as its
// owner; x.mu is held. A worker done counts nowhere: it is no caller's, and
// not awaited.
func (x *workerIndex) add(key Key, w edgeproto.Worker, n int) {
	if w.Done {
		return
	}
	keys := x.owners[w.Name]
	switch {
	case n > 0 && keys == nil:
		x.owners[w.Name] = map[Key]struct{}{key: {}}
	case n > 0:
		keys[key] = struct{}{}
	default:
		// An object names a worker once, so taking its key out is right
		// even where another count of the name stays.
		delete(keys, key)
		if len(keys) == 0 {
			delete(x.owners, w.Name)
		}
	}
	if len(w.IPs) == 0 {
		countName(x.pending, w.Name, n)
		return
	}
	for _, ip := range w.IPs {
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			continue // not stored: edgeproto checks what the GlobalManager sends
		}
		names := x.byAddr[addr]
		if names == nil {
			names = make(map[string]int)
			x.byAddr[addr] = names
		}
		countName(names, w.Name, n)
		if len(names) == 0 {
			delete(x.byAddr, addr)
		}
	}
}

func countName(m map[string]int, name string, n int) {
	if m[name] += n; m[name] <= 0 {
		delete(m, name)
	}
}

// names is how many distinct workers the stored objects name that are not
// done.
func (x *workerIndex) names() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	seen := make(map[string]bool, len(x.pending))
	for name := range x.pending {
		seen[name] = true
	}
	for _, names := range x.byAddr {
		for name := range names {
			seen[name] = true
		}
	}
	return len(seen)
}

// WorkerOwners returns the keys of the stored objects that name worker as
// one of their pods on this node, not done, in no order: whom a report of
// that worker can be for.
func (s *Store) WorkerOwners(worker string) []Key {
	x := s.workers
	x.mu.Lock()
	defer x.mu.Unlock()
	keys := make([]Key, 0, len(x.owners[worker]))
	for k := range x.owners[worker] {
		keys = append(keys, k)
	}
	return keys
}

// AddressAdmission says what the stored objects say of callers from addr:
// whether addr is some worker's, and whether some worker has no address yet
// (a pod starting, whose address the GlobalManager has not sent: a caller
// from an unknown address may be it).
func (s *Store) AddressAdmission(addr netip.Addr) (known, awaiting bool) {
	x := s.workers
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.byAddr[addr.Unmap()]) > 0, len(x.pending) > 0
}

// WaitWorkerAt reports whether worker is a worker of some stored object at
// addr. While worker is a stored worker without an address, it waits, until
// ctx ends, for the GlobalManager to send one.
func (s *Store) WaitWorkerAt(ctx context.Context, worker string, addr netip.Addr) bool {
	x := s.workers
	addr = addr.Unmap()
	for {
		x.mu.Lock()
		at, awaiting, changed := x.byAddr[addr][worker] > 0, x.pending[worker] > 0, x.changed
		x.mu.Unlock()
		if at || !awaiting {
			return at
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}
