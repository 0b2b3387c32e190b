// Command kubectl-nereid is the kubectl plugin of Nereid: copied onto PATH,
// it is `kubectl nereid`, as krew installs plugins. Each subcommand reads
// the cluster with the user's own kubeconfig (kubectl's --kubeconfig,
// --context, -n), so it shows exactly what the user may see.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nereid-ml/nereid/pkg/plugin/cli"
	"github.com/nereid-ml/nereid/pkg/plugin/dashboard"
	"github.com/nereid-ml/nereid/pkg/plugin/nodes"
	"github.com/nereid-ml/nereid/pkg/plugin/playworker"
	"github.com/nereid-ml/nereid/pkg/plugin/rounds"
	"github.com/nereid-ml/nereid/pkg/plugin/status"
	"github.com/nereid-ml/nereid/pkg/version"
)

// commands are kubectl nereid's subcommands, in the order --help lists them.
var commands = []cli.Command{
	status.Command,
	nodes.Command,
	rounds.Command,
	playworker.Command(),
	dashboard.Command,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, &cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// Exit codes: 0 done, 1 the command failed, 2 bad usage.
func run(ctx context.Context, env *cli.Env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	args = commandFirst(args)
	if args[0] == "--version" || args[0] == "version" {
		fmt.Fprintln(env.Stdout, "kubectl-nereid "+version.Get().String())
		return 0
	}
	for _, c := range commands {
		if c.Name != args[0] {
			continue
		}
		err := c.Run(ctx, env, args[1:])
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, new(*cli.UsageError)):
			fmt.Fprintf(env.Stderr, "kubectl nereid %s: %v\n", c.Name, err)
			return 2
		default:
			fmt.Fprintf(env.Stderr, "kubectl nereid %s: %v\n", c.Name, err)
			return 1
		}
	}
	fmt.Fprintf(env.Stderr, "kubectl nereid: unknown command %q\n\n", args[0])
	usage(env.Stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, "kubectl nereid shows Nereid's edge fleet and jobs as the current kubeconfig's user sees them.\n\nUsage: kubectl nereid <command> [flags]   (kubectl nereid <command> --help for its flags)\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.Name, c.Summary)
	}
	fmt.Fprint(w, "  version      Print the plugin's version.\n")
}

// valueFlags are the flags every command takes that are followed by a value
// when given without "=".
var valueFlags = map[string]bool{"n": true, "namespace": true, "kubeconfig": true, "context": true, "o": true, "output": true}

// commandFirst moves the command's name before the flags given ahead of it,
// so that `kubectl nereid -n demo status` is `kubectl nereid status -n demo`:
// kubectl hands a plugin its words as they were typed.
func commandFirst(args []string) []string {
	for i := 0; i < len(args); i++ {
		name, isFlag := strings.CutPrefix(args[i], "-")
		if !isFlag {
			if i == 0 {
				return args
			}
			return append(append([]string{args[i]}, args[:i]...), args[i+1:]...)
		}
		name = strings.TrimPrefix(name, "-")
		if name == "h" || name == "help" || name == "version" {
			return args
		}
		if !strings.Contains(name, "=") && valueFlags[name] {
			i++
		}
	}
	return args
}
