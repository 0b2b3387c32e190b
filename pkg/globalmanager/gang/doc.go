// Package gang hands a multi-pod job to the gang scheduling the cluster
// already runs, so that its pods are placed all together or not at all:
// Kubernetes' own (a Workload and a PodGroup of scheduling.k8s.io/v1beta1),
// Volcano's PodGroup, or the scheduler-plugins coscheduling PodGroup; and,
// with any of them, to Kueue's queues. Nereid schedules nothing itself.
//
// A controller asks its Manager for the Plan of a job (the mode from
// --gang-scheduler or the job's annotation, the group's name), then, in
// every sync that acts:
//
//   - Ensure: the group objects exist, are the job's (owner reference, so
//     they go with it) and count the job's pods as they are now (a scale,
//     a respec or a restart changes the count; a stale minimum would hold
//     the new pods forever);
//   - Decorate each pod before it is created: the reference to its group,
//     the scheduler's name, Kueue's labels, and a template's spec.nodeName
//     turned into a required node affinity (a pod created with a node name
//     bypasses the scheduler, so no gang could hold it);
//   - Status: how many pods are placed of how many and what the scheduler
//     says, for the job's Scheduled condition.
//
// Volcano's, coscheduling's and Kueue's objects are written as unstructured
// objects with the fields those projects document; their Go modules are not
// dependencies.
package gang
