// Command realnode runs real Kubernetes nodes (kubelet, containerd,
// kube-proxy) beside the local control plane, for hack/local-up.sh and
// hack/local-down.sh; see package github.com/nereid-ml/nereid/hack/realnode.
//
// Usage: realnode apiserver-flags|up|down|import|gateway|di-mock-job [flags]
//
//	apiserver-flags  write the API server's egress configuration and kubelet
//	                 client certificate, and print its flags for real nodes,
//	                 one a line
//	up               bring the nodes up (or keep them when they run); wait
//	                 until each is Ready
//	down             stop them, remove their namespaces, cgroups and mount
//	                 points, put back the kernel settings the kubelet changed
//	import ARCHIVE…  import image archives into every real node's containerd
//	gateway          serve the cluster network's gateway (up starts it)
//	di-mock-job FILE print DI-orchestrator's di-mock-dijob.yaml as it runs on
//	                 real nodes here (realnode.DIMockJob says what changes)
//
// It needs root. It says what it does on stderr and exits 1 with the reason
// when something fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/hack/realnode"
)

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		usage()
	}
	command := os.Args[1]
	if command == "di-mock-job" {
		diMockJob(os.Args[2:])
		return
	}
	fs := flag.NewFlagSet("realnode "+command, flag.ExitOnError)
	outDir := fs.String("out-dir", os.Getenv("NEREID_OUT_DIR"), "State dir of the local control plane (default $NEREID_OUT_DIR).")
	nodes := fs.String("nodes", "", "The real nodes' names, separated by blanks.")
	labels := fs.String("labels", "", "Labels up sets on every real node once it registered: key=value,key=value.")
	edge := fs.String("edge-nodes", "", "Those of --nodes that are edge nodes, labelled node-role.kubernetes.io/edge=\"\" too, separated by blanks.")
	kubeconfig := fs.String("kubeconfig", "", "The administrator's kubeconfig (default <out-dir>/kubeconfig).")
	port := fs.Int("apiserver-port", 0, "The API server's port on 127.0.0.1 ($NEREID_APISERVER_PORT).")
	binDir := fs.String("bin-dir", os.Getenv("NEREID_BIN_DIR"), "Folder of kubelet, kube-proxy and coredns (default $NEREID_BIN_DIR).")
	imageDir := fs.String("image-dir", "", "Folder that keeps the images built here (default <bin-dir>/../images).")
	reverse := fs.String("reverse-ports", "", "Ports the gateway forwards from the host's 127.0.0.1 to the cluster network's gateway address, where the GlobalManager listens: port,port.")
	install := fs.Bool("install", false, "Install missing Debian packages with apt-get.")
	timeout := fs.Duration("ready-timeout", 2*time.Minute, "How long to wait for each process and for the nodes.")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[2:])

	if *outDir == "" {
		fatal(fmt.Errorf("--out-dir (or NEREID_OUT_DIR) is required"))
	}
	abs, err := filepath.Abs(*outDir)
	if err != nil {
		fatal(err)
	}
	o := realnode.Options{
		OutDir: abs, Nodes: strings.Fields(*nodes), EdgeNodes: strings.Fields(*edge), Kubeconfig: *kubeconfig, APIServerPort: *port,
		CAFile: filepath.Join(abs, "certs", "ca.crt"), CAKeyFile: filepath.Join(abs, "certs", "ca.key"),
		BinDir: *binDir, ImageDir: *imageDir, Install: *install, ReadyTimeout: *timeout,
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = filepath.Join(abs, "kubeconfig")
	}
	if o.ImageDir == "" && o.BinDir != "" {
		o.ImageDir = filepath.Join(filepath.Dir(o.BinDir), "images")
	}
	if o.ReversePorts, err = parsePorts(*reverse); err != nil {
		fatal(err)
	}
	if o.Labels, err = parseLabels(*labels); err != nil {
		fatal(err)
	}
	if o.Self, err = os.Executable(); err != nil {
		fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch command {
	case "apiserver-flags":
		flags, err := realnode.APIServerFlags(o)
		if err != nil {
			fatal(err)
		}
		fmt.Println(strings.Join(flags, "\n"))
	case "up":
		needPort(o)
		if err := realnode.Up(ctx, o); err != nil {
			fatal(err)
		}
	case "down":
		o.DeleteNodes = true
		if err := realnode.Down(ctx, o); err != nil {
			fatal(err)
		}
	case "import":
		if err := realnode.Import(ctx, o, fs.Args()); err != nil {
			fatal(err)
		}
	case "gateway":
		needPort(o)
		g, err := realnode.NewGateway(o)
		if err != nil {
			fatal(err)
		}
		if err := g.Run(ctx, nil); err != nil {
			fatal(err)
		}
	default:
		usage()
	}
}

func diMockJob(args []string) {
	if len(args) != 1 {
		usage()
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		fatal(err)
	}
	out, err := realnode.DIMockJobYAML(data)
	if err != nil {
		fatal(fmt.Errorf("%s: %w", args[0], err))
	}
	_, _ = os.Stdout.Write(out)
}

func needPort(o realnode.Options) {
	if o.APIServerPort <= 0 {
		fatal(fmt.Errorf("--apiserver-port is required"))
	}
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--labels: %q is not key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

func parsePorts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("--reverse-ports: %q is not a port", f)
		}
		out = append(out, p)
	}
	return out, nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: realnode apiserver-flags|up|down|import|gateway [flags] | di-mock-job FILE; realnode <command> --help for its flags")
	os.Exit(2)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "realnode:", err)
	os.Exit(1)
}
