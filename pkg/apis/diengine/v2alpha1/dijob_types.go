package v2alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=dijob,categories=nereid
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="ReadyReplicas",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Tasks-Ready",type=string,JSONPath=`.status.tasksReady`,description="Each task's ready replicas of those it asks for"
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`
// +kubebuilder:printcolumn:name="Reschedules",type=integer,JSONPath=`.status.reschedules`
// +kubebuilder:printcolumn:name="Admission",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].reason`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,description="Why the job is in its phase: TooManyReplicas waits for a person, InsufficientResources and WaitingForQuota for room"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].reason`,description="Whether its pods are placed: Unschedulable waits for a person (the condition names the pod, its node and why), WaitingForGang for its gang to fit; GangScheduled, GangSchedulingOff or NoGangScheduler once nothing waits on placement"
// +kubebuilder:printcolumn:name="Edge",type=string,JSONPath=`.status.conditions[?(@.type=="EdgeLinked")].reason`,description="LinkDown while an edge node its pods are on has lost its link to the cloud (the condition names the nodes and since when); Linked once they are back; empty while it never missed one"
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,description="Whether the job is suspended (spec.suspend): its pods stopped, its status kept"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DIJob is a distributed reinforcement-learning job of DI-engine: tasks
// (learners, collectors, evaluators, others), each a set of pod replicas that
// find one another by DNS.
type DIJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec DIJobSpec `json:"spec"`
	// +optional
	Status DIJobStatus `json:"status,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="managedBy cannot be changed once the object exists",fieldPath=".managedBy"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.tasks.size() == 1",message="spec.replicas (the scale subresource) is for a job of one task; scale a task of this job by its spec.tasks[i].replicas",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:rule="self.tasks.map(t, has(t.replicas) ? t.replicas : 1).sum() <= 1024",message="a job runs at most 1024 replicas, every task's together",fieldPath=".tasks"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !has(oldSelf.replicas) || self.replicas != oldSelf.replicas || self.tasks.size() != 1 || oldSelf.tasks.size() != 1 || (has(self.tasks[0].replicas) ? self.tasks[0].replicas : 0) == (has(oldSelf.tasks[0].replicas) ? oldSelf.tasks[0].replicas : 0)",message="spec.replicas (set by kubectl scale) decides the replicas of this one-task job, so a change of spec.tasks[0].replicas would do nothing: scale with kubectl scale, or remove spec.replicas in the same edit",fieldPath=".tasks"

// DIJobSpec is what a DIJob runs. Its rules are in CEL, above, out of this
// comment, which gofmt reformats. The bounds on replicas are MaxTaskReplicas
// and MaxJobReplicas: every pod carries the DNS name of every replica
// (DI_NODES), so a pod grows, and a job's pods grow as the square, with the
// job's replicas.
type DIJobSpec struct {
	// Nereid's own: suspend, managedBy, activeDeadlineSeconds, ttlSecondsAfterFinished.
	JobLifecycle `json:",inline"`
	// Reserved by DI-engine's manifests; kept as written.
	// +optional
	Group string `json:"group,omitempty"`
	// The job's priority.
	// +kubebuilder:default=normal
	// +optional
	Priority Priority `json:"priority,omitempty"`
	// What happens to the job's pods when it finishes: Running deletes those
	// still running, All deletes every one, None keeps them.
	// +kubebuilder:default=Running
	// +optional
	CleanPodPolicy CleanPodPolicy `json:"cleanPodPolicy,omitempty"`
	// Whether the allocator may move the job's replicas once placed.
	// +kubebuilder:default=false
	// +optional
	Preemptible bool `json:"preemptible,omitempty"`
	// How many times the job may restart (all its pods recreated) after a
	// pod fails, before it fails.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`
	// For a job of one task, that task's replicas, set by the scale
	// subresource (kubectl scale dijob/<name> --replicas=n); it wins over
	// tasks[0].replicas, and while it is set an edit of tasks[0].replicas
	// alone is refused. A job of several tasks scales each task by its
	// tasks[i].replicas, or through the replicas HTTP API.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Volumes added to every pod of the job.
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// The job's tasks: at most one each of type learner, collector and
	// evaluator, any number of type none; names unique within the job (a
	// task without a name takes its type as its name).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.filter(t, t.type == 'learner').size() <= 1",message="at most one task of type learner"
	// +kubebuilder:validation:XValidation:rule="self.filter(t, t.type == 'collector').size() <= 1",message="at most one task of type collector"
	// +kubebuilder:validation:XValidation:rule="self.filter(t, t.type == 'evaluator').size() <= 1",message="at most one task of type evaluator"
	// +kubebuilder:validation:XValidation:rule="self.all(t, self.filter(u, (has(u.name) && size(u.name) > 0 ? u.name : u.type) == (has(t.name) && size(t.name) > 0 ? t.name : t.type)).size() == 1)",message="task names must be unique within the job (a task without a name takes its type as its name)"
	Tasks []Task `json:"tasks"`
}

// +kubebuilder:validation:XValidation:rule="self.type != 'none' || (has(self.name) && size(self.name) > 0)",message="a task of type none needs a name"

