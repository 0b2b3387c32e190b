package common

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// ExpectationsTimeout is how long a controller waits for the watch events of
// its own creates and deletes before it trusts its cache again anyway (a lost
// event must not stall a job forever).
const ExpectationsTimeout = 5 * time.Minute

// Expectations remember, per owner key, the child creations and deletions a
// controller has asked for and not yet seen in its cache. A sync acts only when
// they are satisfied, so a stale cache never makes it create or delete twice.
// Record before acting; observe on the watch event, or when the request failed.
type Expectations struct {
	mu    sync.Mutex
	now   func() time.Time
	byKey map[string]*expectation
}

type expectation struct {
	adds      int
	deletes   sets.Set[types.UID]
	timestamp time.Time
}

// NewExpectations returns empty expectations.
func NewExpectations() *Expectations {
	return &Expectations{now: time.Now, byKey: map[string]*expectation{}}
}

// Satisfied says whether the cache of key's children can be trusted: nothing
// is pending, or what is pending has waited past ExpectationsTimeout.
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.byKey[key]
	if !ok {
		return true
	}
	if exp.adds <= 0 && exp.deletes.Len() == 0 {
		return true
	}
	return e.now().Sub(exp.timestamp) > ExpectationsTimeout
}

// ExpectCreations records that n children of key are about to be created.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp := e.get(key)
	exp.adds += n
	exp.timestamp = e.now()
}

// CreationObserved records that one creation for key was seen, or failed.
func (e *Expectations) CreationObserved(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok && exp.adds > 0 {
		exp.adds--
	}
}

// ExpectDeletions records that the children with these UIDs are about to be deleted.
func (e *Expectations) ExpectDeletions(key string, uids ...types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp := e.get(key)
	exp.deletes.Insert(uids...)
	exp.timestamp = e.now()
}

// DeletionObserved records that the child with this UID was seen gone (or
// terminating), or that its deletion failed.
func (e *Expectations) DeletionObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok {
		exp.deletes.Delete(uid)
	}
}

// Forget drops everything recorded for key, when its owner is gone.
func (e *Expectations) Forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byKey, key)
}

func (e *Expectations) get(key string) *expectation {
	exp, ok := e.byKey[key]
	if !ok {
		exp = &expectation{deletes: sets.New[types.UID]()}
		e.byKey[key] = exp
	}
	return exp
}
