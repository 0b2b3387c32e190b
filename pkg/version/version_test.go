package version

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGetPrefersLinkTimeValuesThenTheBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/nereid-ml/nereid", Version: "v0.0.0-20261127072200-9ca8f52abcde+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "9ca8f52abcdef0123456789abcdef0123456789a"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	cases := map[string]struct {
		version, commit string
		build           *debug.BuildInfo
		want            Info
	}{
		"make build": {version: "v0.1.0-3-g9ca8f52", commit: "9ca8f52", build: stamped,
			want: Info{Version: "v0.1.0-3-g9ca8f52", Commit: "9ca8f52", GoVersion: "go1.26.0"}},
		"go build in a checkout with changes": {build: stamped,
			want: Info{Version: "v0.0.0-20261127072200-9ca8f52abcde+dirty", Commit: "9ca8f52abcde-dirty", GoVersion: "go1.26.0"}},
		"go build outside git": {build: &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: "dev", Commit: "unknown", GoVersion: "go1.26.0"}},
		"a clean checkout": {build: &debug.BuildInfo{GoVersion: "go1.26.0", Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "9ca8f52"}, {Key: "vcs.modified", Value: "false"}}},
			want: Info{Version: "dev", Commit: "9ca8f52", GoVersion: "go1.26.0"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, get(tc.version, tc.commit, tc.build)); diff != "" {
				t.Errorf("get (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestStringNamesVersionCommitAndGo(t *testing.T) {
	got := Info{Version: "v0.1.0", Commit: "9ca8f52", GoVersion: "go1.26.0"}.String()
	if want := "v0.1.0 (commit 9ca8f52, go1.26.0)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
