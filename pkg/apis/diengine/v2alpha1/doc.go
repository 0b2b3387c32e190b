// Package v2alpha1 holds the diengine.opendilab.org/v2alpha1 API: DI-engine's
// DIJob, as DI-orchestrator v1.1.3 defines it, field for field, with the
// status fields Nereid adds (observedGeneration) and the rules on task names
// that DI-orchestrator only checks once the job runs, here checked when it is
// applied.
//
// +k8s:deepcopy-gen=package
// +groupName=diengine.opendilab.org
package v2alpha1
