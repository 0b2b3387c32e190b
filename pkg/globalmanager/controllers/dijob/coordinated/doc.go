// Package coordinated is what DI-orchestrator v0.2.x (the coordinator-driven
// diengine.opendilab.org/v1alpha1 DIJob) names and sets on a job's pods and
// Services, so that DI-engine's v1 coordinator, collectors, learners and
// aggregators find what they look for: the labels, the ports, the
// environment and the addresses (DI-orchestrator v0.2.2 common/const.go and
// utils/). The DIJob controller makes a job's coordinator with it, the v1
// replicas server its collectors, learners, aggregators and DDP learners;
// both read pods back with it.
//
// The pods are built from the v1alpha1 view of the job (conversion.ToV1 of
// the stored v2alpha1 object) and owned by the job through a controller
// reference of kind DIJob in v2alpha1, as every DIJob child is, so the
// controllers' owner index finds them.
package coordinated
