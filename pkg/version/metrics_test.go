package version

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfoSaysTheVersionRevisionAndGoVersion(t *testing.T) {
	c := buildInfo(Info{Version: "v0.1.0", Commit: "9ca8f52", GoVersion: "go1.26.0"})
	want := `
# HELP nereid_build_info A metric with a constant 1 whose labels say which build of Nereid this is: its version, the git revision it was built from and the Go toolchain that built it.
# TYPE nereid_build_info gauge
nereid_build_info{go_version="go1.26.0",revision="9ca8f52",version="v0.1.0"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), BuildInfoName); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.CollectAndLint(BuildInfoCollector()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
