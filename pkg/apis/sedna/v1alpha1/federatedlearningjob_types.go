package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=fl,categories=sedna;nereid
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Round",type=integer,JSONPath=`.status.round`,description="The round the job is in: the highest round an edge node's workers reported"
// +kubebuilder:printcolumn:name="Slowest",type=integer,JSONPath=`.status.slowestRound`,description="The lowest round an edge node's workers last reported: below ROUND while a node lags or its reports are held up"
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.active`,description="Pods not finished, pending ones included, as Sedna and a Kubernetes Job count them; SCHEDULED says whether they are placed"
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeeded`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Admission",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].reason`
// +kubebuilder:printcolumn:name="References",type=string,JSONPath=`.status.conditions[?(@.type=="ReferencesResolved")].reason`,description="MissingReference while a Model or Dataset it names does not exist: the job is blocked, not waiting; Resolved once all do"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].reason`,description="Whether its pods are placed: Unschedulable (a pod cannot be placed: its node and why are in the condition) and WaitingForGang wait on a node or a person; GangScheduled, GangSchedulingOff, NoGangScheduler or Placed once they are"
// +kubebuilder:printcolumn:name="Edge",type=string,JSONPath=`.status.conditions[?(@.type=="EdgeLinked")].reason`,description="Why a node it needs has no LocalController connected (NoSuchNode, NoLocalController, LinkDown); empty while all have"
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,description="Whether the object is suspended (spec.suspend): its pods stopped, its status kept"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Slowest-Node",type=string,JSONPath=`.status.slowestNode`,priority=1
// +kubebuilder:printcolumn:name="Fastest-Node",type=string,JSONPath=`.status.fastestNode`,priority=1

// FederatedLearningJob trains one model from data that stays on the edge: a
// training worker per edge dataset and one aggregation worker in the cloud.
type FederatedLearningJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FederatedLearningJobSpec `json:"spec"`
	// +optional
	Status FederatedLearningJobStatus `json:"status,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="managedBy cannot be changed once the object exists",fieldPath=".managedBy"

// FederatedLearningJobSpec describes the job's workers.
type FederatedLearningJobSpec struct {
	// Nereid's own: suspend, managedBy, activeDeadlineSeconds, ttlSecondsAfterFinished.
	JobLifecycle      `json:",inline"`
	AggregationWorker AggregationWorker `json:"aggregationWorker"`
	// One training worker per dataset.
	// +kubebuilder:validation:MinItems=1
	TrainingWorkers []TrainingWorker `json:"trainingWorkers"`
	// A model to start from.
	// +optional
	PretrainedModel *ModelRef `json:"pretrainedModel,omitempty"`
	// How the workers exchange model updates; ws when unset.
	// +optional
	Transmitter *Transmitter `json:"transmitter,omitempty"`
	// Which worker pods are deleted when the job finishes: Running (default)
	// deletes those still running, All deletes every pod, None keeps them.
	// A Nereid addition, as in DI-orchestrator.
	// +optional
	CleanPodPolicy CleanPodPolicy `json:"cleanPodPolicy,omitempty"`
}

// CleanPodPolicy says which pods a finished job deletes.
// +kubebuilder:validation:Enum=Running;All;None
type CleanPodPolicy string

// The clean pod policies.
const (
	CleanPodPolicyRunning CleanPodPolicy = "Running"
	CleanPodPolicyAll     CleanPodPolicy = "All"
	CleanPodPolicyNone    CleanPodPolicy = "None"
)

// AggregationWorker merges the training workers' updates.
type AggregationWorker struct {
	// The model being trained.
	Model ModelRef `json:"model"`
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="a worker template needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
}

// TrainingWorker trains on one dataset.
type TrainingWorker struct {
	// The dataset trained on.
	Dataset DatasetRef `json:"dataset"`
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="a worker template needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
}

// Transmitter is how the workers exchange model updates: one of s3 or ws.
// +kubebuilder:validation:XValidation:rule="!(has(self.s3) && has(self.ws))",message="set only one of s3 and ws"
type Transmitter struct {
	// +optional
	S3 *S3Transmitter `json:"s3,omitempty"`
	// +optional
	WS *WSTransmitter `json:"ws,omitempty"`
}

// S3Transmitter exchanges updates through an S3 path.
type S3Transmitter struct {
	// The S3 path the workers exchange their updates through.
	// +kubebuilder:validation:MinLength=1
	AggDataPath string `json:"aggDataPath"`
	// The Secret, in the job's namespace, with the S3 credentials.
	// +optional
	CredentialName string `json:"credentialName,omitempty"`
}

// WSTransmitter exchanges updates over websockets to the aggregator.
type WSTransmitter struct{}

// FLJobPhase is where a federated learning job stands.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type FLJobPhase string

// The phases of a federated learning job.
const (
	FLJobPending   FLJobPhase = "Pending"
	FLJobRunning   FLJobPhase = "Running"
	FLJobSucceeded FLJobPhase = "Succeeded"
	FLJobFailed    FLJobPhase = "Failed"
)

// FederatedLearningJobStatus is the observed state of the job.
type FederatedLearningJobStatus struct {
	// Conditions, one per type.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []JobCondition `json:"conditions,omitempty"`
	// When the controller first acted on the job.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// When the job finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Worker pods running.
	// +optional
	Active int32 `json:"active"`
	// Worker pods succeeded.
	// +optional
	Succeeded int32 `json:"succeeded"`
	// Worker pods failed.
	// +optional
	Failed int32 `json:"failed"`
	// Phase of the job.
	// +optional
	Phase FLJobPhase `json:"phase,omitempty"`
	// What the cloud last heard from each edge node with a worker here.
	// +optional
	// +listType=map
	// +listMapKey=name
	EdgeNodes []EdgeNodeStatus `json:"edgeNodes,omitempty"`
	// The round the job is in: the highest round among the edge nodes'
	// (edgeNodes[].round), that is the fastest node's; 0 until a worker
	// reports one. Nereid's own, as the three fields below, written with
	// the reports that move them.
	// +optional
	Round int32 `json:"round,omitempty"`
	// The lowest round among the edge nodes', the slowest node's: below
	// round while a node lags, or while its LocalController holds its
	// reports (a link down).
	// +optional
	SlowestRound int32 `json:"slowestRound,omitempty"`
	// The node with slowestRound (the first by name of those with it).
	// +optional
	SlowestNode string `json:"slowestNode,omitempty"`
	// The node with round (the first by name of those with it).
	// +optional
	FastestNode string `json:"fastestNode,omitempty"`
	// The metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FederatedLearningJobList is a list of FederatedLearningJobs.
type FederatedLearningJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FederatedLearningJob `json:"items"`
}
