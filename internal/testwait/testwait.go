// Package testwait is the tree's one way for a test to wait for a fact: unit
// tests and integration tests alike poll a condition until it holds or a
// timeout passes, and fail naming what they waited for.
package testwait

import (
	"context"
	"testing"
	"time"
)

// maxInterval bounds the wait between two checks. The first checks come
// quickly, for the unit tests whose facts hold within milliseconds; later
// ones no more often than ten a second, for the integration tests whose
// checks are requests to the API server.
const maxInterval = 100 * time.Millisecond

// Eventually checks cond until it holds, failing the test with what when
// timeout passes first or cond returns an error. cond's context ends at the
// timeout or with the test. The wait between checks doubles from a
// millisecond to maxInterval.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	interval := time.Millisecond
	for {
		ok, err := cond(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			t.Fatalf("waited %s for %s: %v", timeout, what, err)
			return
		case err != nil:
			t.Fatalf("waiting for %s: %v", what, err)
			return
		case ok:
			return
		}
		timer := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			t.Fatalf("waited %s for %s", timeout, what)
			return
		case <-timer.C:
		}
		interval = min(2*interval, maxInterval)
	}
}
