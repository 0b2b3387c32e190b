// Package e2e runs Nereid end to end on real nodes: kubelets that run real
// containers (hack/realnode), beside kwok's. Its tests need root; without it
// each skips, saying so.
package e2e

import (
	"os"
	"testing"

	"github.com/nereid-ml/nereid/test/framework"
)

// TestMain starts the local run as make local-up does with
// NEREID_REAL_NODES=2, but without kwok's nodes: its GlobalManager, a real
// cloud node and two real edge nodes with the chart's LocalController
// DaemonSet, so that every pod of a job runs (Sedna's and DI-orchestrator's
// samples, which name no nodes of theirs or none, then land on real ones).
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.AsLocalRun(), framework.OnlyRealNodes(2)))
}
