package command

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
)

// GCPercent is the garbage collector's target a command runs with (Go's
// GOGC: how far, in percent of the live heap, the heap may grow before the
// next collection) and where it came from, for the command's start log.
type GCPercent struct {
	Percent int    // -1: off (GOGC=off)
	From    string // "--<flag>", "GOGC" or "--<flag> default"
}

// SetGCPercent sets the garbage collector's target: the flag's value when
// the flag was given, else what GOGC says (the runtime applied it at start),
// else the flag's default. A command's default is below Go's (100) where its
// resident memory matters more than the collector's CPU.
func SetGCPercent(flagName string, value int, given bool) GCPercent {
	if !given && os.Getenv("GOGC") != "" {
		return GCPercent{Percent: currentGCPercent(), From: "GOGC"}
	}
	debug.SetGCPercent(value)
	from := "--" + flagName
	if !given {
		from += " default"
	}
	return GCPercent{Percent: value, From: from}
}

// currentGCPercent is the runtime's target as it stands (-1 when off).
func currentGCPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	p := int(s[0].Value.Uint64())
	if p == 0 {
		// GOGC=off reads as 0 here; SetGCPercent calls it -1.
		return -1
	}
	return p
}
