// Package command holds what Nereid's commands share around their real work:
// their flags' --help and --version, running until SIGINT or SIGTERM, and
// exiting with a logged reason.
package command

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/pkg/version"
)

// Exit prints a usage error (a bad flag, a missing setting) and exits 2.
func Exit(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(2)
}

// Run logs which build of the command starts (its first log line), then
// calls run with a context cancelled on SIGINT or SIGTERM, so the command
// shuts down gracefully, and exits 1 with the error logged when run fails.
func Run(what string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	v := version.Get()
	klog.FromContext(ctx).Info("Starting "+what, "version", v.Version, "commit", v.Commit, "go", v.GoVersion)
	err := run(ctx)
	stop()
	if err != nil {
		klog.ErrorS(err, what+" stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// SplitList splits a comma-separated flag value, trimming spaces and dropping
// empty items.
func SplitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Given reports whether flag name was set on fs, on the command line or by
// fs.Set (a configuration file).
func Given(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
