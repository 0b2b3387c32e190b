package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=dst,categories=sedna;nereid
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Format",type=string,JSONPath=`.spec.format`
// +kubebuilder:printcolumn:name="Samples",type=integer,JSONPath=`.status.numberOfSamples`
// +kubebuilder:printcolumn:name="Edge",type=string,JSONPath=`.status.conditions[?(@.type=="EdgeLinked")].reason`,description="Why a node it needs has no LocalController connected (NoSuchNode, NoLocalController, LinkDown); empty while all have"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Dataset is a set of samples that lives on one node; its LocalController
// counts the samples.
type Dataset struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec DatasetSpec `json:"spec"`
	// +optional
	Status DatasetStatus `json:"status,omitempty"`
}

// DatasetSpec says where a dataset's index file is and on which node.
type DatasetSpec struct {
	// URL of the dataset's index file, on the node or in S3.
	// +kubebuilder:validation:MinLength=1
	URL string `json:"url"`
	// Format of the index file: txt (one sample per line) or csv (one per row after the header).
	// +kubebuilder:validation:MinLength=1
	Format string `json:"format"`
	// The node whose LocalController owns the dataset.
	// +kubebuilder:validation:MinLength=1
	NodeName string `json:"nodeName"`
	// The Secret holding credentials for the URL.
	// +optional
	CredentialName string `json:"credentialName,omitempty"`
}

// DatasetStatus is what the node's LocalController last counted.
type DatasetStatus struct {
	// When the count last changed.
	// +optional
	UpdateTime *metav1.Time `json:"updateTime,omitempty"`
	// Samples in the index file.
	// +optional
	NumberOfSamples int32 `json:"numberOfSamples"`
	// Conditions, one per type, such as whether the index file could be read.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// The metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// The last report of a count applied: its node, the LocalController
	// store it came from and its id. A report sent again after its
	// acknowledgement was lost is known by them and applied once.
	// +optional
	LastReport *DatasetReportID `json:"lastReport,omitempty"`
}

// DatasetReportID names one LocalController report of a Dataset's count.
type DatasetReportID struct {
	// The node whose LocalController counted.
	Node string `json:"node"`
	// The identity of its store, whose ids the report's is.
	Store string `json:"store"`
	// The report's outbox id.
	ID int64 `json:"id"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DatasetList is a list of Datasets.
type DatasetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Dataset `json:"items"`
}
