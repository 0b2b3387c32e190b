// Package status is `kubectl nereid status`: the edge fleet in a line (how
// many of its nodes are connected, which are not), a table of every job
// with its phase, progress and age, what each waiting job lacks, and what
// could not be read. With -o json it prints view.Snapshot.
package status

import (
	"fmt"
	"io"
	"strings"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
	"github.com/nereid-ml/nereid/pkg/plugin/view/printer"
)

// Command is kubectl nereid status.
var Command = printer.SnapshotCommand("status",
	"The edge fleet's links and every Nereid job: phase, progress, what it waits for.",
	"status [-n <namespace> | -A] [-o json]\n\n"+
		"Prints how many edge nodes are connected, a table of the jobs in the namespace\n"+
		"(NAMESPACE KIND NAME PHASE PROGRESS WAITING AGE), then what each waiting job lacks.", Render)

// Render prints snap as kubectl nereid status does, ages as of snap.Taken.
func Render(w io.Writer, snap *view.Snapshot) error {
	fmt.Fprintln(w, Fleet(snap.Nodes))
	fmt.Fprintln(w)
	if len(snap.Jobs) == 0 {
		fmt.Fprintln(w, "No jobs.")
	} else {
		t := printer.NewTable(w)
		fmt.Fprintln(t, "NAMESPACE\tKIND\tNAME\tPHASE\tPROGRESS\tWAITING\tAGE")
		for _, j := range snap.Jobs {
			printer.Row(t, j.Namespace, j.Kind, j.Name, j.Phase, j.Progress, waitingWord(j.Waiting), printer.Age(&j.Created, snap.Taken))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	var waiting []string
	for _, j := range snap.Jobs {
		if j.Waiting != "" {
			waiting = append(waiting, fmt.Sprintf("  %s %s/%s: %s", j.Kind, j.Namespace, j.Name, j.Waiting))
		}
	}
	section(w, "Waiting:", waiting)
	notes := make([]string, len(snap.Notes))
	for i, n := range snap.Notes {
		notes[i] = "  " + n
	}
	section(w, "Notes:", notes)
	return nil
}

func section(w io.Writer, title string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s\n%s\n", title, strings.Join(lines, "\n"))
}

// waitingWord is the reason of what a job waits for: its condition's, or
// its unscheduled pod's ("pod <name> <reason>: <message>").
func waitingWord(waiting string) string {
	f := strings.Fields(waiting)
	if len(f) > 2 && f[0] == "pod" {
		return strings.TrimSuffix(f[2], ":")
	}
	reason, _, _ := strings.Cut(waiting, ":")
	return reason
}

// Fleet is the fleet in a line: of the nodes that are edge nodes or have a
// link Lease, how many are connected, and which are not; "none seen" when
// there are none (or the user may list neither Nodes nor Leases).
func Fleet(nodes []view.Node) string {
	var total, connected int
	var down []string
	for _, n := range nodes {
		if !n.Edge && (n.Link == "" || n.Link == view.LinkUnknown) {
			continue // no edge node, no link Lease
		}
		total++
		if n.Link == view.LinkConnected {
			connected++
		} else {
			down = append(down, n.Name+" ("+n.Link+")")
		}
	}
	if total == 0 {
		// No Node labelled edge and no link Lease: none, or none the
		// user may see (the notes say which).
		return "Edge nodes: none seen"
	}
	line := fmt.Sprintf("Edge nodes: %d/%d connected", connected, total)
	if len(down) > 0 {
		line += "; not connected: " + strings.Join(down, ", ")
	}
	return line
}
