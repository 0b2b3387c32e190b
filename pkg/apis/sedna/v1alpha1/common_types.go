package v1alpha1

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ModelRef names a Model in the resource's namespace.
type ModelRef struct {
	// Name of the Model.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// DatasetRef names a Dataset in the resource's namespace.
type DatasetRef struct {
	// Name of the Dataset.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Metric is one named measurement, as Sedna's workers report it.
type Metric struct {
	// The measurement's name, for example precision or recall.
	Key string `json:"key"`
	// Its value, as the worker wrote it (a number, or a JSON array).
	Value string `json:"value"`
}

// ParaSpec is one key/value parameter.
type ParaSpec struct {
	// The parameter's name, for example threshold_img.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
	// Its value, as the algorithm reads it.
	Value string `json:"value"`
}

// HardExampleMining selects the hard example mining algorithm of an inference
// worker and its parameters.
type HardExampleMining struct {
	// Name of the algorithm, for example IBT or CrossEntropy.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Parameters passed to the algorithm (HEM_PARAMETERS).
	// +optional
	Parameters []ParaSpec `json:"parameters,omitempty"`
}

// HPA asks for a HorizontalPodAutoscaler on a worker's Deployment.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas",fieldPath=".minReplicas"
type HPA struct {
	// The fewest replicas the autoscaler keeps (1 when unset); also the
	// Deployment's replicas when it is made.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// The most replicas the autoscaler makes.
	// +kubebuilder:validation:Minimum=1
	MaxReplicas int32 `json:"maxReplicas"`
	// What the autoscaler scales on, as a HorizontalPodAutoscaler's
	// spec.metrics (autoscaling/v2).
	// +optional
	Metrics []autoscalingv2.MetricSpec `json:"metrics,omitempty"`
	// How fast it scales up and down, as a HorizontalPodAutoscaler's
	// spec.behavior (autoscaling/v2).
	// +optional
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// Trigger decides when a lifecycle stage starts.
type Trigger struct {
	// How often, in seconds, the trigger is checked.
	// +kubebuilder:validation:Minimum=1
	// +optional
	CheckPeriodSeconds int32 `json:"checkPeriodSeconds,omitempty"`
	// A daily window outside which the trigger does not fire.
	// +optional
	Timer *Timer `json:"timer,omitempty"`
	// The condition that fires the trigger.
	Condition TriggerCondition `json:"condition"`
}

// Timer is a daily window, start and end as HH:MM (24-hour clock; 24:00 is the
// end of the day, as Sedna's examples write it).
type Timer struct {
	// When the window opens each day, HH:MM.
	// +kubebuilder:validation:Pattern=`^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$`
	Start string `json:"start"`
	// When it closes, HH:MM.
	// +kubebuilder:validation:Pattern=`^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$`
	End string `json:"end"`
}

// TriggerCondition compares a metric with a threshold: metric operator threshold.
type TriggerCondition struct {
	// How the metric is compared with the threshold: >, <, >=, <= or =.
	// +kubebuilder:validation:Enum=">";"<";">=";"<=";"="
	Operator string `json:"operator"`
	// A number, for example 0.8 or 500.
	Threshold float64 `json:"threshold"`
	// The metric compared, for example num_of_samples or precision_delta.
	// +kubebuilder:validation:MinLength=1
	Metric string `json:"metric"`
}

// JobCondition is one observation of a job's or service's state; conditions
// are kept one per type.
type JobCondition struct {
	// Type of the condition.
	Type string `json:"type"`
	// Status of the condition: True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// Last time the condition was confirmed.
	// +optional
	LastHeartbeatTime metav1.Time `json:"lastHeartbeatTime,omitempty"`
	// Last time the condition changed status.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// One-word reason for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Human-readable detail of the last transition.
	// +optional
	Message string `json:"message,omitempty"`
	// The metadata.generation this condition was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Stage is a stage of a learning cycle.
// +kubebuilder:validation:Enum=Train;Eval;Deploy
type Stage string

// The stages of a learning cycle.
const (
	StageTrain  Stage = "Train"
	StageEval   Stage = "Eval"
	StageDeploy Stage = "Deploy"
)

// StageState is where a stage stands.
// +kubebuilder:validation:Enum=Waiting;Ready;Starting;Running;Completed;Failed
type StageState string

// The states of a stage.
const (
	StageWaiting   StageState = "Waiting"
	StageReady     StageState = "Ready"
	StageStarting  StageState = "Starting"
	StageRunning   StageState = "Running"
	StageCompleted StageState = "Completed"
	StageFailed    StageState = "Failed"
)

// StageCondition records a stage's state, as Sedna's incremental and lifelong
// learning jobs do.
type StageCondition struct {
	// State of the stage.
	Type StageState `json:"type"`
	// Status of the condition: True, False or Unknown.
	Status corev1.ConditionStatus `json:"status"`
	// The stage this condition is about.
	Stage Stage `json:"stage"`
	// Last time the condition was confirmed.
	// +optional
	LastHeartbeatTime metav1.Time `json:"lastHeartbeatTime,omitempty"`
	// Last time the condition changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// One-word reason for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Human-readable detail of the last transition.
	// +optional
	Message string `json:"message,omitempty"`
	// JSON data that goes with the condition (the stage's inputs or results).
	// +optional
	Data string `json:"data,omitempty"`
}

// CycleStatus is what Nereid adds to the status of the learning-cycle kinds, so
// `kubectl get` shows the current stage without reading the conditions.
type CycleStatus struct {
	// The stage the job is in.
	// +optional
	Stage Stage `json:"stage,omitempty"`
	// The state of that stage.
	// +optional
	State StageState `json:"state,omitempty"`
	// The round of the cycle, counted from 1.
	// +optional
	Round int32 `json:"round,omitempty"`
	// The try of the current stage, counted from 1; a failed try is retried
	// up to the GlobalManager's --stage-attempts.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// The round in progress: its data, the models it trained and their
	// evaluation. Empty while the train trigger waits.
	// +optional
	CurrentRound *RoundStatus `json:"currentRound,omitempty"`
	// The last finished rounds, oldest first, at most the GlobalManager's
	// --cycle-history-limit (10 by default).
	// +optional
	History []RoundStatus `json:"history,omitempty"`
	// The round whose model the inference worker serves; 0 for the initial model.
	// +optional
	DeployedRound int32 `json:"deployedRound,omitempty"`
	// The inference worker's pod.
	// +optional
	InferenceWorker string `json:"inferenceWorker,omitempty"`
	// What the cloud last heard from each edge node involved.
	// +optional
	EdgeNodes []EdgeNodeStatus `json:"edgeNodes,omitempty"`
	// Conditions about the job as a whole, one per type, such as EdgeSynced
	// (whether its edge nodes could be sent it); conditions holds the stage
	// transitions instead, as Sedna's does.
	// +optional
	JobConditions []JobCondition `json:"jobConditions,omitempty"`
}

// The results of a round.
const (
	RoundDeployed    = "Deployed"
	RoundNotDeployed = "NotDeployed"
	RoundFailed      = "Failed"
)

// RoundStatus is one round of a learning cycle.
type RoundStatus struct {
	// The round, counted from 1.
	Round int32 `json:"round"`
	// When the train trigger fired on the edge.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// When the round ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// The new samples the round was prepared from.
	// +optional
	NumberOfSamples int32 `json:"numberOfSamples,omitempty"`
	// The round's training split, a path on the dataset's node.
	// +optional
	TrainDatasetURL string `json:"trainDatasetURL,omitempty"`
	// The round's evaluation split, a path on the dataset's node.
	// +optional
	TestDatasetURL string `json:"testDatasetURL,omitempty"`
	// The models the train stage produced, with their evaluation metrics
	// once the eval stage reported them.
	// +optional
	Models []RoundModel `json:"models,omitempty"`
	// The model the eval stage reported as its own, when it is none of
	// models: the knowledge base index a lifelong eval worker keeps of the
	// round's tasks, which the round's deploy serves.
	// +optional
	EvaluatedModel *RoundModel `json:"evaluatedModel,omitempty"`
	// How the round ended: Deployed, NotDeployed or Failed.
	// +optional
	Result string `json:"result,omitempty"`
	// Why, in a sentence (the deploy trigger's decision, or the failure).
	// +optional
	Message string `json:"message,omitempty"`
}

// RoundModel is a model a round trained.
type RoundModel struct {
	// Where the model is: a path on a node or a URL such as s3://.
	URL string `json:"url"`
	// Its format, for example pb or pkl.
	// +optional
	Format string `json:"format,omitempty"`
	// Its evaluation; list values are JSON arrays.
	// +optional
	Metrics []Metric `json:"metrics,omitempty"`
}

// Bounds of an EdgeNodeStatus, so that each node's share of an object's
// status stays small (about 20 KiB of JSON at worst) however much its
// workers report.
const (
	// MaxPreviousStores is how many earlier stores of a node an entry
	// remembers the last report id of.
	MaxPreviousStores = 3
	// MaxEdgeNodeMetrics is how many of a report's metrics an entry keeps.
	MaxEdgeNodeMetrics = 32
	// MaxMetricKeyBytes and MaxMetricValueBytes bound one metric's key and
	// value; longer text is cut and ends in TruncatedSuffix.
	MaxMetricKeyBytes   = 128
	MaxMetricValueBytes = 256
	// MaxWorkerNameBytes bounds the worker's name (a Pod's name is at most
	// 253 bytes); MaxStageBytes bounds the stage and the state.
	MaxWorkerNameBytes = 253
	MaxStageBytes      = 32
	// TruncatedSuffix ends text that was cut to its bound.
	TruncatedSuffix = "…(truncated)"
	// DroppedMetricsKey is the key of the metric that says how many metrics
	// past MaxEdgeNodeMetrics were not kept.
	DroppedMetricsKey = "nereid.io/dropped-metrics"
)

// EdgeNodeStatus is what the cloud last heard from one edge node about a job
// or service: the last report its LocalController forwarded.
//
// Its size is bounded: at most MaxEdgeNodeMetrics (32) metrics, the first by
// key, then one more, DroppedMetricsKey, saying how many others the report
// had; keys of at most 128 bytes and values of at most 256, longer ones cut at
// a character boundary and ending in "…(truncated)"; the worker's name at most
// 253 bytes, stage and state at most 32; at most MaxPreviousStores (3)
// previous stores.
type EdgeNodeStatus struct {
	// Name of the node.
	Name string `json:"name"`
	// When the last report from the node was applied.
	LastHeardTime metav1.Time `json:"lastHeardTime"`
	// The identity of the LocalController store the last report came from.
	// Report ids count per store: a store that is wiped or replaced starts
	// again from 1, under a new identity. An entry written before stores had
	// identities has none, and is taken to be of the first store that reports
	// to it.
	// +optional
	Store string `json:"store,omitempty"`
	// The outbox id of the last report applied from the store; the store's
	// reports up to it are never applied again.
	LastReportID int64 `json:"lastReportID"`
	// The stores the node reported from before this one, most recent first,
	// at most MaxPreviousStores (3), each with the id of its last report
	// applied: what such a store still resends is known as applied. A store
	// older than those would have its resent reports applied again.
	// +optional
	// +listType=atomic
	PreviousStores []StoreReportID `json:"previousStores,omitempty"`
	// How many reports from the node were applied; each report counts once,
	// however often the LocalController had to resend it.
	// +optional
	ReportsApplied int64 `json:"reportsApplied,omitempty"`
	// The worker that sent the last report.
	// +optional
	Worker string `json:"worker,omitempty"`
	// Its stage: train, eval, deploy or inference.
	// +optional
	Stage string `json:"stage,omitempty"`
	// Its state: ready, running, completed or failed.
	// +optional
	State string `json:"state,omitempty"`
	// The round the report was about, when its ownerInfo said: currentRound
	// (Sedna's federated learning workers) or round (the learning cycles'
	// LocalController); 0 otherwise.
	// +optional
	Round int32 `json:"round,omitempty"`
	// The scalar fields of the worker's ownerInfo and results (round, metrics,
	// inference counts), as reported, sorted by key; nested objects and lists
	// as JSON text. Bounded as the type says.
	// +optional
	Metrics []Metric `json:"metrics,omitempty"`
}

// StoreReportID is the last report applied from one LocalController store.
type StoreReportID struct {
	// The store's identity.
	Store string `json:"store"`
	// The outbox id of its last report applied.
	LastReportID int64 `json:"lastReportID"`
}
