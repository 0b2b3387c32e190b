package command

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// MemoryLimit is the Go runtime's soft memory limit a command runs with
// (Go's GOMEMLIMIT) and where it came from, for the command's start log.
type MemoryLimit struct {
	Bytes int64 // math.MaxInt64: none
	From  string
}

// Where the process's cgroups are listed, and where their hierarchies are
// mounted; tests point them at files of their own.
var (
	procSelfCgroup = "/proc/self/cgroup"
	cgroupMount    = "/sys/fs/cgroup"
)

// SetMemoryLimit sets the runtime's soft memory limit to percent of the
// memory limit of the process's cgroup (its container's, or the smallest of
// its ancestors'): near it the garbage collector runs more often rather
// than the heap's headroom taking the process past its limit, where the
// kernel kills it. The flag's value is used when the flag was given, else
// GOMEMLIMIT as the runtime applied it, else the flag's default. 0, or no
// limit, sets none.
func SetMemoryLimit(flagName string, percent int, given bool) MemoryLimit {
	if env := os.Getenv("GOMEMLIMIT"); !given && env != "" {
		// The runtime refuses to start with a GOMEMLIMIT it cannot read.
		return MemoryLimit{Bytes: debug.SetMemoryLimit(-1), From: "GOMEMLIMIT"}
	}
	from := "--" + flagName
	if !given {
		from += " default"
	}
	if percent == 0 {
		from += " (0: none)"
	} else if limit, file, found := cgroupMemoryLimit(); found {
		bytes := limit / 100 * int64(percent)
		debug.SetMemoryLimit(bytes)
		return MemoryLimit{Bytes: bytes, From: fmt.Sprintf("%s: %d%% of %d bytes (%s)", from, percent, limit, file)}
	} else {
		from += fmt.Sprintf(" (%d%%), but no memory limit in the process's cgroups", percent)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	return MemoryLimit{Bytes: math.MaxInt64, From: from}
}

// cgroupMemoryLimit is the smallest memory limit of the process's cgroups
// and their ancestors (cgroup v2's memory.max, v1's memory.limit_in_bytes)
// and the file it is in; found is false when none has a limit.
func cgroupMemoryLimit() (limit int64, file string, found bool) {
	data, err := os.ReadFile(procSelfCgroup)
	if err != nil {
		return 0, "", false
	}
	limit = math.MaxInt64
	for line := range strings.Lines(string(data)) {
		// hierarchy-ID:controllers:path; v2's is 0 with no controllers.
		id, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(path, "/") {
			continue
		}
		var dir, name string
		switch {
		case id == "0" && controllers == "":
			dir, name = cgroupMount, "memory.max"
		case slices.Contains(strings.Split(controllers, ","), "memory"):
			dir, name = filepath.Join(cgroupMount, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		// Inside a cgroup namespace the path is "/"; outside one it is the
		// cgroup's path from the hierarchy's root, where an ancestor (a
		// Kubernetes pod's) may hold the limit.
		for p := path; ; p = filepath.Dir(p) {
			f := filepath.Join(dir, p, name)
			if v, ok := readMemoryLimit(f); ok && v < limit {
				limit, file = v, f
			}
			if p == "/" {
				break
			}
		}
	}
	return limit, file, file != ""
}

// readMemoryLimit reads a cgroup's memory limit; "max" (v2) and v1's
// unlimited (the largest int64 rounded down to a page) are none.
func readMemoryLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}

// MemoryLimitFlag is the commands' flag of SetMemoryLimit's percent.
const MemoryLimitFlag = "memory-limit-percent"

// AddMemoryLimitFlag registers MemoryLimitFlag on fs, into p.
func AddMemoryLimitFlag(fs *flag.FlagSet, p *int) {
	fs.IntVar(p, MemoryLimitFlag, DefaultMemoryLimitPercent,
		"The Go runtime's soft memory limit (Go's GOMEMLIMIT), in percent of the memory limit of the process's cgroup "+
			"(its container's: the Pod's resources.limits.memory; or the smallest of its ancestors'): near it the garbage collector runs more often, "+
			"rather than the heap's headroom taking the process past the limit, where the kernel kills it. The start log says what was set and from where. "+
			"0, or no limit found, sets none. When this flag is not given, a GOMEMLIMIT environment variable wins.")
}

// DefaultMemoryLimitPercent is the soft memory limit's share of a
// container's limit by default: a tenth is left for what is not the Go heap
// (stacks, the runtime's own, the binary's pages).
const DefaultMemoryLimitPercent = 90

// ValidateMemoryLimitPercent refuses a percent outside 0–100, naming flag.
func ValidateMemoryLimitPercent(flagName string, percent int) error {
	if percent < 0 || percent > 100 {
		return fmt.Errorf("--%s %d: want 0 (none) to 100", flagName, percent)
	}
	return nil
}
