// Package allocator decides which node each replica of a DIJob runs on.
//
// When a DIJob is created the GlobalManager places it: every replica gets a
// node, written to status.allocation in rank order (the tasks in the order
// of spec.tasks, each task's replicas from 0), and each pod is created with
// a required node affinity on its node. A job is placed whole or not at all:
// when one replica finds no room, no pod is created and the job says which
// replica, which resource, and the most of it free on the nodes it may use,
// for example:
//
//	replica 2 (collector, rank 1 of the task) needs cpu 500m: the most free on the 3 nodes it may use is 200m (cloud-1)
//
// # Where a replica may go
//
// A replica may use a node that is Ready and not cordoned, that its pod
// template's nodeSelector and required node affinity
// (requiredDuringSchedulingIgnoredDuringExecution) select, and whose
// NoSchedule and NoExecute taints its tolerations all tolerate, all as the
// Kubernetes scheduler decides them. Preferred node affinity, pod affinity
// and anti-affinity, topology spread constraints and PreferNoSchedule
// taints are not considered.
//
// Edge nodes, the nodes labelled node-role.kubernetes.io/edge (with any
// value), are a pool of their own. A replica goes to an edge node only when
// it asks for one: its nodeSelector names that label, or every term of its
// required node affinity requires the label (operator In, Exists, Gt or
// Lt). A replica that does not ask never lands on an edge node, even if
// nothing else keeps it off.
//
// A replica fits on a node when, for every resource its pod requests (cpu,
// memory, ephemeral-storage, extended resources such as nvidia.com/gpu), the
// node's allocatable, less what the pods on it request and what the job's
// replicas already placed there take, is at least the request; and one pod
// more stays within the node's allocatable pods. A node that does not list a
// resource has none of it. Requests are counted as the scheduler counts
// them: the sum of the pod's containers, at least what any init container
// needs, plus overhead. Pods that have finished take nothing; a job's pods
// count on their node from the moment they are created, before the
// scheduler binds them.
//
// # Which node it gets
//
// The learners, evaluators and tasks of type none are placed first, in rank
// order, then the collectors, in rank order.
//
// Learners, evaluators and tasks of type none are packed: each goes to the
// fullest node it fits on, so a job's learners share as few nodes as
// possible and empty nodes stay empty for large jobs. Collectors are
// spread: each goes to the node holding the fewest replicas of its job, then
// to the emptiest, so a job's collectors share nodes as little as they can.
// How full a node is: the mean, over the resources the replica requests, of
// the share of the node's allocatable already taken. Ties go to the node
// whose name sorts first: the same job on the same nodes always gets the
// same placement.
//
// Each replica takes the best node left for it and is not reconsidered, so
// a job whose replicas are large beside the nodes can be refused although
// some other arrangement would have fitted it.
//
// # Moving preemptible jobs
//
// Every --allocator-period the GlobalManager considers again the jobs with
// spec.preemptible set, the high-priority ones first, then the older, then
// by namespace/name. Each in turn is placed afresh, as above, into the room
// the other jobs leave (those considered before it at their new nodes, the
// others where they are), and moves when the new placement is strictly
// better: its learners on fewer nodes; or else its learners, evaluators and
// tasks of type none on fewer nodes; or else all its replicas on fewer
// nodes. An equally good placement never moves a job. A job with a replica
// on a node that is gone, cordoned or not Ready, or that no longer suits the
// replica, moves to any placement that fits, and stays where it is when none
// does. A job that moves has its pods recreated on their new nodes: its
// phase is Rescheduling for that time and status.reschedules counts the
// moves. Jobs that are not preemptible never move.
package allocator
