package reports

import "github.com/nereid-ml/nereid/pkg/edgeproto"

// maxAckBytes bounds the size of one ReportAck (its JSON is a little more):
// a thousand refusals with long reasons would not fit a frame, and a frame
// that cannot be sent would end the connection, and the node would send the
// same reports again, for ever.
const maxAckBytes = edgeproto.MaxFrameBytes / 2

// Acks are the ReportAcks of results, in order, each of at most about
// maxAckBytes.
func Acks(results []Result) []*edgeproto.ReportAck {
	var acks []*edgeproto.ReportAck
	ack, size := &edgeproto.ReportAck{}, 0
	for _, r := range results {
		n := 24 // an id, and its separator
		if r.Refused {
			n += 64 + 6*len(r.Reason) // the id again, the keys, the reason (a byte escaped as \u00XX at worst)
		}
		if len(ack.IDs) > 0 && size+n > maxAckBytes {
			acks = append(acks, ack)
			ack, size = &edgeproto.ReportAck{}, 0
		}
		ack.IDs = append(ack.IDs, r.ID)
		if r.Refused {
			ack.Refused = append(ack.Refused, edgeproto.RefusedReport{ID: r.ID, Reason: r.Reason})
		}
		size += n
	}
	return append(acks, ack)
}
