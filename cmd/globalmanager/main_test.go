package main

import (
	"testing"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

// --help lists every GlobalManager flag, --config included, and keeps
// klog's apart; --version prints the version and exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	var o options
	commandtest.CheckHelp(t, append(commandtest.FlagNames(o.addFlags), "config"), true)
	commandtest.CheckVersion(t, "nereid-globalmanager")
}
