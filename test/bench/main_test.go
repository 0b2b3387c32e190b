package main

import (
	"testing"
	"time"

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

// waitQuiet goes on while the count moves or work waits, and says how far
// it moved; it gives up at its timeout.
func TestWaitQuietWaitsForTheCountToStopAndNothingToWait(t *testing.T) {
	const poll, quiet = time.Millisecond, 20 * time.Millisecond
	n := 0.0
	moved, _, ok := waitQuiet(t.Context(), poll, quiet, 10*time.Second, func() (float64, bool) {
		if n < 5 {
			n++
		}
		return n, false
	})
	if !ok || moved != 4 {
		t.Errorf("a count that stops at 5: moved %v, quiet %v; want 4 (from the first sample), true", moved, ok)
	}
	if _, _, ok := waitQuiet(t.Context(), poll, quiet, 100*time.Millisecond, func() (float64, bool) { return 1, true }); ok {
		t.Error("work always waiting: went quiet; want the timeout")
	}
}
