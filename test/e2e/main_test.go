// Package e2e runs Nereid end to end on real nodes: kubelets that run real
// containers (hack/realnode), beside kwok's. Its tests need root; without it
// each skips, saying so.
package e2e

import (
	"os"
	"testing"

	"github.com/nereid-ml/nereid/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m, framework.WithRealNodes(2))) }
