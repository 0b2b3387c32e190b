// Package common is the plumbing every GlobalManager controller shares, written
// once: the work queue loop, expectations, claiming children by controllerRef,
// building worker pods from templates (and pinning one to a node: Pin),
// conditions, events, and metrics. A kind's package holds only that kind's
// decisions.
//
// Every kind's sync has one shape, Syncer's: Begin reads the owner from the
// cache (nothing to do when it is gone or being deleted), copies it, reads
// the expectations before the children and claims them; the kind acts and
// changes the copy's status; End writes the status when it changed, by one
// rule (WriteStatus; nothing while the owner's own creates and deletes are
// in flight and the sync has nothing to say) and records the events after
// the write. What the edge reports reaches status through package
// edgestatus, by one rule too. References resolves the Models and Datasets an
// object names (SetReferencesResolved says what is missing, once), and
// BaseEnv is the environment every Sedna worker gets.
package common
