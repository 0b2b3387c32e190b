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
// NEREID_REAL_NODES=2: its GlobalManager, the chart's LocalController
// DaemonSet on the real nodes, kwok's nodes beside them.
func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.AsLocalRun(), framework.WithRealNodes(2)))
}
