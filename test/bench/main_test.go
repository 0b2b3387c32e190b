package main

import (
	"testing"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

// --help lists every bench flag, each section's included (it logs nothing
// through klog, so it has no klog flags); --version prints the version and
// exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	var o options
	commandtest.CheckHelp(t, commandtest.FlagNames(o.addFlags), false)
	commandtest.CheckVersion(t, "nereid-bench")
}
