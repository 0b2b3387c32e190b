// Package v1alpha1 holds the diengine.opendilab.org/v1alpha1 API:
// DI-engine's coordinator-driven DIJob and the AggregatorConfig, as
// DI-orchestrator v0.2.2 defines them, field for field, with the default its
// admission webhook set (cleanPodPolicy Running) and the checks it made (or
// that a job needs to run: a coordinator with a container) as schema rules,
// checked when a job is applied.
//
// DIJob is served from the same CRD as v2alpha1, which stores it: the
// GlobalManager's conversion webhook (package
// pkg/globalmanager/controllers/dijob/conversion) converts between the two
// without loss.
//
// +k8s:deepcopy-gen=package
// +groupName=diengine.opendilab.org
package v1alpha1
