// Package links is the edge nodes' link state, kept in one Lease per node
// in the hub's namespace: the edge hub writes it (Writer), and whoever needs
// to know whether a node is reachable reads it (Reader, LinkDown) — the
// DIJob controller, to move the replicas of a node whose link is down.
//
// # What it guarantees
//
// Every node that has connected has a Lease named LeaseName(node), labelled
// LabelEdgeNode=<node> (shortened with a hash past 63 characters).
// spec.holderIdentity is the node, spec.acquireTime when its current (or
// last) connection was made, and spec.renewTime when the hub last heard from
// it; the annotations say the link (AnnotationLink), the last report ID
// acknowledged (AnnotationLastReportID) and the highest a Hello stated
// (AnnotationStatedReportID) of the store AnnotationReportStore names, the objects waiting for the node's acknowledgement
// (AnnotationUnackedObjects) and its outbox fill (AnnotationOutbox).
//
// A connect or a disconnect is written at once, whatever the rate. Other
// changes are renewals: at most every Config.Period per node and at most
// Config.Rate a second in all, in rounds of a tenth of the period, those
// written longest ago first, so a thousand nodes' renewals never arrive in
// one burst. Each Lease is valid (spec.leaseDurationSeconds) for as long as
// a turn of every connected node's renewal takes, plus Config.Grace: a
// renewTime older than that means the link is down even if the hub could
// not say so (it stopped, for instance), which is what LinkDown reads. A
// failed write is tried again the next round. After a restart the hub keeps
// the last report ID an earlier hub wrote for the same store.
//
// What is recorded through a Conn counts only while it is its node's
// current connection: the end of a connection a newer one replaced does not
// mark the node disconnected.
package links
