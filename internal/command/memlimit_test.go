package command

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// fakeCgroups writes a /proc/self/cgroup and the limit files under a
// temporary mount, for SetMemoryLimit to read.
func fakeCgroups(t *testing.T, procCgroup string, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	oldProc, oldMount := procSelfCgroup, cgroupMount
	procSelfCgroup, cgroupMount = filepath.Join(root, "cgroup"), filepath.Join(root, "mount")
	t.Cleanup(func() {
		procSelfCgroup, cgroupMount = oldProc, oldMount
		debug.SetMemoryLimit(math.MaxInt64)
	})
	if err := os.WriteFile(procSelfCgroup, []byte(procCgroup), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		f := filepath.Join(cgroupMount, name)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSetMemoryLimitTakesAPercentOfTheCgroupsLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	const gib = 1 << 30
	for name, tc := range map[string]struct {
		proc  string
		files map[string]string
		want  int64
		file  string // the limit's, in From
	}{
		"cgroup v2 in a namespace": {proc: "0::/\n", files: map[string]string{"memory.max": "1073741824"},
			want: gib / 100 * 90, file: "memory.max"},
		"cgroup v2, the pod's limit above the container's": {proc: "0::/kubepods/pod1/ctr\n",
			files: map[string]string{"kubepods/pod1/ctr/memory.max": "max", "kubepods/pod1/memory.max": "1073741824", "memory.max": "max"},
			want:  gib / 100 * 90, file: "kubepods/pod1/memory.max"},
		"the smallest of the container's and its ancestors'": {proc: "0::/a/b\n",
			files: map[string]string{"a/b/memory.max": "2147483648", "a/memory.max": "1073741824"},
			want:  gib / 100 * 90, file: "a/memory.max"},
		"cgroup v1": {proc: "5:cpu,cpuacct:/docker/x\n4:memory:/docker/x\n0::/\n",
			files: map[string]string{"memory/docker/x/memory.limit_in_bytes": "9223372036854771712", "memory/docker/memory.limit_in_bytes": "536870912"},
			want:  (gib / 2) / 100 * 90, file: "memory/docker/memory.limit_in_bytes"},
		"no limit": {proc: "0::/\n4:memory:/\n", files: map[string]string{"memory.max": "max", "memory/memory.limit_in_bytes": "9223372036854771712"},
			want: math.MaxInt64},
		"no cgroup files": {proc: "0::/\n", want: math.MaxInt64},
	} {
		t.Run(name, func(t *testing.T) {
			fakeCgroups(t, tc.proc, tc.files)
			got := SetMemoryLimit("memory-limit-percent", 90, false)
			if got.Bytes != tc.want {
				t.Errorf("limit %d, want %d (%s)", got.Bytes, tc.want, got.From)
			}
			if now := debug.SetMemoryLimit(-1); now != tc.want {
				t.Errorf("the runtime's limit is %d, want %d", now, tc.want)
			}
			if !strings.HasPrefix(got.From, "--memory-limit-percent default") || !strings.Contains(got.From, tc.file) {
				t.Errorf("From %q, want the flag's default and %q", got.From, tc.file)
			}
		})
	}
}

func TestSetMemoryLimitTakesTheFlagThenGOMEMLIMITThenTheDefault(t *testing.T) {
	fakeCgroups(t, "0::/\n", map[string]string{"memory.max": "1000000000"})
	t.Setenv("GOMEMLIMIT", "")
	if got := SetMemoryLimit("memory-limit-percent", 50, true); got.Bytes != 500000000 || !strings.HasPrefix(got.From, "--memory-limit-percent:") {
		t.Errorf("the flag given: %+v, want 50%% of 1e9 from the flag", got)
	}
	if got := SetMemoryLimit("memory-limit-percent", 0, true); got.Bytes != math.MaxInt64 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("--memory-limit-percent=0: %+v, want none", got)
	}

	// GOMEMLIMIT (which the runtime applied at start) wins over the default,
	// not over the flag.
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20)
	if got := SetMemoryLimit("memory-limit-percent", 90, false); got.Bytes != 300<<20 || got.From != "GOMEMLIMIT" {
		t.Errorf("GOMEMLIMIT and the flag's default: %+v, want GOMEMLIMIT's 300 MiB", got)
	}
	if got := SetMemoryLimit("memory-limit-percent", 90, true); got.Bytes != 900000000 {
		t.Errorf("GOMEMLIMIT and the flag given: %+v, want the flag's 90%%", got)
	}
}

func TestMemoryLimitPercentIsZeroToAHundred(t *testing.T) {
	for _, ok := range []int{0, 90, 100} {
		if err := ValidateMemoryLimitPercent("memory-limit-percent", ok); err != nil {
			t.Errorf("%d: %v", ok, err)
		}
	}
	for _, bad := range []int{-1, 101} {
		err := ValidateMemoryLimitPercent("memory-limit-percent", bad)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("--memory-limit-percent %d", bad)) {
			t.Errorf("%d: error %v, want one naming the flag and the value", bad, err)
		}
	}
}

func TestGivenIsWhatWasSet(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.Int("a", 1, "")
	fs.Int("b", 2, "")
	fs.Int("c", 3, "")
	if err := fs.Parse([]string{"--a=1"}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Set("b", "5"); err != nil { // as a configuration file does
		t.Fatal(err)
	}
	if !Given(fs, "a") || !Given(fs, "b") || Given(fs, "c") {
		t.Errorf("given a, b, c = %v, %v, %v; want true, true, false", Given(fs, "a"), Given(fs, "b"), Given(fs, "c"))
	}
}
