package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=dijob,categories=nereid
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Coordinator",type=integer,JSONPath=`.status.replicaStatus.Coordinator.active`,priority=1,description="Coordinator pods running"
// +kubebuilder:printcolumn:name="Collectors",type=integer,JSONPath=`.status.replicaStatus.Collector.active`,description="Collector pods running"
// +kubebuilder:printcolumn:name="Learners",type=integer,JSONPath=`.status.replicaStatus.Learner.active`,description="Learner pods running"
// +kubebuilder:printcolumn:name="Aggregators",type=integer,JSONPath=`.status.replicaStatus.Aggregator.active`,priority=1,description="Aggregator pods running"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].reason`,description="Unschedulable while a pod of the job cannot be placed (the condition names the pod, its node and why); Placed once none is refused; empty while none ever was"
// +kubebuilder:printcolumn:name="Edge",type=string,JSONPath=`.status.conditions[?(@.type=="EdgeLinked")].reason`,description="LinkDown while an edge node its pods are on has lost its link to the cloud (the condition names the nodes and since when); Linked once they are back; empty while it never missed one"
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,description="Whether the job is suspended (spec.suspend): its pods stopped, its status kept"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DIJob is a distributed reinforcement-learning job of DI-engine driven by
// its coordinator: the coordinator pod asks, at run time, for the
// collectors and learners it needs, made from this job's templates.
type DIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec DIJobSpec `json:"spec"`
	// +optional
	Status DIJobStatus `json:"status,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="managedBy cannot be changed once the object exists",fieldPath=".managedBy"

// DIJobSpec is what a coordinator-driven DIJob runs.
type DIJobSpec struct {
	// Nereid's own: suspend, managedBy, activeDeadlineSeconds, ttlSecondsAfterFinished.
	JobLifecycle `json:",inline"`
	// A collection of DIJobs this one belongs to; kept as written.
	// +optional
	Group string `json:"group,omitempty"`
	// The job's priority class, as DI-orchestrator names them (default,
	// high); kept as written.
	// +optional
	PriorityClassName PriorityClassName `json:"priorityClassName,omitempty"`
	// What happens to the job's pods when it finishes: Running deletes those
	// still running, All deletes every one (the coordinator is kept for its
	// logs), None keeps them.
	// +kubebuilder:default=Running
	// +optional
	CleanPodPolicy CleanPodPolicy `json:"cleanPodPolicy,omitempty"`
	// Volumes added to every pod of the job.
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// The coordinator: the one pod the job starts with, which asks for the
	// collectors and learners. A job of one process needs only this.
	Coordinator *CoordinatorSpec `json:"coordinator"`
	// The template of the collectors the coordinator asks for.
	// +optional
	Collector *CollectorSpec `json:"collector,omitempty"`
	// The template of the learners the coordinator asks for.
	// +optional
	Learner *LearnerSpec `json:"learner,omitempty"`
}

// PriorityClassName is a DIJob's priority, as DI-orchestrator names them.
type PriorityClassName string

// The priorities DI-orchestrator names.
const (
	NormalPriority PriorityClassName = "default"
	HighPriority   PriorityClassName = "high"
)

// CleanPodPolicy says which pods go when a job finishes.
// +kubebuilder:validation:Enum=Running;All;None
type CleanPodPolicy string

// The clean-pod policies.
const (
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	CleanPodPolicyAll     CleanPodPolicy = "All"
	CleanPodPolicyNone    CleanPodPolicy = "None"
)

// CoordinatorSpec is the coordinator's pod template.
type CoordinatorSpec struct {
	// The coordinator's pod template; it needs at least one container.
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="the coordinator needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
}

// CollectorSpec is the collectors' pod template.
type CollectorSpec struct {
	// The collectors' pod template. When the job is applied only its field
	// names (its own, its spec's and its containers') are checked, and
	// that it has a container with a name; the fields' values are checked
	// when its pods are made: with three pod templates spelled out, the
	// CRD, which holds v2alpha1's too, outgrows what a client-side kubectl
	// apply can write (hack/crdv1templates writes this schema).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Template corev1.PodTemplateSpec `json:"template"`
}

// LearnerSpec is the learners' pod template.
type LearnerSpec struct {
	// The learners' pod template. When the job is applied only its field
	// names (its own, its spec's and its containers') are checked, and
	// that it has a container with a name; the fields' values are checked
	// when its pods are made: with three pod templates spelled out, the
	// CRD, which holds v2alpha1's too, outgrows what a client-side kubectl
	// apply can write (hack/crdv1templates writes this schema).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Template corev1.PodTemplateSpec `json:"template"`
}

// DIJobStatus is what the operator observed of a DIJob.
type DIJobStatus struct {
	// Where the job is: Created when its coordinator exists, Running while
	// it runs, Succeeded or Failed as it ends, Unknown.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Conditions, one per phase, EdgeLinked once an edge link of the job's
	// pods went down, Scheduled once a pod of it could not be placed, and
	// ReplicasCreated once one could not be made.
	// +optional
	Conditions []DIJobCondition `json:"conditions,omitempty"`
	// How many pods of each replica type (Coordinator, Collector, Learner,
	// Aggregator) are active, succeeded and failed.
	// +optional
	ReplicaStatus map[ReplicaType]*ReplicaStatus `json:"replicaStatus,omitempty"`
}

// Phase is where a coordinator-driven DIJob is.
type Phase string

// The phases.
const (
	JobCreated   Phase = "Created"
	JobRunning   Phase = "Running"
	JobSucceeded Phase = "Succeeded"
	JobFailed    Phase = "Failed"
	JobUnknown   Phase = "Unknown"
)

// The condition types that are not phases, v2alpha1's as they are.
const (
	// ConditionEdgeLinked is False while an edge node the job's pods are on
	// has lost its link to the cloud, True once it is back.
	ConditionEdgeLinked Phase = "EdgeLinked"
	// ConditionScheduled is False, reason Unschedulable, while a pod of the
	// job cannot be placed (the message names the pod, its node and why),
	// True (Placed) once none is refused; a job none of whose pods was
	// ever refused a place has none.
	ConditionScheduled Phase = "Scheduled"
	// ConditionReplicasCreated is False, reason FailedCreate, once a pod
	// of the job could not be made (its coordinator's, or a collector or
	// learner the coordinator asked for; the message names the pod, its
	// template and why), True (SuccessfulCreate) once pods are made again;
	// a job none of whose pods ever failed to be made has none.
	ConditionReplicasCreated Phase = "ReplicasCreated"
	// ConditionSuspended is True, reason Suspended, while spec.suspend
	// holds the job's pods stopped, False (Resumed) once it runs again; a
	// job never suspended has none.
	ConditionSuspended Phase = "Suspended"
)

// ReplicaType is the role of a pod of a coordinator-driven DIJob.
type ReplicaType string

// The replica types.
const (
	ReplicaTypeCollector   ReplicaType = "Collector"
	ReplicaTypeLearner     ReplicaType = "Learner"
	ReplicaTypeAggregator  ReplicaType = "Aggregator"
	ReplicaTypeCoordinator ReplicaType = "Coordinator"
)

// ReplicaStatus counts the pods of one replica type.
type ReplicaStatus struct {
	// Pods running.
	// +optional
	Active int32 `json:"active,omitempty"`
	// Pods that reached phase Succeeded.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`
	// Pods that reached phase Failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`
}

// DIJobCondition is one observation of a DIJob; its type is a phase, or
// EdgeLinked.
type DIJobCondition struct {
	// The phase this condition is about, or EdgeLinked.
	Type Phase `json:"type"`
	// True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// One-word reason for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Human-readable detail.
	// +optional
	Message string `json:"message,omitempty"`
	// When the condition was last updated.
	// +optional
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`
	// When the condition last changed status.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DIJobList is a list of DIJobs.
type DIJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DIJob `json:"items"`
}
