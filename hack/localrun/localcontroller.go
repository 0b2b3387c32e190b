package localrun

import (
	"context"
	"strconv"
	"time"
)

// LocalController is the command line of a LocalController process.
type LocalController struct {
	// Node is the node it serves.
	Node string
	// Hub is its GlobalManager's edge hub (host:port), and CAFile the CA it
	// trusts there.
	Hub, CAFile string
	// TokenFile proves its node: a token bound to its node's Pod of the
	// LocalControllers' DaemonSet (EdgeDaemonSet.Identities).
	TokenFile string
	// WorkerAddress serves the worker API (LC_SERVER); HealthAddress serves
	// /healthz and /metrics.
	WorkerAddress, HealthAddress string
	// DataDir holds its store, which outlives a restart.
	DataDir string
	// NodeRoot is the node's root filesystem as it sees it: Dataset and
	// Model URLs are paths under it.
	NodeRoot string
	// DatasetPollPeriod is how often it counts Datasets' samples; 0 leaves
	// the default.
	DatasetPollPeriod time.Duration
	// Verbosity is klog's -v; 0 leaves the default.
	Verbosity int
	// Extra flags go last, so that they win over the ones above.
	Extra []string
}

// Args is the LocalController's command line.
func (l LocalController) Args() []string {
	args := []string{"--node-name=" + l.Node, "--gm-address=" + l.Hub, "--ca-file=" + l.CAFile, "--token-file=" + l.TokenFile,
		"--worker-address=" + l.WorkerAddress, "--health-address=" + l.HealthAddress,
		"--data-dir=" + l.DataDir, "--node-root=" + l.NodeRoot}
	if l.DatasetPollPeriod > 0 {
		args = append(args, "--dataset-poll-period="+l.DatasetPollPeriod.String())
	}
	if l.Verbosity > 0 {
		args = append(args, "-v="+strconv.Itoa(l.Verbosity))
	}
	return append(args, l.Extra...)
}

// HealthURL is where it serves /healthz and /metrics.
func (l LocalController) HealthURL() string { return "http://" + l.HealthAddress }

// WorkerURL is its LC_SERVER: where workers post.
func (l LocalController) WorkerURL() string { return "http://" + l.WorkerAddress }

// WaitForLocalController waits until lc, running l, serves /healthz.
func WaitForLocalController(ctx context.Context, lc *Process, l LocalController, timeout time.Duration) error {
	return lc.WaitReady(ctx, timeout, "/healthz on "+l.HealthAddress, func(ctx context.Context) bool {
		return answersOK(ctx, l.HealthURL()+"/healthz")
	})
}
