package tokenreview

import (
	"crypto/sha256"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/boundedmap"
)

// Cache keeps what a server made of a token's review, V, by the SHA-256 of
// the token, for a TTL. See the package documentation. It is safe for
// concurrent use.
type Cache[V any] struct {
	ttl        time.Duration
	maxEntries int
	clock      clock.PassiveClock

	mu      sync.Mutex
	entries map[[sha256.Size]byte]entry[V]
}

type entry[V any] struct {
	value V
	until time.Time // when the entry goes stale
}

// NewCache returns a cache that keeps each outcome for ttl (nothing when
// ttl is not positive) and at most maxEntries outcomes at a time, by clk
// (the real clock when nil).
func NewCache[V any](ttl time.Duration, maxEntries int, clk clock.PassiveClock) *Cache[V] {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Cache[V]{ttl: ttl, maxEntries: maxEntries, clock: clk, entries: make(map[[sha256.Size]byte]entry[V])}
}

// Get returns the outcome kept for token, if one is and it is fresh.
func (c *Cache[V]) Get(token string) (V, bool) {
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.clock.Now().Before(e.until) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Put keeps v for token for the TTL, or until expires when that is sooner
// and not zero: the token's own expiry, past which an accepted token must
// not be taken from the cache. A full cache first drops what went stale,
// then, if need be, arbitrary entries.
func (c *Cache[V]) Put(token string, v V, expires time.Time) {
	if c.ttl <= 0 {
		return
	}
	now := c.clock.Now()
	until := now.Add(c.ttl)
	if !expires.IsZero() && expires.Before(until) {
		until = expires
	}
	if !now.Before(until) {
		return // stale already
	}
	key := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	boundedmap.MakeRoom(c.entries, c.maxEntries, func(e entry[V]) bool { return !now.Before(e.until) })
	c.entries[key] = entry[V]{value: v, until: until}
}

// DeleteFunc drops the outcomes for which drop returns true: those of an
// identity that no longer holds (a Pod or a ServiceAccount deleted, a node
// that is no longer an edge node).
func (c *Cache[V]) DeleteFunc(drop func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if drop(e.value) {
			delete(c.entries, k)
		}
	}
}

// Clear drops every outcome.
func (c *Cache[V]) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
}

// Len is the number of outcomes kept, stale ones included.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
