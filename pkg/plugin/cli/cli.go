// Package cli is the frame of kubectl-nereid's subcommands: each is a
// Command with its own flag set, and every one that reads the cluster takes
// kubectl's own --kubeconfig, --context and -n/--namespace (KubeFlags), so
// that `kubectl nereid` sees the cluster as the user's kubectl does, with
// the user's own credentials and nothing more.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nereid-ml/nereid/internal/command"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
)

// Command is one subcommand of kubectl nereid.
type Command struct {
	// Name is the word after `kubectl nereid`.
	Name string
	// Summary is its line in `kubectl nereid --help`.
	Summary string
	// Run parses args (the words after the name) with a flag set of its
	// own and runs the command until it is done or ctx ends.
	Run func(ctx context.Context, env *Env, args []string) error
}

// Env is where a command writes.
type Env struct {
	Stdout, Stderr io.Writer
}

// NewFlagSet is a subcommand's flag set: it returns its errors (the caller
// exits 2 on them), and its --help prints usage, a line per argument, then
// the flags.
func NewFlagSet(env *Env, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet("nereid "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: kubectl nereid %s\n\nFlags:\n", usage)
		command.PrintFlags(fs)
	}
	return fs
}

// KubeFlags are kubectl's flags for which cluster, as whom, in which
// namespace.
type KubeFlags struct {
	Kubeconfig, Context, Namespace string
	AllNamespaces                  bool
}

// AddKubeFlags adds --kubeconfig, --context, -n/--namespace and
// -A/--all-namespaces to fs.
func AddKubeFlags(fs *flag.FlagSet) *KubeFlags {
	k := &KubeFlags{}
	fs.StringVar(&k.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config), as kubectl.")
	fs.StringVar(&k.Context, "context", "", "The kubeconfig context to use (default: its current context).")
	fs.StringVar(&k.Namespace, "namespace", "", "The namespace (default: the context's, else default).")
	fs.StringVar(&k.Namespace, "n", "", "Short for --namespace.")
	fs.BoolVar(&k.AllNamespaces, "all-namespaces", false, "Every namespace the user may read.")
	fs.BoolVar(&k.AllNamespaces, "A", false, "Short for --all-namespaces.")
	return k
}

// Clients are the API clients a command reads with, as the user.
type Clients struct {
	Config  *rest.Config
	Kube    kubernetes.Interface
	Nereid  nereidclient.Interface
	Dynamic dynamic.Interface
	// Namespace is the namespace to read: --namespace, else the
	// context's, else "default"; "" with --all-namespaces.
	Namespace string
}

// Clients builds the clients from the kubeconfig the flags name, as
// kubectl loads it.
func (k *KubeFlags) Clients() (*Clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.Kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.Context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-nereid"
	ns := k.Namespace
	if ns == "" {
		if ns, _, err = loader.Namespace(); err != nil {
			return nil, fmt.Errorf("reading the context's namespace: %w", err)
		}
	}
	if k.AllNamespaces {
		ns = ""
	}
	c := &Clients{Config: cfg, Namespace: ns}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Nereid, err = nereidclient.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// UsageError is a bad flag or argument: the command exits 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Parse parses args with fs; a bad flag is a UsageError, --help is
// flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && err != flag.ErrHelp {
		return &UsageError{Err: err}
	}
	return err
}

// NoArgs is a UsageError when fs was given arguments besides its flags.
func NoArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return &UsageError{Err: fmt.Errorf("unexpected arguments %q: this command takes only flags", fs.Args())}
	}
	return nil
}
