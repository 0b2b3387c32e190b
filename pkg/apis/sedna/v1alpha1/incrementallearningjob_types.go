package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=il,categories=sedna;nereid
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.status.stage`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Round",type=integer,JSONPath=`.status.round`
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.active`,description="Pods not finished, pending ones included, as Sedna and a Kubernetes Job count them; SCHEDULED says whether they are placed"
// +kubebuilder:printcolumn:name="Admission",type=string,JSONPath=`.status.jobConditions[?(@.type=="Admitted")].reason`
// +kubebuilder:printcolumn:name="References",type=string,JSONPath=`.status.jobConditions[?(@.type=="ReferencesResolved")].reason`,description="MissingReference while a Model or Dataset it names does not exist: the job is blocked, not waiting; Resolved once all do"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.jobConditions[?(@.type=="Scheduled")].reason`,description="Whether its pods are placed: Unschedulable (a pod cannot be placed: its node and why are in the condition) and WaitingForGang wait on a node or a person; GangScheduled, GangSchedulingOff, NoGangScheduler or Placed once they are"
// +kubebuilder:printcolumn:name="Edge",type=string,JSONPath=`.status.jobConditions[?(@.type=="EdgeLinked")].reason`,description="Why a node it needs has no LocalController connected (NoSuchNode, NoLocalController, LinkDown); empty while all have"
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,description="Whether the object is suspended (spec.suspend): its pods stopped, its status kept"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Deployed",type=integer,JSONPath=`.status.deployedRound`,priority=1,description="The round whose model the inference worker serves; 0 for the initial model"

// IncrementalLearningJob retrains a model as its edge dataset grows: train,
// evaluate, deploy, and again.
type IncrementalLearningJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IncrementalLearningJobSpec `json:"spec"`
	// +optional
	Status IncrementalLearningJobStatus `json:"status,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="managedBy cannot be changed once the object exists",fieldPath=".managedBy"

// IncrementalLearningJobSpec describes the cycle's data, models and stages.
type IncrementalLearningJobSpec struct {
	// Nereid's own: suspend, managedBy, activeDeadlineSeconds, ttlSecondsAfterFinished.
	JobLifecycle `json:",inline"`
	Dataset      CycleDataset `json:"dataset"`
	InitialModel ModelRef     `json:"initialModel"`
	TrainSpec    TrainSpec    `json:"trainSpec"`
	EvalSpec     EvalSpec     `json:"evalSpec"`
	DeploySpec   DeploySpec   `json:"deploySpec"`
	// The Secret holding credentials for outputDir.
	// +optional
	CredentialName string `json:"credentialName,omitempty"`
	// Where each round's data and models are written. It cannot change: the
	// rounds' data and models, and the paths the edge reports, are under it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="outputDir cannot change: the rounds' data and models are under it"
	OutputDir string `json:"outputDir"`
}

// CycleDataset names the dataset a learning cycle trains on and how it is split.
type CycleDataset struct {
	// Name of the Dataset.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Fraction of the new samples used for training, the rest for evaluation.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1
	TrainProb float64 `json:"trainProb"`
}

// TrainSpec is the training stage: its worker and when it starts.
type TrainSpec struct {
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="a worker template needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
	Trigger  Trigger                `json:"trigger"`
}

// EvalSpec is the evaluation stage.
type EvalSpec struct {
	// The model the new one is compared with; the initial model when unset.
	// +optional
	InitialEvalModel *ModelRef `json:"initialEvalModel,omitempty"`
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="a worker template needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
}

// DeploySpec is the deploy stage: which model is updated and when.
type DeploySpec struct {
	Model   DeployModel `json:"model"`
	Trigger Trigger     `json:"trigger"`
	// How the inference worker picks hard examples.
	// +optional
	HardExampleMining *HardExampleMining `json:"hardExampleMining,omitempty"`
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="a worker template needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
}

// DeployModel is the model the deploy stage updates.
type DeployModel struct {
	// Name of the Model the deploy stage updates with the round's model.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Update the running inference worker in place instead of recreating it.
	// +optional
	HotUpdateEnabled bool `json:"hotUpdateEnabled,omitempty"`
	// How often, in seconds, a hot-updating inference worker looks for a new
	// model. Sedna's field, kept (with Sedna's default) so that a job made
	// under Sedna's CRD loses nothing when Nereid's replaces it.
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	// +optional
	PollPeriodSeconds int64 `json:"pollPeriodSeconds,omitempty"`
}

// IncrementalLearningJobStatus is the observed state of the job.
type IncrementalLearningJobStatus struct {
	// The stage transitions of the current round, oldest first; finished
	// rounds are summarised in history.
	// +optional
	Conditions []StageCondition `json:"conditions,omitempty"`
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
	Failed      int32 `json:"failed"`
	CycleStatus `json:",inline"`
	// The metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// IncrementalLearningJobList is a list of IncrementalLearningJobs.
type IncrementalLearningJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IncrementalLearningJob `json:"items"`
}
