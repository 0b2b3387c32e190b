// Package v1alpha1 holds the sedna.io/v1alpha1 API: KubeEdge Sedna's resources,
// field for field on spec, with the status fields Nereid adds
// (observedGeneration, bounded conditions).
//
// +k8s:deepcopy-gen=package
// +groupName=sedna.io
package v1alpha1
