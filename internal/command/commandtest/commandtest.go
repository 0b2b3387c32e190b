// Package commandtest runs a command's main from the command's own tests, as
// its users run it: in a child process of the test binary, so that a test sees
// what it prints and how it exits.
package commandtest

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// runMainEnv tells a child test binary to run the command's main.
const runMainEnv = "NEREID_COMMANDTEST_RUN_MAIN"

// Main is a command's TestMain: in a child process that Run started it runs
// the command's main (with Run's arguments) instead of the tests.
func Main(m *testing.M, main func()) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Result is what a command's main printed and how it exited.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs the command's main with args in a child process of the test
// binary, whose TestMain is Main.
func Run(t *testing.T, args ...string) Result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running %v: %v", args, err)
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
}

// loggingHeader starts the group of klog's flags in --help.
const loggingHeader = "\nLogging flags:\n"

// flagLine is a flag's first line in flag.PrintDefaults' format: two spaces,
// the flag, then its type or usage, or the end of the line.
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9_-]+)(?:[ \t]|$)`)

// CheckHelp runs main with --help and checks that it exits 0 and lists
// exactly the command's own flags (own, and --version) first; then, when
// withKlog, klog's flags in a group of their own, describing -v and
// -vmodule and naming every other.
func CheckHelp(t *testing.T, own []string, withKlog bool) {
	t.Helper()
	r := Run(t, "--help")
	if r.Code != 0 {
		t.Errorf("--help exited %d, want 0", r.Code)
	}
	help := r.Stdout + r.Stderr
	ownPart, loggingPart, grouped := strings.Cut(help, loggingHeader)
	if grouped != withKlog {
		t.Fatalf("--help has a %q group: %v, want %v:\n%s", strings.TrimSpace(loggingHeader), grouped, withKlog, help)
	}
	want := append([]string{"version"}, own...)
	slices.Sort(want)
	if got := listed(ownPart); !slices.Equal(got, want) {
		t.Errorf("--help lists as the command's own flags\n  %v\nwant\n  %v", got, want)
	}
	if !withKlog {
		return
	}
	if got, want := listed(loggingPart), []string{"v", "vmodule"}; !slices.Equal(got, want) {
		t.Errorf("--help describes as logging flags %v, want %v", got, want)
	}
	klogs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogs)
	klogs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(loggingPart, "-"+f.Name) {
			t.Errorf("--help does not name klog's -%s among the logging flags", f.Name)
		}
	})
}

// FlagNames are the names of the flags add adds to a flag set: a command's
// own flags, for CheckHelp.
func FlagNames(add func(*flag.FlagSet)) []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	add(fs)
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// listed is the flags a part of --help describes, sorted.
func listed(help string) []string {
	var names []string
	for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return names
}

// CheckVersion runs main with --version and checks that it prints
// "<program> <version> (commit <commit>, go<version>)" and exits 0.
func CheckVersion(t *testing.T, program string) {
	t.Helper()
	r := Run(t, "--version")
	if r.Code != 0 {
		t.Errorf("--version exited %d, want 0 (stderr: %s)", r.Code, r.Stderr)
	}
	want := regexp.MustCompile(`^` + regexp.QuoteMeta(program) + ` \S+ \(commit \S+, go\S+\)\n$`)
	if !want.MatchString(r.Stdout) {
		t.Errorf("--version printed %q, want a line matching %s", r.Stdout, want)
	}
}
