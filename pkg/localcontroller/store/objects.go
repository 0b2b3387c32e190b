package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// Key names one sedna.io object the GlobalManager sent.
type Key struct {
	Kind      string
	Namespace string
	Name      string
}

// String returns "kind/namespace/name".
func (k Key) String() string {
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// keySep separates the parts of a key on disk. No Kubernetes kind, namespace
// or name contains it, and because it sorts below every other byte the
// bucket's byte order is the order of (Kind, Namespace, Name).
const keySep = 0

func (k Key) validate() error {
	if k.Kind == "" || k.Name == "" {
		return fmt.Errorf("invalid key %q: kind and name are required", k)
	}
	if strings.ContainsRune(k.Kind+k.Namespace+k.Name, keySep) {
		return fmt.Errorf("invalid key %q: contains a NUL byte", k)
	}
	return nil
}

func (k Key) encode() []byte {
	b := make([]byte, 0, len(k.Kind)+len(k.Namespace)+len(k.Name)+2)
	b = append(b, k.Kind...)
	b = append(b, keySep)
	b = append(b, k.Namespace...)
	b = append(b, keySep)
	return append(b, k.Name...)
}

func decodeKey(b []byte) (Key, error) {
	parts := bytes.SplitN(b, []byte{keySep}, 3)
	if len(parts) != 3 {
		return Key{}, fmt.Errorf("malformed key %q", b)
	}
	return Key{Kind: string(parts[0]), Namespace: string(parts[1]), Name: string(parts[2])}, nil
}

// Object is a stored object: its key, the resourceVersion and digest the
// GlobalManager sent it with, the names of its worker pods on this node, and
// its serialized form.
type Object struct {
	Key             Key
	ResourceVersion string
	// Digest is the GlobalManager's digest of what the edge uses of the
	// object (edgeproto.ObjectVersion.Digest); "" when it sent none.
	Digest string
	// Workers are the object's pods on this node, sorted by name, as the
	// GlobalManager last sent them: the workers whose reports the worker API
	// takes for it, each from its addresses.
	Workers []edgeproto.Worker
	Data    []byte
}

// Version is what the LocalController holds of one object, as it tells the
// GlobalManager on (re)connect so that the GlobalManager sends the difference.
type Version struct {
	Key             Key
	ResourceVersion string
	Digest          string
	Workers         []edgeproto.Worker
}

// The formats of a stored value, its first byte, so the layout can change
// without misreading files written by an earlier version.
const (
	// objectFormatV1: uvarint len(resourceVersion), resourceVersion, data.
	objectFormatV1 byte = 1
	// objectFormatV2: uvarint len(resourceVersion), resourceVersion, uvarint
	// number of workers, each as uvarint len(name), name; then data.
	objectFormatV2 byte = 2
	// objectFormatV3: as V2 with, after the resourceVersion, uvarint
	// len(digest), digest.
	objectFormatV3 byte = 3
	// objectFormatV4: as V3 with, after each worker's name, uvarint number
	// of its addresses, each as uvarint len(ip), ip, then a byte, 1 when the
	// worker is done, else 0. A worker read from an
	// earlier format has no address, so its reports are refused until the
	// GlobalManager sends its addresses (the digest it is stated back with
	// differs, so it does on the next connection).
	objectFormatV4 byte = 4
)

func encodeObject(resourceVersion, digest string, workers []edgeproto.Worker, data []byte) []byte {
	size := 1 + 3*binary.MaxVarintLen64 + len(resourceVersion) + len(digest) + len(data)
	for _, w := range workers {
		size += 2*binary.MaxVarintLen64 + len(w.Name) + 1
		for _, ip := range w.IPs {
			size += binary.MaxVarintLen64 + len(ip)
		}
	}
	b := make([]byte, 0, size)
	b = append(b, objectFormatV4)
	field := func(f string) {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	field(resourceVersion)
	field(digest)
	b = binary.AppendUvarint(b, uint64(len(workers)))
	for _, w := range workers {
		field(w.Name)
		b = binary.AppendUvarint(b, uint64(len(w.IPs)))
		for _, ip := range w.IPs {
			field(ip)
		}
		done := byte(0)
		if w.Done {
			done = 1
		}
		b = append(b, done)
	}
	return append(b, data...)
}

// decodeObject copies what it returns out of v, which bbolt owns only for the
// length of the transaction. With withData false the data is not read.
func decodeObject(k Key, v []byte, withData bool) (Object, error) {
	malformed := fmt.Errorf("object %s: malformed value", k)
	if len(v) == 0 || v[0] < objectFormatV1 || v[0] > objectFormatV4 {
		return Object{}, fmt.Errorf("object %s: unknown format", k)
	}
	format, rest := v[0], v[1:]
	// field reads a length-prefixed string off rest.
	field := func() (string, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || uint64(len(rest)-w) < n {
			return "", false
		}
		f := string(rest[w : w+int(n)])
		rest = rest[w+int(n):]
		return f, true
	}
	rv, ok := field()
	if !ok {
		return Object{}, malformed
	}
	o := Object{Key: k, ResourceVersion: rv}
	// count reads a count off rest; each of its items takes a byte at least.
	count := func() (uint64, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return 0, false
		}
		rest = rest[w:]
		return n, true
	}
	if format >= objectFormatV3 {
		if o.Digest, ok = field(); !ok {
			return Object{}, malformed
		}
	}
	if format >= objectFormatV2 {
		workers, ok := count()
		if !ok {
			return Object{}, malformed
		}
		for range workers {
			var w edgeproto.Worker
			if w.Name, ok = field(); !ok {
				return Object{}, malformed
			}
			if format >= objectFormatV4 {
				ips, ok := count()
				if !ok {
					return Object{}, malformed
				}
				for range ips {
					ip, ok := field()
					if !ok {
						return Object{}, malformed
					}
					w.IPs = append(w.IPs, ip)
				}
				if len(rest) == 0 {
					return Object{}, malformed
				}
				w.Done, rest = rest[0] == 1, rest[1:]
			}
			o.Workers = append(o.Workers, w)
		}
	}
	if withData {
		o.Data = bytes.Clone(rest)
	}
	return o, nil
}

// PutObject stores an object with the resourceVersion it was sent with and
// the names of its worker pods on this node, replacing any previous one. It
// returns only once the write is committed to disk, because the
// LocalController acknowledges to the GlobalManager only what is persisted.
func (s *Store) PutObject(key Key, resourceVersion string, workers []edgeproto.Worker, data []byte) error {
	err := s.ApplyObjects([]ObjectChange{{Key: key, ResourceVersion: resourceVersion, Workers: workers, Data: data}})
	if err != nil {
		return fmt.Errorf("storing object %s: %w", key, err)
	}
	return nil
}

// DeleteObject removes an object, committed to disk before it returns.
// Deleting an absent object is not an error: deletions can be sent again.
func (s *Store) DeleteObject(key Key) error {
	if err := s.ApplyObjects([]ObjectChange{{Key: key, Delete: true}}); err != nil {
		return fmt.Errorf("deleting object %s: %w", key, err)
	}
	return nil
}

// ObjectChange is one write of ApplyObjects: the object under Key stored at
// ResourceVersion and Digest with its Workers and Data, or, with Delete,
// removed.
type ObjectChange struct {
	Key             Key
	Delete          bool
	ResourceVersion string
	Digest          string
	Workers         []edgeproto.Worker // the object's worker pods on this node
	Data            []byte
}

// ApplyObjects makes changes, in order, in one transaction committed to disk
// before it returns: all of them or, on an error, none. One commit (one
// fsync) for a run of objects is what lets a LocalController on a slow disk
// keep up with a bulk sync of tens of thousands of objects.
func (s *Store) ApplyObjects(changes []ObjectChange) error {
	for _, c := range changes {
		if err := c.Key.validate(); err != nil {
			return err
		}
	}
	// The workers index follows what is committed: what each change takes
	// out and puts in, applied once the transaction is.
	var gone, added []keyedWorkers
	err := s.db.Update(func(tx *bolt.Tx) error {
		gone, added = gone[:0], added[:0]
		b := tx.Bucket(objectsBucket)
		for _, c := range changes {
			if old := b.Get(c.Key.encode()); old != nil {
				if o, err := decodeObject(c.Key, old, false); err == nil {
					gone = append(gone, keyedWorkers{c.Key, o.Workers})
				}
			}
			if !c.Delete {
				added = append(added, keyedWorkers{c.Key, c.Workers})
			}
			var err error
			if c.Delete {
				err = b.Delete(c.Key.encode())
			} else {
				err = b.Put(c.Key.encode(), encodeObject(c.ResourceVersion, c.Digest, c.Workers, c.Data))
			}
			if err != nil {
				return fmt.Errorf("object %s: %w", c.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("applying %d object changes: %w", len(changes), err)
	}
	s.workers.update(gone, added)
	return nil
}

// GetObject returns the object stored under key, and whether there is one.
func (s *Store) GetObject(key Key) (Object, bool, error) {
	return s.getObject(key, true)
}

// GetWorkers returns the pods on this node of the object stored under key,
// and whether there is one; unlike GetObject it does not copy the object's
// data.
func (s *Store) GetWorkers(key Key) ([]edgeproto.Worker, bool, error) {
	o, found, err := s.getObject(key, false)
	return o.Workers, found, err
}

func (s *Store) getObject(key Key, withData bool) (Object, bool, error) {
	if err := key.validate(); err != nil {
		return Object{}, false, err
	}
	var (
		o     Object
		found bool
	)
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(objectsBucket).Get(key.encode())
		if v == nil {
			return nil
		}
		found = true
		var err error
		o, err = decodeObject(key, v, withData)
		return err
	})
	if err != nil {
		return Object{}, false, fmt.Errorf("reading object %s: %w", key, err)
	}
	return o, found, nil
}

// ListObjects returns the stored objects of a kind ("" for every kind),
// ordered by key.
func (s *Store) ListObjects(kind string) ([]Object, error) {
	objs, err := s.scan(kind, true)
	if err != nil {
		return nil, fmt.Errorf("listing objects: %w", err)
	}
	return objs, nil
}

// Inventory returns the key and resourceVersion of every stored object,
// ordered by key: what the LocalController states it holds when it
// (re)connects, so the GlobalManager can send what changed, deletions
// included.
func (s *Store) Inventory() ([]Version, error) {
	objs, err := s.scan("", false)
	if err != nil {
		return nil, fmt.Errorf("reading inventory: %w", err)
	}
	vs := make([]Version, 0, len(objs))
	for _, o := range objs {
		vs = append(vs, Version{Key: o.Key, ResourceVersion: o.ResourceVersion, Digest: o.Digest, Workers: o.Workers})
	}
	return vs, nil
}

func (s *Store) scan(kind string, withData bool) ([]Object, error) {
	if strings.ContainsRune(kind, keySep) {
		return nil, errors.New("kind contains a NUL byte")
	}
	var prefix []byte
	if kind != "" {
		prefix = append([]byte(kind), keySep)
	}
	var objs []Object
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(objectsBucket).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			key, err := decodeKey(k)
			if err != nil {
				return err
			}
			o, err := decodeObject(key, v, withData)
			if err != nil {
				return err
			}
			objs = append(objs, o)
		}
		return nil
	})
	return objs, err
}
