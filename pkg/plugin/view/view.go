// Package view reads, with the user's own credentials, what kubectl nereid
// and its dashboard show: the edge fleet (each node's link from its Lease,
// its jobs and workers), every Nereid job with its phase, progress,
// conditions and what it waits for, and a job's rounds per node. Both the
// plugin's tables and the dashboard's JSON are these types: one reading,
// two renderings.
package view

import "time"

// Snapshot is the fleet and the jobs at one moment.
type Snapshot struct {
	Taken time.Time `json:"taken"`
	Nodes []Node    `json:"nodes"`
	Jobs  []Job     `json:"jobs"`
	// Notes say what could not be read (a kind the API server does not
	// serve, a resource the user may not list), one sentence each.
	Notes []string `json:"notes,omitempty"`
}

// Node is one edge node as the cloud sees it.
type Node struct {
	Name string `json:"name"`
	// Link is "connected", "disconnected", or "unknown" when the node has
	// no link Lease (no LocalController ever connected).
	Link string `json:"link"`
	// LastHeard is when the hub last heard from the node (the Lease's
	// renew time); nil when never.
	LastHeard *time.Time `json:"lastHeard,omitempty"`
	// Outbox is the Lease's nereid.io/outbox annotation, "" until heard.
	Outbox string `json:"outbox,omitempty"`
	// Ready is the Node's Ready condition status; Edge whether it is
	// labelled an edge node.
	Ready string `json:"ready"`
	Edge  bool   `json:"edge"`
	// Objects counts the Nereid objects that concern the node (Datasets on
	// it, jobs with workers on it); Workers are the job workers' pods on it
	// (namespace/name).
	Objects int      `json:"objects"`
	Workers []string `json:"workers,omitempty"`
	// Jobs are the jobs with a worker on the node: "<kind>/<namespace>/<name>".
	Jobs []string `json:"jobs,omitempty"`
}

// Job is one Nereid job or service.
type Job struct {
	Kind      string    `json:"kind"` // FederatedLearningJob, DIJob, ...
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Created   time.Time `json:"created"`
	// Phase is status.phase, or a learning cycle's "<stage> <state>".
	Phase string `json:"phase"`
	// Progress is the job's progress in a few words: "round 3 (slowest 2)",
	// "edge 1/1, cloud 1/1", "learner 1/1, collector 3/4".
	Progress   string      `json:"progress,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	// Waiting says, when the job waits to be admitted or placed, what it
	// lacks (its Admitted or gang condition's message, or why its pods are
	// unscheduled); "" when it does not wait.
	Waiting string `json:"waiting,omitempty"`
	// Nodes are the nodes its workers are on.
	Nodes []string `json:"nodes,omitempty"`
	// Replicas are a DIJob's pods per task (or v1alpha1 replica type) and
	// node.
	Replicas []Replica `json:"replicas,omitempty"`
	// Stages are a learning cycle's rounds and stages on a time line.
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
}
