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

// A session's reports awaiting their acks hold at most a budget of bytes:
// the reader waits for acks past it, except for a report alone, and stops
// waiting when the session ends.
func TestReportBytesHeldAreBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := newByteBudget(ctx, 16)
	if !b.acquire(10) {
		t.Fatal("10 of 16 bytes refused")
	}
	second := make(chan bool, 1)
	go func() { second <- b.acquire(10) }()
	select {
	case <-second:
		t.Fatal("20 of 16 bytes taken")
	case <-time.After(100 * time.Millisecond):
	}
	b.release(10)
	if ok := <-second; !ok {
		t.Fatal("the second report's bytes not taken once the first's were given back")
	}
	b.release(10)
	if !b.acquire(100) {
		t.Fatal("a report over the budget, alone, waits for ever")
	}
	third := make(chan bool, 1)
	go func() { third <- b.acquire(1) }()
	cancel()
	select {
	case ok := <-third:
		if ok {
			t.Error("a report's bytes taken after the session ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a reader still waits 5s after its session ended")
	}
}
