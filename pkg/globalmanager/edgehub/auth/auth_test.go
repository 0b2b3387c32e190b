package auth

import (
	"testing"
	"time"
)

// Connections told to come back are given turns spread over the time the
// reviews take to serve them, never past BackoffMax.
func TestRetryAfterSpreadsTheRefusedOverTheReviewsTime(t *testing.T) {
	var p retryPlanner
	now := time.Unix(1000, 0)
	// Before any review: 100ms a review, 64 at a time.
	if got := p.after(now, 0, 64); got != 1 {
		t.Errorf("first turn with nothing waiting = %ds, want 1", got)
	}
	p = retryPlanner{}
	p.reviewed(640 * time.Millisecond) // 64 slots: 100 connections a second
	// 1,024 wait: the first refused comes back after them, ~10.25s.
	if got := p.after(now, 1024, 64); got != 11 {
		t.Errorf("turn after 1024 waiting = %ds, want 11", got)
	}
	// The next 1,000 refused at the same moment are spread 10ms apart.
	var last int
	for i := range 1000 {
		got := p.after(now, 1024, 64)
		if got < last {
			t.Fatalf("turn %d = %ds, before the one given earlier (%ds)", i, got, last)
		}
		last = got
	}
	if last != 21 {
		t.Errorf("the 1001st refused's turn = %ds, want 21 (1024 waiting + 1001 turns, 10ms each)", last)
	}
	// Past 30s every turn is BackoffMax.
	for range 2000 {
		last = p.after(now, 1024, 64)
	}
	if last != maxRetryAfter {
		t.Errorf("turn far ahead = %ds, want %d", last, maxRetryAfter)
	}
	// Once the turns given have passed, a refusal starts from the queue again.
	if got := p.after(now.Add(time.Minute), 0, 64); got != 1 {
		t.Errorf("turn with nothing waiting, long after = %ds, want 1", got)
	}
}
