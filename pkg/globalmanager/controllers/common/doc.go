// Package common is the plumbing every GlobalManager controller shares, written
// once: the work queue loop, expectations, claiming children by controllerRef,
// building worker pods from templates, conditions, events, and metrics. A kind's
// package holds only that kind's decisions.
//
// Every kind's sync has one shape, Syncer's: Begin reads the owner from the
// cache (nothing to do when it is gone or being deleted), copies it, reads
// the expectations before the children and claims them; the kind acts and
// changes the copy's status; End writes the status when it changed, by one
// rule (WriteStatus; nothing while the owner's own creates and deletes are
// in flight and the sync has nothing to say) and records the events after
// the write. What the edge reports reaches status through EdgeReports, by
// one rule too. References resolves the Models and Datasets an object names
// (SetReferencesResolved says what is missing, once), and BaseEnv is the
// environment every Sedna worker gets.
//
// It also records what the edge reports (RecordEdgeReport), in a bounded share
// of each object's status per edge node, whatever the workers send: one
// sednav1.EdgeNodeStatus per node, with at most 32 metrics (the first by key,
// then one saying how many more there were), metric keys of at most 128 bytes
// and values of at most 256, the worker's name at most 253 and its stage and
// state at most 32 (longer text is cut and ends in "…(truncated)"), and at most
// 3 earlier stores of the node: about 20 KiB of JSON per node at worst, so an
// object stays under etcd's 1.5 MiB request limit with dozens of nodes. The
// bounds are the sednav1.MaxEdgeNodeMetrics family of constants.
package common
