package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=ji,categories=sedna;nereid
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Edge-Node",type=string,JSONPath=`.spec.edgeWorker.template.spec.nodeName`
// +kubebuilder:printcolumn:name="Edge-Ready",type=string,JSONPath=`.status.edgeReady`,description="Available replicas of the edge worker's Deployment, of those it asks for"
// +kubebuilder:printcolumn:name="Cloud-Ready",type=string,JSONPath=`.status.cloudReady`,description="Available replicas of the cloud worker's Deployment, of those it asks for"
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Admission",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].reason`
// +kubebuilder:printcolumn:name="References",type=string,JSONPath=`.status.conditions[?(@.type=="ReferencesResolved")].reason`,description="MissingReference while a Model or Dataset it names does not exist: the job is blocked, not waiting; Resolved once all do"
// +kubebuilder:printcolumn:name="Scheduled",type=string,JSONPath=`.status.conditions[?(@.type=="Scheduled")].reason`,description="Whether its worker pods are placed: Unschedulable (a pod cannot be placed: its node and why are in the condition) waits on a node or a person; Placed once none is refused; empty while none ever was"
// +kubebuilder:printcolumn:name="Edge",type=string,JSONPath=`.status.conditions[?(@.type=="EdgeLinked")].reason`,description="Why a node it needs has no LocalController connected (NoSuchNode, NoLocalController, LinkDown); empty while all have"
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,description="Whether the object is suspended (spec.suspend): its pods stopped, its status kept"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// JointInferenceService runs a small model on an edge node and sends the hard
// examples to a big model in the cloud.
type JointInferenceService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec JointInferenceServiceSpec `json:"spec"`
	// +optional
	Status JointInferenceServiceStatus `json:"status,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="has(self.managedBy) == has(oldSelf.managedBy) && (!has(self.managedBy) || self.managedBy == oldSelf.managedBy)",message="managedBy cannot be changed once the object exists",fieldPath=".managedBy"

// JointInferenceServiceSpec describes the edge and the cloud worker.
type JointInferenceServiceSpec struct {
	// Nereid's own: suspend, managedBy.
	ServiceLifecycle `json:",inline"`
	EdgeWorker       EdgeWorker  `json:"edgeWorker"`
	CloudWorker      CloudWorker `json:"cloudWorker"`
}

// EdgeWorker is the inference worker on the edge.
type EdgeWorker struct {
	// The small model the worker serves.
	Model ModelRef `json:"model"`
	// How the worker picks the examples it sends to the cloud.
	HardExampleMining HardExampleMining `json:"hardExampleMining"`
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="a worker template needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
	// An autoscaler for the worker's Deployment.
	// +optional
	HPA *HPA `json:"hpa,omitempty"`
}

// CloudWorker is the inference worker in the cloud.
type CloudWorker struct {
	// The big model the worker serves.
	Model ModelRef `json:"model"`
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="a worker template needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
	// An autoscaler for the worker's Deployment.
	// +optional
	HPA *HPA `json:"hpa,omitempty"`
}

// JointInferenceServiceStatus is the observed state of the service.
type JointInferenceServiceStatus struct {
	// Conditions, one per type.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []JobCondition `json:"conditions,omitempty"`
	// When the controller first acted on the service.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// Worker pods running.
	// +optional
	Active int32 `json:"active"`
	// Worker pods failed.
	// +optional
	Failed int32 `json:"failed"`
	// The edge worker's Deployment: its available replicas of those it asks
	// for, as "1/1" (0/n while it does not exist). Nereid's own, as
	// cloudReady.
	// +optional
	EdgeReady string `json:"edgeReady,omitempty"`
	// The cloud worker's Deployment, as edgeReady.
	// +optional
	CloudReady string `json:"cloudReady,omitempty"`
	// Inference metrics reported by the edge workers.
	// +optional
	Metrics []Metric `json:"metrics,omitempty"`
	// What the cloud last heard from each edge node with a worker here.
	// +optional
	// +listType=map
	// +listMapKey=name
	EdgeNodes []EdgeNodeStatus `json:"edgeNodes,omitempty"`
	// The metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// JointInferenceServiceList is a list of JointInferenceServices.
type JointInferenceServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JointInferenceService `json:"items"`
}
