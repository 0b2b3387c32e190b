// Command localrun gives Nereid's processes on the local control plane their
// identities and starts them, for hack/local-up.sh (see package
// github.com/nereid-ml/nereid/hack/localrun, which the integration tests use
// too). The processes outlive it; hack/local-down.sh stops them.
//
// Usage: localrun identities|start-globalmanager|start-localcontrollers|endpoints [flags]
//
//	identities              the GlobalManager's kubeconfig (the chart's ServiceAccount)
//	                        and each LocalController's token
//	start-globalmanager     start the GlobalManager; wait until it is ready
//	start-localcontrollers  start the LocalControllers; wait until each serves
//	endpoints               print what the GlobalManager serves, one a line on
//	                        stdout (the addresses its ready line states)
//
// It says what it does on stderr, as hack/local-up.sh does, and exits 1 with
// the reason (and the end of a process's log) when something fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/nereid-ml/nereid/hack/localrun"
)

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		usage()
	}
	command := os.Args[1]
	fs := flag.NewFlagSet("localrun "+command, flag.ExitOnError)
	outDir := fs.String("out-dir", os.Getenv("NEREID_OUT_DIR"), "State dir of the local control plane (default $NEREID_OUT_DIR).")
	kubeconfig := fs.String("kubeconfig", "", "The administrator's kubeconfig (default <out-dir>/kubeconfig).")
	binDir := fs.String("bin-dir", "", "Folder of the globalmanager and localcontroller binaries (default <out-dir>/bin).")
	manifests := fs.String("manifests", "build/deploy/nereid.yaml", "The chart rendered with its defaults, whose GlobalManager identity the GlobalManager gets.")
	cloud := fs.String("cloud-nodes", "cloud-0", "Cloud node names, separated by blanks.")
	edge := fs.String("edge-nodes", "edge-0 edge-1", "Edge node names, separated by blanks.")
	lcNodes := fs.String("lc-nodes", "edge", `The nodes that get a LocalController: "edge", "all" or a list of names.`)
	firstPort := fs.Int("first-port", 0, "First of the ports reserved for Nereid's processes ($NEREID_RESERVED_PORT_FIRST).")
	diServerPort := fs.Int("di-server-port", 0, "Loopback port of the GlobalManager's DIJob replicas API (v2alpha1); 0 serves none.")
	diV1ServerPort := fs.Int("di-v1-server-port", 0, "Loopback port of the GlobalManager's replicas server of v1alpha1 DIJobs' coordinators; 0 serves none.")
	realNodes := fs.String("real-nodes", "", "The real nodes hack/realnode brought up (NEREID_REAL_NODES), separated by blanks: the GlobalManager then runs in their cluster network and the LocalControllers' DaemonSet is the chart's.")
	helm := fs.String("helm", "", "The helm that renders the chart for real nodes (default <bin-dir of the tools>/helm, $NEREID_BIN_DIR/helm).")
	chart := fs.String("chart", "build/charts/nereid", "The chart whose LocalControllers real nodes run.")
	timeout := fs.Duration("ready-timeout", 2*time.Minute, "How long to wait for each process or Pod.")
	_ = fs.Parse(os.Args[2:])

	var step func(*localrun.Run, context.Context) error
	switch command {
	case "identities":
		step = (*localrun.Run).EnsureIdentities
	case "start-globalmanager":
		step = (*localrun.Run).StartGlobalManager
	case "start-localcontrollers":
		step = (*localrun.Run).StartLocalControllers
	case "endpoints":
		step = func(r *localrun.Run, _ context.Context) error {
			for _, e := range r.Endpoints() {
				fmt.Println(e)
			}
			return nil
		}
	default:
		usage()
	}
	if *outDir == "" || *firstPort == 0 {
		fatal(errors.New("-out-dir and -first-port are required"))
	}
	if *kubeconfig == "" {
		*kubeconfig = filepath.Join(*outDir, "kubeconfig")
	}
	if *binDir == "" {
		*binDir = filepath.Join(*outDir, "bin")
	}
	nodes, err := localrun.ParseNodes(*cloud, *edge, *lcNodes)
	if err != nil {
		fatal(err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fatal(err)
	}
	run := &localrun.Run{OutDir: *outDir, BinDir: *binDir, Manifests: *manifests, Admin: admin, Nodes: nodes,
		FirstPort: *firstPort, DIServerPort: *diServerPort, DIV1ServerPort: *diV1ServerPort, ReadyTimeout: *timeout, Logf: logf}
	if strings.TrimSpace(*realNodes) != "" {
		if run.Real, err = localrun.ReadRealCluster(*outDir); err != nil {
			fatal(err)
		} else if run.Real == nil {
			fatal(fmt.Errorf("--real-nodes=%q, but hack/realnode wrote no %s", *realNodes, localrun.RealClusterFile(*outDir)))
		}
		run.Chart, run.Helm = *chart, *helm
		if run.Helm == "" {
			run.Helm = filepath.Join(os.Getenv("NEREID_BIN_DIR"), "helm")
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := step(run, ctx); err != nil {
		var pe *localrun.ProcessError
		if errors.As(err, &pe) {
			failProcess(*outDir, pe)
		}
		fatal(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localrun identities|start-globalmanager|start-localcontrollers|endpoints [flags] (-h lists the flags)")
	os.Exit(2)
}

// logf, fatal and failProcess write as hack/lib/init.sh's nereid::log and
// nereid::fatal, and process.sh's nereid::process::fail_component.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func fatal(err error) {
	logf("ERROR: %v", err)
	os.Exit(1)
}

func failProcess(outDir string, e *localrun.ProcessError) {
	logf("ERROR: %v", e)
	fmt.Fprintf(os.Stderr, "  log: %s\n", e.LogPath)
	if info, err := os.Stat(e.LogPath); err == nil && info.Size() > 0 {
		fmt.Fprintf(os.Stderr, "--- last 20 lines of %s ---\n", e.LogPath)
		for _, line := range strings.Split(strings.TrimRight(localrun.Tail(e.LogPath, 20), "\n"), "\n") {
			fmt.Fprintf(os.Stderr, "    %s\n", line)
		}
		fmt.Fprintln(os.Stderr, "---")
	}
	fmt.Fprintf(os.Stderr, "  stop what is left with: NEREID_OUT_DIR=%s hack/local-down.sh\n", outDir)
	os.Exit(1)
}
