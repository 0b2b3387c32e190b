// Package conversion converts DIJobs between diengine.opendilab.org
// v1alpha1 (DI-orchestrator v0.2.x: a coordinator, a collector and a learner
// template) and v2alpha1 (DI-orchestrator v1.x: tasks), which one CRD serves
// and v2alpha1 stores, and serves the conversion as the CRD's webhook.
//
// # The mapping
//
// A v1alpha1 job becomes, in v2alpha1, a job of up to three tasks: the
// coordinator a task of type none named coordinator, the collector a task of
// type collector, the learner one of type learner, each of one replica;
// group, cleanPodPolicy and volumes are the same fields; priority, backoffLimit
// and preemptible take v2alpha1's defaults. Its status is in the v2alpha1
// status, where the operator writes it through the status subresource
// (V1StatusToV2): phase and conditions as the v2 phases (Created as
// Starting, the others by the same name), replicaStatus as taskStatus keyed
// by the lower-case replica type, active shown as Running.
//
// A v2alpha1 job shows in v1alpha1 with its group, cleanPodPolicy and
// volumes, its first task's template as the coordinator's, the template of
// its collector task and of its learner task as the collector's and the
// learner's, and its phase and conditions as the nearest v1 phases
// (Pending, Starting, Restarting and Rescheduling as Created).
//
// # Without loss
//
// What one version cannot hold of the other travels in an annotation that
// the conversion owns, as Kubernetes keeps HPA v2's metrics in an annotation
// of its v1:
//
//   - AnnotationV1, on a v2alpha1 object, marks a v1 job and holds what
//     v2alpha1 has no field for: its priorityClassName. A v1 job is known by
//     it whichever version it is read in (IsV1, IsV1InV1alpha1). (A status
//     written into it by an older Nereid is ignored.)
//   - AnnotationV2, on a v1alpha1 object, holds the v2alpha1 job but for the
//     fields the v1alpha1 object shows (group, cleanPodPolicy, volumes and
//     the templates it shows): the rest of its tasks, their replicas and
//     names, priority, backoffLimit, preemptible, replicas and its status.
//     Every v2 job read in v1alpha1 has it, and so has a v1 job that a v2
//     client changed in a way v1alpha1 cannot show (a status V1StatusToV2
//     does not make, say).
//
// So a v1 job stored as v2alpha1 reads back identical in v1alpha1, and a
// v2 job read in v1alpha1 and written back is unchanged in v2alpha1. Written
// through v1alpha1, a v2 job takes the edits of the fields v1alpha1 shows
// (the learner's and collector's templates win over the coordinator's when
// they are the same task; removing the collector or learner removes that
// task); its status, and a change of a v2 job's priorityClassName, are not
// taken.
package conversion
