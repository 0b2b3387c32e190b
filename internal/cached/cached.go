// Package cached reads typed objects out of informer caches.
package cached

import "k8s.io/client-go/tools/cache"

// Get is the object of key in store, if it holds one of type T.
func Get[T any](store cache.Store, key string) (T, bool) {
	var zero T
	o, ok, err := store.GetByKey(key)
	if err != nil || !ok {
		return zero, false
	}
	t, ok := o.(T)
	if !ok {
		return zero, false
	}
	return t, true
}
