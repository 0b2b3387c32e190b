package testwait

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a testing.TB that records a Fatalf and ends the goroutine, as
// a test's Fatalf does.
type recorder struct {
	testing.TB
	ctx    context.Context
	failed string
}

func (r *recorder) Helper()                  {}
func (r *recorder) Context() context.Context { return r.ctx }
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestEventuallyReturnsOnceTheConditionHoldsAndFailsNamingWhat runs
// Eventually on synctest's clock, so each case's time is exact.
func TestEventuallyReturnsOnceTheConditionHoldsAndFailsNamingWhat(t *testing.T) {
	const timeout = 5 * time.Second
	boom := errors.New("boom")
	for name, tc := range map[string]struct {
		holdsAfter time.Duration // <0: never
		err        error
		// The time Eventually takes is within [wantMin, wantMax].
		wantMin, wantMax time.Duration
		wantFailure      []string // what the failure says; nil: none
	}{
		"holds at once": {holdsAfter: 0, wantMin: 0, wantMax: 0},
		"holds later": {holdsAfter: 1500 * time.Millisecond,
			wantMin: 1500 * time.Millisecond, wantMax: 1500*time.Millisecond + maxInterval},
		"never holds": {holdsAfter: -1, wantMin: timeout, wantMax: timeout,
			wantFailure: []string{"the fact", timeout.String()}},
		"errs": {err: boom, wantMin: 0, wantMax: 0, wantFailure: []string{"the fact", "boom"}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &recorder{TB: t, ctx: t.Context()}
				start := time.Now()
				checks := 0
				done := make(chan struct{})
				go func() {
					defer close(done)
					Eventually(r, timeout, "the fact", func(context.Context) (bool, error) {
						checks++
						return tc.holdsAfter >= 0 && time.Since(start) >= tc.holdsAfter, tc.err
					})
				}()
				<-done
				took := time.Since(start)
				if took < tc.wantMin || took > tc.wantMax {
					t.Errorf("Eventually took %s, want within [%s, %s]", took, tc.wantMin, tc.wantMax)
				}
				if checks == 0 {
					t.Error("the condition was never checked")
				}
				switch {
				case tc.wantFailure == nil && r.failed != "":
					t.Errorf("Eventually failed the test: %s", r.failed)
				case tc.wantFailure != nil && r.failed == "":
					t.Error("Eventually did not fail the test")
				}
				for _, want := range tc.wantFailure {
					if !strings.Contains(r.failed, want) {
						t.Errorf("failure %q does not say %q", r.failed, want)
					}
				}
			})
		})
	}
}

// TestEventuallyChecksOftenAtFirst: a fact that holds within milliseconds
// is seen within milliseconds, not after a fixed poll interval.
func TestEventuallyChecksOftenAtFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		Eventually(t, time.Second, "three milliseconds", func(context.Context) (bool, error) {
			return time.Since(start) >= 3*time.Millisecond, nil
		})
		if took := time.Since(start); took > 4*time.Millisecond {
			t.Errorf("took %s to see a fact that held after 3ms", took)
		}
	})
}
