package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nereid-ml/nereid/internal/command/commandtest"
)

func TestMain(m *testing.M) { commandtest.Main(m, main) }

// --help lists every flag; --version prints the version and exits 0.
func TestHelpListsEveryFlagAndVersionExits0(t *testing.T) {
	var o options
	commandtest.CheckHelp(t, commandtest.FlagNames(o.addFlags), false)
	commandtest.CheckVersion(t, "nereid-benchcompare")
}

func TestFlagErrorsExit2NamingTheFlag(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"no base":         {nil, "-base is required"},
		"unknown section": {[]string{"-base", "HEAD", "-sections", "globalmanager,edges"}, `-sections: unknown section "edges"`},
		"no runs":         {[]string{"-base", "HEAD", "-runs", "0"}, "-runs 0"},
	} {
		t.Run(name, func(t *testing.T) {
			r := commandtest.Run(t, tc.args...)
			if r.Code != 2 || !strings.Contains(r.Stderr, tc.wantErr) {
				t.Errorf("exited %d with stderr %q, want 2 and %q", r.Code, r.Stderr, tc.wantErr)
			}
		})
	}
}

// Each run is one section alone, its JSON where the comparison reads it;
// edge runs without the fleet at scale, which is its own section; the
// user's flags come first so that these win.
func TestBenchArgs(t *testing.T) {
	user := []string{"-jobs", "20"}
	for section, want := range map[string][]string{
		"globalmanager": {"-jobs", "20", "-only", "globalmanager", "-out", "/o/x.json"},
		"dijob":         {"-jobs", "20", "-only", "dijob", "-dijob-out", "/o/x.json"},
		"edge":          {"-jobs", "20", "-only", "edge", "-edge-out", "/o/x.json", "-edge-scale-nodes", "0"},
		"edge-scale":    {"-jobs", "20", "-only", "edge-scale", "-edge-scale-out", "/o/x.json"},
	} {
		if diff := cmp.Diff(want, benchArgs(user, section, "/o/x.json")); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", section, diff)
		}
	}
	if diff := cmp.Diff([]string{"-jobs", "20"}, user); diff != "" {
		t.Errorf("benchArgs changed the user's flags (-want,+got):\n%s", diff)
	}
}
