// Package version says which build of Nereid a binary is: what --version
// prints and what each command logs first.
//
// `make build` and `make images` set the version and commit at link time:
//
//	go build -ldflags "-X github.com/nereid-ml/nereid/pkg/version.version=v0.1.0 \
//	  -X github.com/nereid-ml/nereid/pkg/version.commit=9ca8f52" ./cmd/...
//
// A plain `go build` in a git checkout (as make local-up and the tests build)
// sets neither; the version and commit then come from what the Go toolchain
// stamped into the binary (its module version and vcs.revision), and are
// "dev" and "unknown" where it stamped nothing (go run, a build outside git).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by -ldflags -X; empty in a build that does not set them.
var (
	version string
	commit  string
)

// Info is one build's version.
type Info struct {
	// Version is `git describe --tags --always --dirty` of the build's
	// checkout, or the module version Go stamped, or "dev".
	Version string
	// Commit is the git commit the binary was built from ("-dirty" when the
	// checkout had changes), or "unknown".
	Commit string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Get returns this binary's version.
func Get() Info {
	info, _ := debug.ReadBuildInfo()
	return get(version, commit, info)
}

// get is Get for given link-time values and build info (nil when the binary
// has none).
func get(version, commit string, build *debug.BuildInfo) Info {
	i := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if build != nil {
		i.GoVersion = build.GoVersion
		if i.Version == "" && build.Main.Version != "" && build.Main.Version != "(devel)" {
			i.Version = build.Main.Version
		}
		if i.Commit == "" {
			var revision, modified string
			for _, s := range build.Settings {
				switch s.Key {
				case "vcs.revision":
					revision = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if len(revision) > 12 {
				revision = revision[:12]
			}
			if revision != "" && modified == "true" {
				revision += "-dirty"
			}
			i.Commit = revision
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// String is the version as --version prints it after the program's name:
// "v0.1.0 (commit 9ca8f52, go1.26.0)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}
