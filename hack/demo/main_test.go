package main

import (
	"testing"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

// --help lists the demo's flags (it logs nothing through klog, so it has
// no klog flags); --version prints the version and exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	commandtest.CheckHelp(t, []string{"check-period-seconds", "example", "namespace", "out-dir", "pause", "rounds"}, false)
	commandtest.CheckVersion(t, "nereid-demo")
}
