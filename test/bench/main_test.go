package main

import (
	"flag"
	"testing"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

// --help lists every bench flag, each section's included (it logs nothing
// through klog, so it has no klog flags); --version prints the version and
// exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	o.addFlags(fs)
	var own []string
	fs.VisitAll(func(f *flag.Flag) { own = append(own, f.Name) })
	if len(own) < 10 {
		t.Fatalf("addFlags added %d flags: %v", len(own), own)
	}
	commandtest.CheckHelp(t, own, false)
	commandtest.CheckVersion(t, "nereid-bench")
}
