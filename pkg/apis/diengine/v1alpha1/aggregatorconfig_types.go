package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=agconfig,categories=nereid
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// AggregatorConfig is the template of the aggregators of coordinator-driven
// DIJobs: a learner that asks for more than one GPU becomes an aggregator,
// made from the cluster's AggregatorConfig, and data-parallel learners.
type AggregatorConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec AggregatorConfigSpec `json:"spec,omitempty"`
}

// AggregatorConfigSpec is what an aggregator is made from.
type AggregatorConfigSpec struct {
	// The aggregator.
	Aggregator AggregatorSpec `json:"aggregator"`
}

// AggregatorSpec is the aggregator's pod template.
type AggregatorSpec struct {
	// The aggregator's pod template; it needs at least one container.
	// +kubebuilder:validation:XValidation:rule="has(self.spec) && size(self.spec.containers) > 0",message="the aggregator needs at least one container",fieldPath=".spec.containers"
	Template corev1.PodTemplateSpec `json:"template"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// AggregatorConfigList is a list of AggregatorConfigs.
type AggregatorConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AggregatorConfig `json:"items"`
}
