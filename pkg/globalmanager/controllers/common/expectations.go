package common

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// ExpectationsTimeout is how long a controller waits for the watch events of
// its own creates and deletes before it trusts its cache again anyway (a lost
// event must not stall a job forever).
const ExpectationsTimeout = 5 * time.Minute

// Expectations remember, per owner key, the child creations, deletions and
// marks (an annotation written on a pod) a controller has asked for and not
// yet seen in its cache. A sync acts only when they are satisfied, so a stale
// cache never makes it create or delete twice, nor decide again what a mark
// it wrote has decided. Record before acting; observe on the watch event, or
// when the request failed.
type Expectations struct {
	mu    sync.Mutex
	clock clock.PassiveClock // times ExpectationsTimeout
	byKey map[string]*expectation
}

type expectation struct {
	adds      int
	deletes   sets.Set[types.UID]
	marks     map[types.UID]mark
	timestamp time.Time
}

// mark is an annotation a controller wrote on a pod, to be seen in its cache.
type mark struct{ name, value string }

// NewExpectations returns empty expectations.
func NewExpectations() *Expectations {
	return &Expectations{clock: clock.RealClock{}, byKey: map[string]*expectation{}}
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
	if exp.adds <= 0 && exp.deletes.Len() == 0 && len(exp.marks) == 0 {
		return true
	}
	return e.clock.Now().Sub(exp.timestamp) > ExpectationsTimeout
}

// ExpectCreations records that n children of key are about to be created.
func (e *Expectations) ExpectCreations(key string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp := e.get(key)
	exp.adds += n
	exp.timestamp = e.clock.Now()
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
	exp.timestamp = e.clock.Now()
}

// DeletionObserved records that the child with this UID was seen gone (or
// terminating), or that its deletion failed.
func (e *Expectations) DeletionObserved(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok {
		exp.deletes.Delete(uid)
		delete(exp.marks, uid)
	}
}

// ExpectMark records that annotation name=value is about to be written on
// the child pod with this UID.
func (e *Expectations) ExpectMark(key string, uid types.UID, name, value string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp := e.get(key)
	exp.marks[uid] = mark{name, value}
	exp.timestamp = e.clock.Now()
}

// MarkObserved records the mark expected on pod as seen when the pod carries
// it. A failed write observes it with MarkFailed.
func (e *Expectations) MarkObserved(key string, pod *corev1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok {
		if m, ok := exp.marks[pod.UID]; ok && pod.Annotations[m.name] == m.value {
			delete(exp.marks, pod.UID)
		}
	}
}

// MarkFailed drops the mark expected on the pod with this UID: its write
// failed.
func (e *Expectations) MarkFailed(key string, uid types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if exp, ok := e.byKey[key]; ok {
		delete(exp.marks, uid)
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
		exp = &expectation{deletes: sets.New[types.UID](), marks: map[types.UID]mark{}}
		e.byKey[key] = exp
	}
	return exp
}
