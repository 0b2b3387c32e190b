// Package boundedmap keeps a map, used as a cache, within a number of
// entries.
package boundedmap

// MakeRoom prepares m for one more entry within max: when m is full it drops
// the entries stale says are stale, then, if need be, arbitrary ones, so a
// flood of new keys costs the cache its hits, never its bound. The caller
// holds whatever lock guards m.
func MakeRoom[K comparable, V any](m map[K]V, max int, stale func(V) bool) {
	if len(m) < max {
		return
	}
	for k, v := range m {
		if stale(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) < max {
			return
		}
		delete(m, k)
	}
}
