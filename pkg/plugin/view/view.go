// Package view reads, with the user's own credentials, what kubectl nereid
// and its dashboard show: the edge fleet (each node's link from its Lease,
// its jobs and workers), every Nereid job with its phase, progress,
// conditions and what it waits for, and a job's rounds per node. Both the
// plugin's tables and the dashboard's JSON are these types: one reading,
// two renderings.
//
// # What is read
//
// Read lists, as the user: the Nodes; the edge links' Leases (label
// nereid.io/edge-node, in every namespace, else in nereid-system, the
// GlobalManager's default --edge-namespace); the pods of Nereid's
// controllers (label nereid.io/owner-uid), which place each job's workers;
// the Datasets; and the objects of every job kind of the GlobalManager's
// table (package kinds), whose Progress gives each job's phase, stage and
// round as the per-job gauges export them. What the user may not list, and
// a kind the API server does not serve, is a Note and the rest is shown;
// any other failure is an error. Nothing is written.
package view

import "time"

// Snapshot is the fleet and the jobs at one moment. Nodes and Jobs are
// sorted (nodes by name; jobs by namespace, kind and name) and never null
// in JSON.
type Snapshot struct {
	Taken time.Time `json:"taken"`
	// Namespace is the namespace whose jobs, workers and Datasets were
	// read, "" for every namespace (-A); the Nodes and Leases are the
	// cluster's whichever it is.
	Namespace string `json:"namespace"`
	Nodes     []Node `json:"nodes"`
	Jobs      []Job  `json:"jobs"`
	// Notes say what could not be read (a kind the API server does not
	// serve, a resource the user may not list), one sentence each.
	Notes []string `json:"notes,omitempty"`
}

// Scope names the namespace a Snapshot read, for people: "namespace
// <name>", or "every namespace" for "".
func Scope(namespace string) string {
	if namespace == "" {
		return "every namespace"
	}
	return "namespace " + namespace
}

// Node is one node as the cloud sees it: every Node the user may list, and
// every node with a link Lease or a job's worker.
type Node struct {
	Name string `json:"name"`
	// Link is "connected" or "disconnected", as the node's link Lease
	// says; without one, "" for a Node not labelled an edge node, else
	// "unknown" (an edge node no LocalController ever connected from, or
	// a node the user may not list).
	Link string `json:"link"`
	// LastHeard is when the hub last heard from the node (the Lease's
	// renew time); nil when never.
	LastHeard *time.Time `json:"lastHeard,omitempty"`
	// Outbox is the Lease's nereid.io/outbox annotation, "" until heard.
	Outbox string `json:"outbox,omitempty"`
	// Ready is the Node's Ready condition status ("" when the user may not
	// list Nodes); Edge whether it is labelled an edge node
	// (node-role.kubernetes.io/edge, the GlobalManager's default
	// --edge-node-selector).
	Ready string `json:"ready"`
	Edge  bool   `json:"edge"`
	// Objects counts the Nereid objects that concern the node (Datasets on
	// it, jobs with workers on it); Workers are the job workers' pods on it
	// that have not finished (namespace/name), Ended counts those that
	// have (Succeeded or Failed).
	Objects int      `json:"objects"`
	Workers []string `json:"workers,omitempty"`
	Ended   int      `json:"ended,omitempty"`
	// Jobs are the jobs with a worker on the node: "<kind>/<namespace>/<name>".
	Jobs []string `json:"jobs,omitempty"`
}

// Job is one Nereid job or service.
type Job struct {
	Kind      string    `json:"kind"` // FederatedLearningJob, DIJob, ...
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Created   time.Time `json:"created"`
	// Phase is status.phase, or a learning cycle's "<stage> <state>", or
	// a joint inference service's Failed, Available or Unavailable (its
	// Failed and Ready conditions).
	Phase string `json:"phase"`
	// Progress is the job's progress in a few words: "round 3 (slowest 2)",
	// "round 2 (deployed 1)", "edge 1/1, cloud 1/1", "learner 1/1,
	// collector 3/4".
	Progress   string      `json:"progress,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	// Waiting says, when an unfinished job waits, what it lacks: the first
	// of its ReferencesResolved (a Model or Dataset it names), Admitted
	// (quota), Scheduled (gang) and EdgeLinked (its edge nodes' links)
	// conditions that is False, as "<reason>: <message>", else why its
	// pods are unscheduled ("pod <name> <reason>: <message>"); "" when it
	// does not wait.
	Waiting string `json:"waiting,omitempty"`
	// Nodes are the nodes its workers are on.
	Nodes []string `json:"nodes,omitempty"`
	// Replicas are a DIJob's pods per task (or v1alpha1 replica type) and
	// node.
	Replicas []Replica `json:"replicas,omitempty"`
	// Stages are a learning cycle's rounds and stages on a time line: a
	// finished round as one entry (Stage "Round", State its result), the
	// current round's stages from status.conditions (see stages.go).
	Stages []Stage `json:"stages,omitempty"`
}

// Condition is one of a job's conditions.
type Condition struct {
	Type    string     `json:"type"`
	Status  string     `json:"status"`
	Reason  string     `json:"reason,omitempty"`
	Message string     `json:"message,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
}

// Replica counts a DIJob's pods of one task on one node.
type Replica struct {
	Task    string `json:"task"`
	Node    string `json:"node"` // "" while unscheduled
	Running int    `json:"running"`
	Pending int    `json:"pending"`
	Ended   int    `json:"ended"`
}

// Stage is one stage of a learning cycle's round, from its start to its
// end (nil while it runs).
type Stage struct {
	Round int32      `json:"round"`
	Stage string     `json:"stage"`
	State string     `json:"state,omitempty"`
	Start time.Time  `json:"start"`
	End   *time.Time `json:"end,omitempty"`
}

// Rounds is a job's rounds per node: what `kubectl nereid rounds` tabulates
// and the dashboard plots.
type Rounds struct {
	Kind      string  `json:"kind"`
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Points    []Point `json:"points"`
	// Metrics are the numeric metrics' names that some point has, sorted.
	Metrics []string `json:"metrics"`
}

// Point is one node's report of one round: for a federated learning job,
// each node's last report in status.edgeNodes; for a learning cycle, each
// round of status.history and the current one (node: the dataset's).
type Point struct {
	Node    string             `json:"node"`
	Round   int32              `json:"round"`
	Stage   string             `json:"stage,omitempty"`
	State   string             `json:"state,omitempty"`
	Time    *time.Time         `json:"time,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Message is why a learning cycle's round failed (its history's
	// message); empty for the others.
	Message string `json:"message,omitempty"`
}
