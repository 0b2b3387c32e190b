package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every Sedna resource.
const GroupName = "sedna.io"

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// The kinds of this API, as values, so controllers never read a GroupVersionKind
// from a cached object (whose TypeMeta is empty).
var (
	DatasetKind                = SchemeGroupVersion.WithKind("Dataset")
	ModelKind                  = SchemeGroupVersion.WithKind("Model")
	JointInferenceServiceKind  = SchemeGroupVersion.WithKind("JointInferenceService")
	FederatedLearningJobKind   = SchemeGroupVersion.WithKind("FederatedLearningJob")
	IncrementalLearningJobKind = SchemeGroupVersion.WithKind("IncrementalLearningJob")
	LifelongLearningJobKind    = SchemeGroupVersion.WithKind("LifelongLearningJob")
)

// Resource takes an unqualified resource and returns a group-qualified one.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder collects the functions that add this package's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Dataset{}, &DatasetList{},
		&Model{}, &ModelList{},
		&JointInferenceService{}, &JointInferenceServiceList{},
		&FederatedLearningJob{}, &FederatedLearningJobList{},
		&IncrementalLearningJob{}, &IncrementalLearningJobList{},
		&LifelongLearningJob{}, &LifelongLearningJobList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
