// Package localrun runs Nereid on the local control plane of hack/local-up.sh,
// the same way for `make local-up` (through the command in ./cmd/localrun) and
// for the integration tests (through test/framework):
//
//   - the GlobalManager runs as the chart's ServiceAccount, with the chart's
//     RBAC and owner-label policy (GlobalManagerIdentity), never as an
//     administrator, so that a permission the chart lacks fails here first;
//   - each LocalController proves its node as a real one does, with a token
//     bound to its node's Pod of the LocalControllers' DaemonSet
//     (EdgeDaemonSet);
//   - both are started from one description of their command lines
//     (GlobalManager, LocalController) as a Process, which a test owns or
//     which outlives the command that started it, for hack/local-down.sh to
//     stop.
//
// Run is the local run itself: its names, files, ports and nodes.
package localrun
