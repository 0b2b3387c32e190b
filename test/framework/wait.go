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
