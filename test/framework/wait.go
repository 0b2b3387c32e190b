package framework

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every 100ms until it holds, failing the test with what
// when timeout passes first or cond returns an error.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, cond)
	if err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// Consistently checks cond every 100ms for the whole duration, failing the test
// at the first time it does not hold.
func Consistently(t testing.TB, duration time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(duration)
	for time.Now().Before(deadline) {
		ok, err := cond(t.Context())
		if err != nil {
			t.Fatalf("checking %s: %v", what, err)
		}
		if !ok {
			t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
