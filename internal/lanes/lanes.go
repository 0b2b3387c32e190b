// Package lanes hands work to one goroutine per key: what arrives for a key
// while its goroutine is busy waits, and the goroutine takes all that waits
// at once, in the order it arrived. Keys do not wait for each other.
package lanes

import "sync"

// Lanes is the work waiting, by key. The zero value is ready to use.
type Lanes[K comparable, T any] struct {
	mu      sync.Mutex
	waiting map[K][]T // a key is here while its goroutine runs
}

// Add appends items to what waits for key, and says whether key had no
// goroutine: the caller then starts one, which calls Take until Take returns
// nothing. A goroutine that stops before that leaves its key taken: what is
// added for it then waits for good.
func (l *Lanes[K, T]) Add(key K, items ...T) (start bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting == nil {
		l.waiting = make(map[K][]T)
	}
	waiting, running := l.waiting[key]
	l.waiting[key] = append(waiting, items...)
	return !running
}

// Take returns all that waits for key, in the order it was added, and when
// nothing does, forgets key: its goroutine then ends, and the next Add
// starts another.
func (l *Lanes[K, T]) Take(key K) []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	items := l.waiting[key]
	if len(items) == 0 {
		delete(l.waiting, key)
		return nil
	}
	l.waiting[key] = items[:0:0]
	return items
}

// Idle forgets key and returns true when nothing waits for it: its
// goroutine then ends without waiting for anything else, and the next Add
// starts another. While something waits it returns false.
func (l *Lanes[K, T]) Idle(key K) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.waiting[key]) > 0 {
		return false
	}
	delete(l.waiting, key)
	return true
}

// Waiting is how many items wait for key.
func (l *Lanes[K, T]) Waiting(key K) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting[key])
}

// Running is how many keys have a goroutine.
func (l *Lanes[K, T]) Running() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}
