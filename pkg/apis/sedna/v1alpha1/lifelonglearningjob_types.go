package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=ll,categories=sedna;nereid
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.status.stage`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Round",type=integer,JSONPath=`.status.round`
// +kubebuilder:printcolumn:name="Models",type=integer,JSONPath=`.status.knowledgeBase.AIModels.numberOfAIModels`
// +kubebuilder:printcolumn:name="Admission",type=string,JSONPath=`.status.jobConditions[?(@.type=="Admitted")].reason`
// +kubebuilder:printcolumn:name="References",type=string,JSONPath=`.status.jobConditions[?(@.type=="ReferencesResolved")].reason`,description="MissingReference while a Model or Dataset it names does not exist: the job is blocked, not waiting; Resolved once all do"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.jobConditions[?(@.type=="Scheduled")].reason`,description="Whether its pods are placed: Unschedulable (a pod cannot be placed: its node and why are in the condition) and WaitingForGang wait on a node or a person; GangScheduled, GangSchedulingOff, NoGangScheduler or Placed once they are"
// +kubebuilder:printcolumn:name="Edge",type=string,JSONPath=`.status.jobConditions[?(@.type=="EdgeLinked")].reason`,description="Why a node it needs has no LocalController connected (NoSuchNode, NoLocalController, LinkDown); empty while all have"
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,description="Whether the object is suspended (spec.suspend): its pods stopped, its status kept"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Deployed",type=integer,JSONPath=`.status.deployedRound`,priority=1,description="The round whose model the inference worker serves; 0 for the initial model"

// LifelongLearningJob learns new tasks from an edge dataset round after round,
// keeping what it learned in a knowledge base.
type LifelongLearningJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec LifelongLearningJobSpec `json:"spec"`
	// +optional
	Status LifelongLearningJobStatus `json:"status,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="managedBy cannot be changed once the object exists",fieldPath=".managedBy"

// LifelongLearningJobSpec describes the cycle's data and stages.
type LifelongLearningJobSpec struct {
	// Nereid's own: suspend, managedBy, activeDeadlineSeconds, ttlSecondsAfterFinished.
	JobLifecycle `json:",inline"`
	Dataset      CycleDataset `json:"dataset"`
	TrainSpec    TrainSpec    `json:"trainSpec"`
	EvalSpec     LLWorkerSpec `json:"evalSpec"`
	DeploySpec   LLWorkerSpec `json:"deploySpec"`
	// The Secret holding credentials for outputDir.
	// +optional
	CredentialName string `json:"credentialName,omitempty"`
	// Where each round's data and models are written. It cannot change: the
	// rounds' data and models, and the paths the edge reports, are under it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="outputDir cannot change: the rounds' data and models are under it"
	OutputDir string `json:"outputDir"`
}

// LLWorkerSpec is a stage that is just a worker.
type LLWorkerSpec struct {
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="a worker template needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
}

// KnowledgeBase summarises what a lifelong learning job has learned.
type KnowledgeBase struct {
	// +optional
	AIModels AIModels `json:"AIModels,omitempty"`
	// +optional
	AIClasses AIClasses `json:"AIClasses,omitempty"`
	// +optional
	Samples Samples `json:"samples,omitempty"`
}

// AIModels lists the models in the knowledge base.
type AIModels struct {
	// How many models the knowledge base holds.
	// +optional
	NumberOfAIModels int32 `json:"numberOfAIModels"`
	// The models, as the knowledge base reports them.
	// +optional
	ListOfAIModels []AIModel `json:"listOfAIModels,omitempty"`
}

// AIModel is one model in the knowledge base.
type AIModel struct {
	// The model's id in the knowledge base.
	ModelID string `json:"modelID"`
	// Its average precision on its tasks.
	// +optional
	AveragePrecision float64 `json:"averagePrecision"`
	// How many samples it was trained on.
	// +optional
	NumberOfTrainSamples int32 `json:"numberOfTrainSamples"`
}

// AIClasses lists the classes the knowledge base knows.
type AIClasses struct {
	// How many classes the knowledge base knows.
	// +optional
	NumberOfAIClasses int32 `json:"numberOfAIClasses"`
	// Their names.
	// +optional
	ListOfAIClasses []string `json:"listOfAIClasses,omitempty"`
}

// Samples counts the unseen samples.
type Samples struct {
	// How many unseen samples have been labelled.
	// +optional
	NumberOfLabeledUnseenSample int32 `json:"numberOfLabeledUnseenSample"`
	// How many samples the knowledge base has not seen before.
	// +optional
	NumberOfUnseenSample int32 `json:"numberOfUnseenSample"`
}

// LifelongLearningJobStatus is the observed state of the job.
type LifelongLearningJobStatus struct {
	// The stage transitions of the current round, oldest first; finished
	// rounds are summarised in history.
	// +optional
	Conditions []StageCondition `json:"conditions,omitempty"`
	// What the job has learned.
	// +optional
	KnowledgeBase KnowledgeBase `json:"knowledgeBase,omitempty"`
	// When the controller first acted on the job.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// When the job finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	CycleStatus    `json:",inline"`
	// The metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LifelongLearningJobList is a list of LifelongLearningJobs.
type LifelongLearningJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LifelongLearningJob `json:"items"`
}
