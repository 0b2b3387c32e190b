// Package rounds is `kubectl nereid rounds <kind>/<name>`: a job's rounds
// per node, as view.ReadRounds reads them (a federated learning job's last
// report from each edge node; a learning cycle's rounds), in a table with a
// column per numeric metric. With -o json it prints view.Rounds.
package rounds

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nereid-ml/nereid/pkg/plugin/cli"
	"github.com/nereid-ml/nereid/pkg/plugin/view"
	"github.com/nereid-ml/nereid/pkg/plugin/view/printer"
)

// Command is kubectl nereid rounds.
var Command = cli.Command{
	Name:    "rounds",
	Summary: "A federated or learning-cycle job's rounds per node, with their metrics.",
	Run:     run,
}

func run(ctx context.Context, env *cli.Env, args []string) error {
	fs := cli.NewFlagSet(env, "rounds", "rounds <kind>/<name> | <kind> <name> [-n <namespace>] [-o json]\n\n"+
		"<kind> is any name kubectl takes for a job kind with rounds: fl or federatedlearningjob,\n"+
		"il or incrementallearningjob, ll or lifelonglearningjob. Prints NODE ROUND STAGE STATE TIME\n"+
		"and a column per numeric metric: for a federated learning job, a row per edge node (its\n"+
		"last report; TIME is how long ago it was applied); for a learning cycle, a row per round\n"+
		"(the dataset's node; TIME how long ago the round ended, or the current round last moved).")
	kube := cli.AddKubeFlags(fs)
	output := printer.AddOutputFlag(fs)
	words, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	kind, name, err := jobOf(words)
	if err != nil {
		return err
	}
	if kube.AllNamespaces {
		return &cli.UsageError{Err: errors.New("-A/--all-namespaces: rounds reads one job; name its namespace with -n")}
	}
	clients, err := kube.Clients()
	if err != nil {
		return err
	}
	r, err := view.ReadRounds(ctx, clients, kind, clients.Namespace, name)
	if err != nil {
		return err
	}
	if *output == printer.JSON {
		return printer.PrintJSON(env.Stdout, r)
	}
	return Render(env.Stdout, r, time.Now())
}

// jobOf reads the job the words name: "<kind>/<name>" or "<kind> <name>".
func jobOf(words []string) (kind, name string, err error) {
	switch {
	case len(words) == 1 && strings.Count(words[0], "/") == 1:
		kind, name, _ = strings.Cut(words[0], "/")
	case len(words) == 2 && !strings.Contains(words[0], "/"):
		kind, name = words[0], words[1]
	default:
		return "", "", &cli.UsageError{Err: fmt.Errorf("want one job, <kind>/<name> or <kind> <name> (fl/surface-defect-detection), not %q", words)}
	}
	if kind == "" || name == "" {
		return "", "", &cli.UsageError{Err: fmt.Errorf("%q: want <kind>/<name>, both non-empty", strings.Join(words, " "))}
	}
	return kind, name, nil
}

// parseInterspersed parses args with fs as kubectl does, flags before,
// between and after the words, and returns the words; after "--" every
// argument is a word.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := cli.Parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return words, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(words, rest...), nil
		}
		words = append(words, rest[0])
		args = rest[1:]
	}
}

// Render prints r as kubectl nereid rounds does, times as ages at now.
func Render(w io.Writer, r *view.Rounds, now time.Time) error {
	fmt.Fprintf(w, "%s %s/%s\n", r.Kind, r.Namespace, r.Name)
	if len(r.Points) == 0 {
		fmt.Fprintln(w, "No rounds reported yet.")
		return nil
	}
	t := printer.NewTable(w)
	header := []string{"NODE", "ROUND", "STAGE", "STATE", "TIME"}
	for _, m := range r.Metrics {
		header = append(header, strings.ToUpper(m))
	}
	fmt.Fprintln(t, strings.Join(header, "\t"))
	for _, p := range r.Points {
		row := []string{p.Node, fmt.Sprint(p.Round), p.Stage, p.State, printer.Age(p.Time, now)}
		for _, m := range r.Metrics {
			v, ok := p.Metrics[m]
			if !ok {
				row = append(row, "")
				continue
			}
			row = append(row, printer.Number(v))
		}
		printer.Row(t, row...)
	}
	return t.Flush()
}
