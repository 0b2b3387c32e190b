package main

import (
	"flag"
	"testing"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

// --help lists every GlobalManager flag, --config included, and keeps
// klog's apart; --version prints the version and exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	fs := flag.NewFlagSet("globalmanager", flag.ContinueOnError)
	var o options
	o.addFlags(fs)
	own := []string{"config"}
	fs.VisitAll(func(f *flag.Flag) { own = append(own, f.Name) })
	commandtest.CheckHelp(t, own, true)
	commandtest.CheckVersion(t, "nereid-globalmanager")
}
