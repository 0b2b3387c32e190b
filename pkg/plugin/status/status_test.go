package status

import (
	"strings"
	"testing"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
	"github.com/nereid-ml/nereid/pkg/plugin/view/golden"
	"github.com/nereid-ml/nereid/pkg/plugin/view/viewtest"
)

// The status is the fleet's line, the jobs' table, the waiting jobs and
// the notes (testdata/*.golden; go test -update rewrites them).
func TestRenderShowsTheFleetTheJobsAndWhatTheyWaitFor(t *testing.T) {
	for name, snap := range map[string]*view.Snapshot{
		"status":  viewtest.Snapshot(),
		"no-jobs": {Taken: viewtest.Now, Nodes: viewtest.Snapshot().Nodes[:2]},
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

// The fleet counts the edge nodes and the nodes with a link, and names
// those not connected.
func TestFleetNamesTheNodesNotConnected(t *testing.T) {
	for name, tc := range map[string]struct {
		nodes []view.Node
		want  string
	}{
		"none":                  {nil, "Edge nodes: none seen"},
		"only nodes of no link": {[]view.Node{{Name: "w", Link: view.LinkUnknown, Workers: []string{"demo/p"}}}, "Edge nodes: none seen"},
		"all connected": {[]view.Node{{Name: "a", Link: view.LinkConnected, Edge: true}, {Name: "cloud", Link: view.LinkUnknown}},
			"Edge nodes: 1/1 connected"},
		"a cloud node with a link counts": {[]view.Node{{Name: "cloud", Link: view.LinkDisconnected}},
			"Edge nodes: 0/1 connected; not connected: cloud (disconnected)"},
		"an edge node never connected": {[]view.Node{{Name: "a", Link: view.LinkUnknown, Edge: true}, {Name: "b", Link: view.LinkConnected, Edge: true}},
			"Edge nodes: 1/2 connected; not connected: a (unknown)"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Fleet(tc.nodes); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
