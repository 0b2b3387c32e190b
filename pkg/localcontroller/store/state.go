package store

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The state half of the store holds what the LocalController's own managers
// must remember across restarts (the last round a learning cycle prepared, for
// instance), as opaque values under keys the managers choose.

// Outbox takes a report for the GlobalManager and, in the same transaction,
// the state that says it was made: the Store itself, or the cloud link's
// outbox, which also wakes the link. The LocalController's managers append
// through it.
type Outbox interface {
	AppendReportWithState(data []byte, stateKey string, state []byte) (uint64, error)
}

// PutState stores value under key, replacing what was there.
func (s *Store) PutState(key string, value []byte) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(stateBucket).Put([]byte(key), value)
	})
	if err != nil {
		return fmt.Errorf("storing state %s: %w", key, err)
	}
	return nil
}

// GetState returns the value under key, and whether there is one.
func (s *Store) GetState(key string) ([]byte, bool, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(stateBucket).Get([]byte(key)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading state %s: %w", key, err)
	}
	return out, out != nil, nil
}

// DeleteState removes the value under key; a missing key is not an error.
func (s *Store) DeleteState(key string) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(stateBucket).Delete([]byte(key))
	})
	if err != nil {
		return fmt.Errorf("deleting state %s: %w", key, err)
	}
	return nil
}
