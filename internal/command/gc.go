package command

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
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
	env := os.Getenv("GOGC")
	if !given && validGOGC(env) {
		return GCPercent{Percent: currentGCPercent(), From: "GOGC"}
	}
	debug.SetGCPercent(value)
	from := "--" + flagName
	if !given {
		from += " default"
		if env != "" {
			// The runtime ignored it too.
			from += fmt.Sprintf(" (GOGC=%q is neither a number nor off)", env)
		}
	}
	return GCPercent{Percent: value, From: from}
}

// validGOGC says whether the runtime takes env as GOGC: "off" or a number.
func validGOGC(env string) bool {
	if env == "off" {
		return true
	}
	_, err := strconv.Atoi(env)
	return err == nil
}

// currentGCPercent is the runtime's target as it stands (-1 when off).
func currentGCPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	// GOGC=off (-1) reads as the largest uint64.
	return int(int64(s[0].Value.Uint64()))
}
