package lanes

import (
	"slices"
	"testing"
)

func TestOneGoroutinePerKeyTakesAllThatWaitInOrder(t *testing.T) {
	var l Lanes[string, int]
	if !l.Add("a", 1) {
		t.Fatal("the first Add of a key does not start its goroutine")
	}
	if l.Add("a", 2, 3) {
		t.Error("an Add while a's goroutine runs starts another")
	}
	if !l.Add("b", 9) {
		t.Error("another key waits for a's goroutine")
	}
	if n := l.Waiting("a"); n != 3 {
		t.Errorf("Waiting(a) = %d, want 3", n)
	}
	if got := l.Take("a"); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("Take(a) = %v, want 1 2 3", got)
	}
	if l.Add("a", 4) {
		t.Error("an Add after a Take that found work starts another goroutine")
	}
	if got := l.Take("a"); !slices.Equal(got, []int{4}) {
		t.Errorf("Take(a) = %v, want 4", got)
	}
	if got := l.Take("a"); got != nil {
		t.Errorf("Take(a) with nothing waiting = %v", got)
	}
	if n := l.Running(); n != 1 {
		t.Errorf("Running() = %d, want 1 (b)", n)
	}
	if !l.Add("a", 5) {
		t.Error("after a's goroutine ended, an Add does not start one")
	}
}

func TestAnIdleKeyEndsItsGoroutineOnlyWhenNothingWaits(t *testing.T) {
	var l Lanes[string, int]
	l.Add("a", 1)
	if l.Idle("a") {
		t.Fatal("Idle(a) with 1 waiting ends a's goroutine")
	}
	l.Take("a")
	if !l.Idle("a") {
		t.Fatal("Idle(a) with nothing waiting keeps a's goroutine")
	}
	if n := l.Running(); n != 0 {
		t.Errorf("Running() = %d after a went idle, want 0", n)
	}
	if !l.Add("a", 2) {
		t.Error("after a went idle, an Add does not start its goroutine")
	}
}
