package rounds

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
	"github.com/nereid-ml/nereid/pkg/plugin/view/golden"
	"github.com/nereid-ml/nereid/pkg/plugin/view/viewtest"
)

// A row per point and a column per metric (testdata/*.golden; go test
// -update rewrites them).
func TestRenderIsARowPerPointAndAColumnPerMetric(t *testing.T) {
	for name, r := range map[string]*view.Rounds{
		"federated": viewtest.FederatedRounds(),
		"cycle":     viewtest.CycleRounds(),
		"none":      {Kind: "FederatedLearningJob", Namespace: "demo", Name: "new", Points: []view.Point{}, Metrics: []string{}},
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			if err := Render(&out, r, viewtest.Now); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, name, out.String())
		})
	}
}

// The job is <kind>/<name> or <kind> <name>, with flags anywhere.
func TestTheJobIsNamedAsKubectlNamesIt(t *testing.T) {
	for name, tc := range map[string]struct {
		args                      []string
		wantKind, wantName, wantN string
		wantErr                   string
	}{
		"slash":             {args: []string{"fl/surface", "-n", "demo"}, wantKind: "fl", wantName: "surface", wantN: "demo"},
		"two words":         {args: []string{"-n", "demo", "il", "helmet"}, wantKind: "il", wantName: "helmet", wantN: "demo"},
		"flags between":     {args: []string{"il", "-n=demo", "helmet"}, wantKind: "il", wantName: "helmet", wantN: "demo"},
		"after dashes":      {args: []string{"-n", "demo", "--", "fl", "-x"}, wantKind: "fl", wantName: "-x", wantN: "demo"},
		"no job":            {args: []string{"-n", "demo"}, wantErr: "want one job"},
		"three words":       {args: []string{"fl", "a", "b"}, wantErr: "want one job"},
		"an empty name":     {args: []string{"fl/"}, wantErr: `"fl/": want <kind>/<name>, both non-empty`},
		"a slash and words": {args: []string{"fl/a", "b"}, wantErr: "want one job"},
		"a bad flag":        {args: []string{"fl/a", "--nope"}, wantErr: "flag provided but not defined: -nope"},
	} {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("rounds", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			ns := fs.String("n", "", "")
			words, err := parseInterspersed(fs, tc.args)
			var kind, job string
			if err == nil {
				kind, job, err = jobOf(words)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{tc.wantKind, tc.wantName, tc.wantN}, []string{kind, job, *ns}); diff != "" {
				t.Errorf("kind, name, namespace (-want,+got):\n%s", diff)
			}
		})
	}
}
