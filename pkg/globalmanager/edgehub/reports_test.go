package edgehub

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// A thousand refusals with the longest reasons, of bytes JSON escapes, go
// in several ReportAcks that each fit a frame, all of them acknowledged, in
// order: one ack of them all would not fit, its send would end the
// connection, and the node would send the same reports again, for ever.
func TestReportAcksFitAFrame(t *testing.T) {
	var results []reportResult
	for id := range uint64(reportQueue) {
		results = append(results, reportResult{id: id + 1, refused: id%3 != 0, reason: clipRefusal(strings.Repeat("<\x01", 1000))})
	}
	acks := reportAcks(results)
	if len(acks) < 2 {
		t.Fatalf("%d acks, want the refusals split", len(acks))
	}
	var next uint64 = 1
	for i, ack := range acks {
		if _, err := edgeproto.Encode(ack); err != nil {
			t.Errorf("ack %d of %d ids: %v", i, len(ack.IDs), err)
		}
		for _, id := range ack.IDs {
			if id != next {
				t.Fatalf("ack %d has id %d, want %d", i, id, next)
			}
			next++
		}
	}
	if next != reportQueue+1 {
		t.Errorf("acknowledged %d reports, want %d", next-1, reportQueue)
	}
	if acks := reportAcks(results[:3]); len(acks) != 1 || len(acks[0].IDs) != 3 || len(acks[0].Refused) != 2 {
		t.Errorf("three results: %+v, want one ack of 3 ids, 2 refused", acks)
	}
}

// A session's reports awaiting their acks hold at most a budget of bytes,
// and at most a number of reports: the reader waits for acks past either,
// except for a report alone past the bytes, and stops waiting when the
// session ends.
func TestReportsHeldAreBounded(t *testing.T) {
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
	cancel()
	select {
	case ok := <-last:
		if ok {
			t.Error("a report's bytes taken after the session ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a reader still waits 5s after its session ended")
	}
}

// waitsForRelease checks that a report of n bytes waits while h is full,
// and is taken once a report of n bytes held is released.
func waitsForRelease(t *testing.T, h *heldReports, n int64, what string) {
	t.Helper()
	taken := make(chan bool, 1)
	go func() { taken <- h.acquire(n) }()
	select {
	case <-taken:
		t.Fatalf("%s taken", what)
	case <-time.After(100 * time.Millisecond):
	}
	h.release(n)
	if ok := <-taken; !ok {
		t.Fatalf("%s not taken once one held was acknowledged", what)
	}
}
