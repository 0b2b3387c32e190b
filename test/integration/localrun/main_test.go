// Package localrun tests what the README and docs/local-run.md tell a user to
// do on the local run (make local-up): run the demos, run them again, and
// install the chart onto it with the README's own helm command. It starts a
// control plane of its own as make local-up does, with its GlobalManager and a
// LocalController per edge node, and the demos run against it as make demo
// runs them.
package localrun

import (
	"os"
	"testing"

	"github.com/nereid-ml/nereid/test/framework"
)

func TestMain(m *testing.M) {
	// LocalControllers on every node, cloud-0 included, as Sedna runs them
	// (NEREID_LC_NODES=all make local-up): the demos use the edge nodes as
	// ever, and a Dataset on cloud-0 is counted (everynode_test.go).
	if err := os.Setenv("NEREID_LC_NODES", "all"); err != nil {
		panic(err)
	}
	os.Exit(framework.Run(m, framework.AsLocalRun()))
}
