// Package edgestatus writes what the edge reports into the status of the
// objects it is about, by one rule for every kind (EdgeReports): a report is
// applied once, coalesced with the others about the same object while a
// write is in flight, written conditionally on the object it was applied to,
// and its events recorded after the write.
//
// It records what the edge reports (RecordEdgeReport), in a bounded share
// of each object's status per edge node, whatever the workers send: one
// sednav1.EdgeNodeStatus per node, with at most 32 metrics (the first by key,
// then one saying how many more there were), metric keys of at most 128 bytes
// and values of at most 256, the worker's name at most 253 and its stage and
// state at most 32 (longer text is cut and ends in "…(truncated)"), and at most
// 3 earlier stores of the node: about 20 KiB of JSON per node at worst, so an
// object stays under etcd's 1.5 MiB request limit with dozens of nodes. The
// bounds are the sednav1.MaxEdgeNodeMetrics family of constants.
package edgestatus
