package reports

import (
	"strings"
	"testing"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// A thousand refusals with the longest reasons, of bytes JSON escapes, go
// in several ReportAcks that each fit a frame, all of them acknowledged, in
// order: one ack of them all would not fit, its send would end the
// connection, and the node would send the same reports again, for ever.
func TestReportAcksFitAFrame(t *testing.T) {
	var results []Result
	for id := range uint64(reportQueue) {
		results = append(results, Result{ID: id + 1, Refused: id%3 != 0, Reason: ClipRefusal(strings.Repeat("<\x01", 1000))})
	}
	acks := Acks(results)
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
	if acks := Acks(results[:3]); len(acks) != 1 || len(acks[0].IDs) != 3 || len(acks[0].Refused) != 2 {
		t.Errorf("three results: %+v, want one ack of 3 ids, 2 refused", acks)
	}
}
