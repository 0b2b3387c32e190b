package command

import (
	"runtime/debug"
	"testing"
)

func TestSetGCPercentTakesTheFlagThenGOGCThenTheDefault(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Setenv("GOGC", "")
	if got := SetGCPercent("gc-percent", 50, false); got != (GCPercent{50, "--gc-percent default"}) || currentGCPercent() != 50 {
		t.Fatalf("no flag, no GOGC: got %+v, runtime at %d; want the default 50", got, currentGCPercent())
	}

	// GOGC is read by the runtime at start; here it stands as if it had.
	debug.SetGCPercent(80)
	t.Setenv("GOGC", "80")
	if got := SetGCPercent("gc-percent", 50, false); got != (GCPercent{80, "GOGC"}) || currentGCPercent() != 80 {
		t.Fatalf("GOGC=80 and no flag: got %+v, runtime at %d; want GOGC's 80 left as it is", got, currentGCPercent())
	}
	if got := SetGCPercent("gc-percent", 30, true); got != (GCPercent{30, "--gc-percent"}) || currentGCPercent() != 30 {
		t.Fatalf("GOGC=80 and --gc-percent=30: got %+v, runtime at %d; want the flag's 30", got, currentGCPercent())
	}

	// An invalid GOGC, which the runtime ignored, leaves the flag's default.
	debug.SetGCPercent(100)
	t.Setenv("GOGC", "50%")
	if got := SetGCPercent("gc-percent", 50, false); got.Percent != 50 || got.From != `--gc-percent default (GOGC="50%" is neither a number nor off)` || currentGCPercent() != 50 {
		t.Fatalf("GOGC=50%% and no flag: got %+v, runtime at %d; want the default 50, saying why", got, currentGCPercent())
	}

	debug.SetGCPercent(0)
	t.Setenv("GOGC", "0")
	if got := SetGCPercent("gc-percent", 50, false); got != (GCPercent{0, "GOGC"}) {
		t.Fatalf("GOGC=0: got %+v, want 0 from GOGC", got)
	}

	debug.SetGCPercent(-1)
	t.Setenv("GOGC", "off")
	if got := SetGCPercent("gc-percent", 50, false); got != (GCPercent{-1, "GOGC"}) {
		t.Fatalf("GOGC=off: got %+v, want -1 from GOGC", got)
	}
}
