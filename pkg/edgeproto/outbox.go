package edgeproto

import (
	"encoding/json"
	"fmt"
	"math"
)

// OutboxRecord returns what a LocalController stores in its outbox for r, a
// report that has no ID yet: r as JSON without its ID, written as Encode
// writes it (no HTML escaping), so the record holds the very bytes the frame
// will carry. Both the worker API and the LocalController's own reporters
// make their records with it.
//
// It first checks that r encodes into a frame under the largest ID an outbox
// can ever give it, and returns Encode's error otherwise (wrapping
// ErrTooLarge when the frame would be over MaxFrameBytes): a report is
// refused before it is accepted, rather than accepted and found unsendable
// later.
func OutboxRecord(r Report) ([]byte, error) {
	r.ID = math.MaxInt64 // the longest ID a report may have
	if _, err := Encode(&r); err != nil {
		return nil, err
	}
	r.ID = 0
	// json.Marshal would write <, > and & in the body as \u003c and so on,
	// six bytes for one: a record could then outgrow its frame.
	record, err := Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding report: %w", err)
	}
	return record, nil
}

// ReportFromOutbox is the report an outbox record made by OutboxRecord
// stands for, with the ID the outbox gave it.
func ReportFromOutbox(id uint64, record []byte) (*Report, error) {
	var r Report
	if err := json.Unmarshal(record, &r); err != nil {
		return nil, fmt.Errorf("decoding stored report %d: %w", id, err)
	}
	r.ID = id
	return &r, nil
}
