package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=mdl,categories=sedna;nereid
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Format",type=string,JSONPath=`.spec.format`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Model is a trained model that workers load or produce.
type Model struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ModelSpec `json:"spec"`
	// +optional
	Status ModelStatus `json:"status,omitempty"`
}

// ModelSpec says where a model is stored.
type ModelSpec struct {
	// URL of the model, a path on the node or in S3.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
	// Format of the model, for example pb, pth or ckpt.
	// +kubebuilder:validation:MinLength=1
	Format string `json:"format"`
	// The device SoC versions the model runs on.
	// +optional
	DeviceSocVersions []string `json:"device_soc_versions,omitempty"`
	// The Secret holding credentials for the URL.
	// +optional
	CredentialName string `json:"credentialName,omitempty"`
}

// ModelStatus holds the model's last evaluation.
type ModelStatus struct {
	// When the metrics last changed.
	// +optional
	UpdateTime *metav1.Time `json:"updateTime,omitempty"`
	// The metrics of the last evaluation.
	// +optional
	Metrics []Metric `json:"metrics,omitempty"`
	// Conditions, one per type.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// The metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ModelList is a list of Models.
type ModelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Model `json:"items"`
}
