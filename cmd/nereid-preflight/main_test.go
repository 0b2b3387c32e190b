package main

import (
	"testing"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

// --help lists the preflight's flags (it logs nothing, so it has no klog
// flags); --version prints the version and exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	commandtest.CheckHelp(t, []string{"kubeconfig", "namespace", "sedna-globalmanager", "sedna-localcontroller", "sedna-namespace", "timeout"}, false)
	commandtest.CheckVersion(t, "nereid-preflight")
}
