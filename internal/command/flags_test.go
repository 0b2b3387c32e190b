package command

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// A --help met after other flags (`--namespace=x --help`) still shows each
// flag's own default, not the value parsed so far.
func TestPrintFlagsShowsDefaultsNotParsedValues(t *testing.T) {
	fs := flag.NewFlagSet("globalmanager", flag.ContinueOnError)
	fs.String("namespace", "nereid-system", "Where.")
	klog.InitFlags(fs)
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage = func() { PrintFlags(fs) }
	if _, err := parseFlags(fs, []string{"--namespace=other", "-v=4", "--help"}); err != flag.ErrHelp {
		t.Fatalf("parsing: %v, want flag.ErrHelp", err)
	}
	own, logging, _ := strings.Cut(out.String(), "Logging flags:")
	if !strings.Contains(own, `(default "nereid-system")`) || strings.Contains(own, "other") {
		t.Errorf("--namespace's default is not the one defined:\n%s", own)
	}
	if strings.Contains(logging, "(default 4)") {
		t.Errorf("-v shows the parsed value as its default:\n%s", logging)
	}
}

func TestParseFlagsSaysWhetherVersionWasAsked(t *testing.T) {
	for args, want := range map[string]bool{"": false, "--version": true, "--version=false": false} {
		fs := flag.NewFlagSet("localcontroller", flag.ContinueOnError)
		asked, err := parseFlags(fs, strings.Fields(args))
		if err != nil || asked != want {
			t.Errorf("parseFlags(%q) = %v, %v; want %v, nil", args, asked, err, want)
		}
	}
}

func TestProgramIsPrefixedOnce(t *testing.T) {
	for name, want := range map[string]string{"globalmanager": "nereid-globalmanager", "nereid-preflight": "nereid-preflight"} {
		if got := Program(flag.NewFlagSet(name, flag.ContinueOnError)); got != want {
			t.Errorf("Program(%q) = %q, want %q", name, got, want)
		}
	}
}
