// Package reports is the edge hub's report pipeline: the reports a
// LocalController sends on one connection, on their way to the appliers
// (ReportApplier, DatasetApplier: each kind's controller writes them into
// status), and their acknowledgements on the way back.
//
// # What it guarantees
//
// A connection's reports go through one lane per object (Pipeline): a
// lane's reports are handed over in the order received, all that waited
// during the lane's last call in its next (one status write for a node's
// burst about one object), and the lanes of up to 16 objects run at once,
// so that no report waits for another object's write. A lane's call waits
// Config.Window for more of the node's reports, then for one of the Turns
// shared by every connection (a node holds at most 2 of them), and takes its
// reports only then: while the API server is slower than the reports, they
// gather in their lanes and each lane's go in one status write.
//
// A report whose ID cannot be real (past the Hello's last ID plus the
// reports read on the connection) is refused for good; every other is
// checked by Config.Check (the hub's check of what the node runs). Reports
// applied, and reports refused for good, are answered: refused by the
// applier (Refuse), or failing with an error no retry can mend
// (common.IsPermanent; a group whose shared write is refused is applied
// again one by one, to refuse only the one at fault), so that such a report
// never holds up the node's later ones. Any other error is tried again
// twice (RetryWaits), then Config.GiveUp ends the connection: the
// LocalController resends that report, and the ones after it, in order.
//
// At most 1,024 reports, and 16 MiB of their bodies, are read and not yet
// acknowledged on a connection; the reader waits past either. Acks splits
// the answers into ReportAcks that each fit a frame.
package reports
