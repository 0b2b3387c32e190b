// Package window is the downstream window of one edge connection: the
// difference between what a node should hold and what its LocalController
// holds, sent in order as Acks make room, and what is not acknowledged sent
// again. It keeps no connection: it decides what is sent, and a Sender
// sends it, so its rules are tested without a websocket.
//
// The rules:
//
//   - Order: a difference goes out in the order of Config.Compare (the
//     kinds' order, then name), its Upserts before its Deletes, each object
//     at its latest version: the queue is planned afresh at every Sync, and
//     two edits before a send go out as one.
//   - Limit: at most Config.Size Upserts and Deletes are sent and not
//     acknowledged; the rest waits in the queue. What replaces an Upsert or
//     Delete in flight goes at once, as it takes no more room.
//   - Acknowledgement: an Ack settles only the version last sent; the
//     object is then held (or, for a Delete, no longer held). An Ack of
//     another version settles nothing: the newer one is on its way.
//   - Resend: what has waited Config.ResendAfter for its Ack is sent again,
//     at its latest version, once the LocalController has acknowledged
//     something sent after it (it reads and persists in order) or has
//     settled nothing for ResendAfter. Waiting behind a full window on a
//     slow disk is not a loss.
//   - An object the Sender cannot send at a version is not tried again at
//     that version; the next may be sendable.
package window
