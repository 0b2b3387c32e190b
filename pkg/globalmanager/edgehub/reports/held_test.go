package reports

import (
	"context"
	"testing"
	"testing/synctest"
)

// A session's reports awaiting their acks hold at most a budget of bytes,
// and at most a number of reports: the reader waits for acks past either,
// except for a report alone past the bytes, and stops waiting when the
// session ends. In a bubble: a reader that waits is seen blocked, and one
// that would wait for ever after its session ended fails the test.
func TestReportsHeldAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		counted := newHeldReports(ctx, 2, 1<<20)
		if !counted.acquire(1) || !counted.acquire(1) {
			t.Fatal("2 of 2 reports refused")
		}
		waitsForRelease(t, counted, 1, "a third of 2 reports")

		b := newHeldReports(ctx, reportQueue, 16)
		if !b.acquire(10) {
			t.Fatal("10 of 16 bytes refused")
		}
		waitsForRelease(t, b, 10, "a second report of 10 bytes with 10 of 16 held")
		b.release(10)
		if !b.acquire(100) {
			t.Fatal("a report over the budget, alone, waits for ever")
		}
		last := make(chan bool, 1)
		go func() { last <- b.acquire(1) }()
		synctest.Wait()
		cancel()
		if <-last {
			t.Error("a report's bytes taken after the session ended")
		}
	})
}

// waitsForRelease checks that a report of n bytes waits while h is full,
// and is taken once a report of n bytes held is released.
func waitsForRelease(t *testing.T, h *heldReports, n int64, what string) {
	t.Helper()
	taken := make(chan bool, 1)
	go func() { taken <- h.acquire(n) }()
	synctest.Wait() // the reader has taken it or waits
	select {
	case <-taken:
		t.Fatalf("%s taken", what)
	default:
	}
	h.release(n)
	if ok := <-taken; !ok {
		t.Fatalf("%s not taken once one held was acknowledged", what)
	}
}