// Task is one kind of worker of a job, with its replicas. The rules on it are
// in CEL, above, out of this comment, which gofmt reformats.
type Task struct {
	// Pod replicas of the task, at most 1024, and at most 1024 in the job.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// The task's role.
	Type TaskType `json:"type"`
	// The task's name, part of its pods' names (<job>-<name>-<rank>); its
	// type when empty.
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`
	// +optional
	Name string `json:"name,omitempty"`
	// The pod template of the task's replicas.
	Template corev1.PodTemplateSpec `json:"template"`
}

// TaskType is a task's role in DI-engine.
// +kubebuilder:validation:Enum=learner;collector;evaluator;none
type TaskType string

// The task types.
const (
	TaskTypeLearner   TaskType = "learner"
	TaskTypeCollector TaskType = "collector"
	TaskTypeEvaluator TaskType = "evaluator"
	TaskTypeNone      TaskType = "none"
)

// Priority is a job's priority.
// +kubebuilder:validation:Enum=normal;high
type Priority string

// The priorities.
const (
	PriorityNormal Priority = "normal"
	PriorityHigh   Priority = "high"
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

// DIJobStatus is what the GlobalManager observed of a DIJob.
type DIJobStatus struct {
	// Where the job is.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Why it is in that phase: the reason of the phase's condition.
	// TooManyReplicas waits for a person to edit the job;
	// InsufficientResources and WaitingForQuota wait for room, the
	// condition's message saying what is missing. Nereid's own:
	// DI-orchestrator's schema has no such field.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Pod replicas the job asks for.
	// +optional
	Replicas int32 `json:"replicas"`
	// Replicas running and ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// Each task's ready replicas (running and ready) of those it asks for,
	// in the spec's order, as "learner 1/1, collector 4/4": readyReplicas
	// per task. Nereid's own, for kubectl get.
	// +optional
	TasksReady string `json:"tasksReady,omitempty"`
	// The label selector of the job's pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// Times the job restarted after a pod failed.
	// +optional
	Restarts int32 `json:"restarts"`
	// Times the allocator moved the job's replicas.
	// +optional
	Reschedules int32 `json:"reschedules"`
	// Per task name, how many of its pods are in each pod phase.
	// +optional
	TaskStatus map[string]TaskStatus `json:"taskStatus,omitempty"`
	// The node of each replica, in the spec's order (tasks, then each
	// task's replicas): rank order unless a scale gave new replicas ranks
	// past the running ones'.
	// +optional
	Allocation []string `json:"allocation,omitempty"`
	// What the job last reported of its own performance
	// (POST .../profilings), bounded in size.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Profilings *runtime.RawExtension `json:"profilings,omitempty"`
	// When the job finished.
	// +optional
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`
	// Conditions, one per type (a phase).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []JobCondition `json:"conditions,omitempty"`
	// The metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Phase is where a DIJob is.
// +kubebuilder:validation:Enum=Pending;Starting;Running;Restarting;Rescheduling;Succeeded;Failed;Unknown
type Phase string

// The phases.
const (
	JobPending      Phase = "Pending"
	JobStarting     Phase = "Starting"
	JobRunning      Phase = "Running"
	JobRestarting   Phase = "Restarting"
	JobRescheduling Phase = "Rescheduling"
	JobSucceeded    Phase = "Succeeded"
	JobFailed       Phase = "Failed"
	JobUnknown      Phase = "Unknown"
)

// TaskStatus counts a task's pods by pod phase.
type TaskStatus map[corev1.PodPhase]int32

// ConditionType is the type of a DIJob's condition: one per phase, as
// DI-orchestrator's; Scheduled, whether its pods are placed (False with
// reason WaitingForGang while its gang waits); and Admitted, whether the
// namespace's ResourceQuotas hold it (False with reason WaitingForQuota
// while it waits; none without quotas); and EdgeLinked, whether the edge
// nodes its pods are on have their link to the cloud (False with reason
// LinkDown naming the nodes and since when; none while it never missed one);
// and, for a v1alpha1 job, ReplicasCreated, whether its pods could be made;
// and Suspended, whether spec.suspend holds its pods stopped (none while it
// never did).
// +kubebuilder:validation:Enum=Pending;Starting;Running;Restarting;Rescheduling;Succeeded;Failed;Unknown;Scheduled;Admitted;EdgeLinked;ReplicasCreated;Suspended
type ConditionType string

const (
	// ConditionScheduled says whether a job's pods are placed.
	ConditionScheduled ConditionType = "Scheduled"
	// ConditionAdmitted says whether the namespace's quotas hold the job.
	ConditionAdmitted ConditionType = "Admitted"
	// ConditionEdgeLinked says whether every edge node the job's pods are
	// on has its link to the cloud, as Sedna's kinds' EdgeLinked does.
	ConditionEdgeLinked ConditionType = "EdgeLinked"
	// ConditionReplicasCreated says whether the pods of a v1alpha1 job
	// could be made (v1alpha1's ReplicasCreated).
	ConditionReplicasCreated ConditionType = "ReplicasCreated"
	// ConditionSuspended says whether spec.suspend holds the job's pods
	// stopped: True (Suspended) while it does, False (Resumed) after.
	ConditionSuspended ConditionType = "Suspended"
)

// JobCondition is one observation of a DIJob; its type is a phase,
// Scheduled, Admitted or EdgeLinked.
type JobCondition struct {
	// The phase this condition is about, Scheduled, Admitted or EdgeLinked.
	Type ConditionType `json:"type"`
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
