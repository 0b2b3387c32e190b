// Package desired computes what each edge node should hold: its desired
// set of objects, and each object as the node's LocalController stores it.
// It reads only informers' caches; nothing in it needs a connection.
//
// # What it guarantees
//
// Sets.Of(node) is the latest version of every object that concerns node:
// an object with a template pinned to node (spec.nodeName) or placed on it
// (a Dataset); an object with a worker pod bound to node (it counts where it
// was scheduled); an object that names a Dataset on node; and the Models
// those name. Workers are found through the controllers Nereid made
// (common.WorkerChain), never by a label alone: a pod anyone labelled
// brings its object nowhere. With each object of a kind that has workers
// go its pods on the node, sorted by name, with their addresses, a finished
// pod marked done and without addresses (they may be given to another
// pod). What the caches do not hold concerns nothing.
//
// Version tells two versions of an object on a node apart by what the edge
// uses of it: EncodeObject sends an object's spec, its metadata but for what
// only the API server and kubectl use, and, for the kinds whose status a
// LocalController reads, its status but for the cloud's own bookkeeping; its
// digest is of that. A status write of any other kind, or a change of
// managedFields or the last-applied annotation, changes no digest
// (Digests.SameOnEdge), so no node is sent it again, not after a reconnect
// either. Digests are computed once per version (Digests).
//
// Sets.Concerns and Sets.CheckWorker are the cloud's check of a report: its
// object concerns the node, and its worker is a pod of that object bound to
// the node, reporting from one of its addresses, taken before it finished
// (or the LocalController itself, for the kinds whose LocalControllers
// report under their own name). Sets.AffectedNodes and PodNodes are the
// nodes whose sets an event may change.
//
// A new edge kind is a kinds.Kind with an Edge and the methods of the
// interfaces in kinds.go on its type: nothing here switches on kinds.
package desired
