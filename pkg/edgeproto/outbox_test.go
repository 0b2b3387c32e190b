package edgeproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bodyWithText is a worker body whose results carry text, JSON-quoted.
func bodyWithText(text string) json.RawMessage {
	quoted, _ := json.Marshal(text) // escapes <, > and &, which the body may hold either way
	quoted = []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(quoted)))
	return json.RawMessage(`{"name":"w","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob",` +
		`"kind":"train","status":"completed","results":[{"log":` + string(quoted) + `}]}`)
}

// reportWithFrame returns a report whose frame with ID id is exactly size bytes.
func reportWithFrame(t *testing.T, size int, id uint64) Report {
	t.Helper()
	r := Report{ID: id, Worker: "w", ReceivedAt: t0, Body: bodyWithText("")}
	frame, err := Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	r.Body = bodyWithText(strings.Repeat("x", size-len(frame)))
	r.ID = 0
	return r
}

func TestOutboxRecordIsWhatTheFrameCarries(t *testing.T) {
	escapeHeavy := strings.Repeat(`<a href="x">&amp;</a>`, (256<<10)/21)
	tests := map[string]struct {
		report  Report
		wantErr error
	}{
		"escape-heavy text the size of a large worker body": {
			report: Report{Worker: "w", ReceivedAt: t0, Body: bodyWithText(escapeHeavy)},
		},
		"a frame at the limit with ID 1, over it with a longer ID": {
			report:  reportWithFrame(t, MaxFrameBytes, 1),
			wantErr: ErrTooLarge,
		},
		"a frame at the limit with the longest ID": {
			report: reportWithFrame(t, MaxFrameBytes, math.MaxInt64),
		},
		"a body larger than a frame": {
			report:  Report{Worker: "w", ReceivedAt: t0, Body: bodyWithText(strings.Repeat("é", MaxFrameBytes/2))},
			wantErr: ErrTooLarge,
		},
		"no worker": {
			report:  Report{ReceivedAt: t0, Body: bodyWithText("")},
			wantErr: ErrMalformed,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			record, err := OutboxRecord(tc.report)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("OutboxRecord: %v, want %v", err, tc.wantErr)
				}
				if errors.Is(err, ErrTooLarge) && !strings.Contains(err.Error(), strconv.Itoa(MaxFrameBytes)) {
					t.Errorf("error %q does not name the limit", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("OutboxRecord: %v", err)
			}
			if strings.Contains(string(record), `\u003c`) {
				t.Errorf("the record escapes <: %.200s…", record)
			}
			// Whatever ID the outbox gives it, the record goes up as the
			// report it was made of.
			for _, id := range []uint64{1, math.MaxInt64} {
				r, err := ReportFromOutbox(id, record)
				if err != nil {
					t.Fatalf("ReportFromOutbox: %v", err)
				}
				frame, err := Encode(r)
				if err != nil {
					t.Fatalf("Encode of the stored report with ID %d: %v", id, err)
				}
				got, err := Decode(frame)
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				sent := got.(*Report)
				if !bytes.Equal(compact(tc.report.Body), sent.Body) {
					t.Errorf("body sent with ID %d differs from the body reported", id)
				}
				// A megabyte body compared by cmp takes seconds.
				want := tc.report
				want.ID, want.Body, sent.Body = id, nil, nil
				if diff := cmp.Diff(&want, sent); diff != "" {
					t.Errorf("report sent with ID %d (-want,+got):\n%s", id, diff)
				}
			}
		})
	}
}
