package nodes

import (
	"strings"
	"testing"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
	"github.com/nereid-ml/nereid/pkg/plugin/view/golden"
	"github.com/nereid-ml/nereid/pkg/plugin/view/viewtest"
)

// A row per node: its link, last heard, outbox fill, and what is on it
// (testdata/*.golden; go test -update rewrites them).
func TestRenderIsARowPerNode(t *testing.T) {
	many := viewtest.Snapshot()
	many.Nodes = many.Nodes[:1]
	many.Nodes[0].Jobs = []string{"DIJob/a/1", "DIJob/a/2", "DIJob/a/3", "DIJob/a/4", "DIJob/a/5"}
	many.Notes = nil
	all := viewtest.Snapshot()
	all.Namespace = ""
	for name, snap := range map[string]*view.Snapshot{
		"nodes":          viewtest.Snapshot(),
		"many-jobs":      many,
		"no-nodes":       {Taken: viewtest.Now, Namespace: "demo", Notes: []string{"You may not list nodes."}},
		"all-namespaces": all,
	} {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			if err := Render(&out, snap); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, name, out.String())
		})
	}
}
