package printer

import (
	"context"
	"io"

	"github.com/nereid-ml/nereid/pkg/plugin/cli"
	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// SnapshotCommand is a command that reads the fleet and the jobs
// (view.Read) and prints them: with -o json the Snapshot, else as render
// lays it out. usage is its --help's usage line and description.
func SnapshotCommand(name, summary, usage string, render func(io.Writer, *view.Snapshot) error) cli.Command {
	run := func(ctx context.Context, env *cli.Env, args []string) error {
		fs := cli.NewFlagSet(env, name, usage)
		kube := cli.AddKubeFlags(fs)
		output := AddOutputFlag(fs)
		if err := cli.Parse(fs, args); err != nil {
			return err
		}
		if err := cli.NoArgs(fs); err != nil {
			return err
		}
		clients, err := kube.Clients()
		if err != nil {
			return err
		}
		snap, err := view.Read(ctx, clients)
		if err != nil {
			return err
		}
		if *output == JSON {
			return PrintJSON(env.Stdout, snap)
		}
		return render(env.Stdout, snap)
	}
	return cli.Command{Name: name, Summary: summary, Run: run}
}
