// Package nodes is `kubectl nereid nodes`: a row per node with its edge
// link (from the hub's Lease), when the cloud last heard from it, how full
// its LocalController's outbox is, and the Nereid objects, workers and jobs
// on it. With -o json it prints view.Snapshot.
package nodes

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
	"github.com/nereid-ml/nereid/pkg/plugin/view/printer"
)

// Command is kubectl nereid nodes.
var Command = printer.SnapshotCommand("nodes",
	"Each node's edge link, last heard, outbox, and the objects, workers and jobs on it.",
	"nodes [-n <namespace> | -A] [-o json]\n\n"+
		"Prints a row per node: NODE LINK LAST-HEARD OUTBOX OBJECTS WORKERS JOBS. LINK is the edge\n"+
		"hub's (connected, disconnected; unknown for an edge node no LocalController ever connected\n"+
		"from); OBJECTS, WORKERS and JOBS count what is on the node in the namespace (-A: in all).", Render)

// maxJobs is how many jobs a row names before it counts the others.
const maxJobs = 3

// Render prints which namespace was read, snap's nodes as kubectl nereid
// nodes does, ages as of snap.Taken, then the notes of what could not be
// read.
func Render(w io.Writer, snap *view.Snapshot) error {
	// The nodes are the cluster's, what is on them the namespace's: say
	// which, or a quiet namespace reads as an idle fleet.
	if snap.Namespace != "" {
		fmt.Fprintf(w, "Objects, workers and jobs in %s (-A: in every namespace).\n", view.Scope(snap.Namespace))
	} else {
		fmt.Fprintln(w, "Objects, workers and jobs in every namespace.")
	}
	if len(snap.Nodes) == 0 {
		fmt.Fprintln(w, "No nodes.")
	} else {
		t := printer.NewTable(w)
		fmt.Fprintln(t, "NODE\tLINK\tLAST-HEARD\tOUTBOX\tOBJECTS\tWORKERS\tJOBS")
		for _, n := range snap.Nodes {
			printer.Row(t, n.Name, n.Link, printer.Age(n.LastHeard, snap.Taken), outbox(n.Outbox),
				strconv.Itoa(n.Objects), strconv.Itoa(len(n.Workers)), jobs(n.Jobs))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	if len(snap.Notes) > 0 {
		fmt.Fprintf(w, "\nNotes:\n  %s\n", strings.Join(snap.Notes, "\n  "))
	}
	return nil
}

// outbox is the fill's percent ("3%" of "3% (30/1000 reports, ...)").
func outbox(fill string) string {
	percent, _, _ := strings.Cut(fill, " ")
	return percent
}

// jobs names the first maxJobs jobs, "<kind>/<namespace>/<name>", and
// counts the others.
func jobs(refs []string) string {
	if len(refs) <= maxJobs {
		return strings.Join(refs, ",")
	}
	return fmt.Sprintf("%s +%d more", strings.Join(refs[:maxJobs], ","), len(refs)-maxJobs)
}
