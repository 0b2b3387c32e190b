// Package edgeproto is the wire protocol of the cloud–edge channel between the
// GlobalManager's edge hub (cloud) and a LocalController (edge). Both ends use
// it; the websocket transport, TLS and authentication are not part of it.
//
// # Frames
//
// Every websocket message (a text message, since a frame is UTF-8 JSON) carries
// exactly one JSON envelope:
//
//	{"v":1,"type":"upsert","payload":{...}}
//
// v is the protocol Version, type a Type, payload the message's fields. A frame
// is at most MaxFrameBytes, but an Upsert, which carries an object of any size
// the API server stores, is at most MaxObjectFrameBytes: the GlobalManager sets
// SetReadLimit(MaxFrameBytes), the LocalController
// SetReadLimit(MaxObjectFrameBytes), and Decode refuses larger input on its own. Decode's errors tell apart a frame
// that is too large (ErrTooLarge), speaks another version (ErrUnknownVersion),
// names a type this end does not know (ErrUnknownType), or is malformed
// (ErrMalformed); any of them closes that one connection with the error as the
// logged reason (the texts repeat little of the input, but a websocket close
// frame's reason holds only 123 bytes). Encode refuses, with the same errors,
// what Decode would refuse, so a bug shows at the sender instead of as a closed
// connection at the peer.
//
// Within a version, unknown JSON fields are ignored, both in the envelope and in
// payloads: a newer peer may add optional fields without a new version. A field
// whose absence would change the meaning of a message needs a new Version.
//
// # Conversation
//
// Downstream (level-triggered, acknowledged):
//
//  1. The LC's first message on every connection is Hello: the node it claims
//     (the GM checks it against the authenticated identity and closes the
//     connection on a mismatch), the identity of its store, and the
//     inventory of objects it holds. An
//     inventory too long for one frame goes on in Inventory messages right
//     after the Hello, nothing in between: the Hello and every Inventory but
//     the last have More set (EncodeHello splits, HelloStream joins). The GM
//     answers nothing until it has the last part. An Inventory anywhere else,
//     anything else while one is due, or an inventory of more than
//     MaxInventory entries closes the connection with the reason.
//  2. The GM answers with the difference: an Upsert for every object that
//     concerns the node and that the LC lacks or holds at another
//     resourceVersion, a Delete for every inventory entry that no longer
//     concerns the node, then Synced, once the last of them is sent (not
//     acknowledged: the LC applies frames in order, so when it reads Synced
//     it has persisted everything before it). After Synced it streams an
//     Upsert or Delete whenever the latest state of an object that concerns
//     the node changes.
//  3. The LC persists each Upsert or Delete, then acknowledges it in an Ack by
//     its ref and resourceVersion. The GM resends what is not acknowledged; an
//     Ack for an older resourceVersion than the latest sent does not count.
//
// Flow control: the GM keeps a bounded window of Upserts and Deletes sent and
// not yet acknowledged (see the edge hub's Config.SendWindow) and sends more
// as Acks come in, so a difference of any size goes out at the pace the LC
// persists it. Neither end's reader waits on its own writer for long: each
// end reads the other's Acks, ReportAcks and Heartbeats while it sends, so
// the two can never both wait for the other to read.
//
// Upstream (durable):
//
//  4. The LC sends Reports from its on-disk outbox in ID order. The GM applies
//     each idempotently by node, store identity and ID (a wiped or replaced
//     store counts its IDs from 1 again, under a new identity), so that a
//     report resent after a lost ReportAck changes nothing, and a new store's
//     reports are not taken for old ones; it answers ReportAck with the IDs
//     applied or definitively refused; the LC removes exactly those IDs from
//     its outbox. A report whose body is bad, or that no retry could apply,
//     is refused, never answered by closing the connection, so it cannot
//     block the outbox.
//
// Liveness: both ends send Heartbeat periodically and keep a read deadline, so a
// silent peer is noticed even when there is nothing else to say.
//
// # Limits
//
// A frame is at most MaxFrameBytes (1 MiB): an object, a report or an Ack
// larger than that cannot be sent. A Hello states at most MaxInventory
// (200,000) objects, in as many frames as it takes: one frame holds about
// 2,500 entries with the longest names Kubernetes allows (a 253-character
// name in a 63-character namespace) and about ten thousand with short ones.
//
// Inventory is newer than Hello, and Hello.More's absence would change the
// meaning of a Hello, yet neither took a new Version: an LC sets More only
// for an inventory too long for one frame, which it could not send before at
// all, and a GM without Inventory closes the connection at the first one
// (unknown type), so it never keeps a session on a partial inventory (what
// it may send before it reads the Inventory is right; only a Synced would be
// early).
package edgeproto
