package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/hack/localrun"
	"github.com/nereid-ml/nereid/hack/realnode/netns"
)

// Options are what Up and Down need of the local control plane.
type Options struct {
	// OutDir is the control plane's state dir.
	OutDir string
	// Nodes are the real nodes' names.
	Nodes []string
	// Labels are set on every real node once it registered (a kubelet may
	// not set node-role labels on itself).
	Labels map[string]string
	// EdgeNodes are those of Nodes that are edge nodes: they get the label
	// node-role.kubernetes.io/edge="" too.
	EdgeNodes []string
	// Kubeconfig is the administrator's.
	Kubeconfig string
	// APIServerPort is the API server's port on the host's loopback.
	APIServerPort int
	// CAFile and CAKeyFile are the cluster's CA.
	CAFile, CAKeyFile string
	// BinDir holds kubelet, kube-proxy and coredns (hack/build-tools.sh).
	BinDir string
	// ImageDir is where images built here are kept between runs.
	ImageDir string
	// Self is this program's binary: the Gateway is its gateway command.
	Self string
	// Install lets EnsureHost install missing packages with apt.
	Install bool
	// ReadyTimeout bounds the wait for each process and for the nodes.
	ReadyTimeout time.Duration
	// ReversePorts are forwarded by the Gateway from the host's loopback to
	// the cluster network's gateway address (see localrun.RealCluster).
	ReversePorts []int
	// DeleteNodes has Down delete the nodes' Node objects (while the API
	// server still answers).
	DeleteNodes bool
}

// process names (pid files under the out dir) of the real nodes' processes.
func gatewayProcess() string                 { return "real-gateway" }
func corednsProcess() string                 { return "real-coredns" }
func nodeProcess(node, daemon string) string { return "real-" + node + "-" + daemon }
func (o Options) logFile(name string) string { return filepath.Join(o.OutDir, "logs", name+".log") }
func (o Options) pidFile(name string) string { return filepath.Join(o.OutDir, "pids", name+".pid") }
func (o Options) server(l Layout) string {
	return "https://" + l.GatewayIP().String() + ":" + strconv.Itoa(o.APIServerPort)
}

// APIServerFlags are the API server's flags for a run with real nodes, and
// the files they name, which it writes: the "kubernetes" Service's endpoint
// is the gateway (pods reach the API server through it), the API server
// reaches nodes and pods through the Gateway's egress proxy, by their
// InternalIP, as kube-apiserver-kubelet-client.
func APIServerFlags(o Options) ([]string, error) {
	l, err := NewLayout(o.OutDir, o.Nodes)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(l.Dir(), 0o755); err != nil {
		return nil, err
	}
	egress := filepath.Join(l.Dir(), "egress-selector.yaml")
	if err := os.WriteFile(egress, []byte(fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %[1]s
- name: controlplane
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %[1]s
`, l.EgressSocket())), 0o644); err != nil {
		return nil, err
	}
	ca, err := LoadCA(o.CAFile, o.CAKeyFile)
	if err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(l.Dir(), "kubelet-client.crt"), filepath.Join(l.Dir(), "kubelet-client.key")
	if _, err := os.Stat(certFile); err != nil {
		cert, key, err := ca.ClientCert(kubeletClientUser)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(keyFile, key, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(certFile, cert, 0o644); err != nil {
			return nil, err
		}
	}
	return []string{
		"--advertise-address=" + l.GatewayIP().String(),
		"--endpoint-reconciler-type=lease",
		"--egress-selector-config-file=" + egress,
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + certFile,
		"--kubelet-client-key=" + keyFile,
	}, nil
}

// Up brings the real nodes up, or, when every process of theirs still runs,
// leaves them as they are; it returns once each node is Ready and carries
// its labels.
func Up(ctx context.Context, o Options) error {
	l, err := NewLayout(o.OutDir, o.Nodes)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	if err := EnsureHost(ctx, o.Install); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if !allRunning(o, l) {
		logger.Info("Starting real nodes", "nodes", o.Nodes)
		if err := Down(ctx, o); err != nil {
			return fmt.Errorf("clearing what an earlier run left: %w", err)
		}
		if err := start(ctx, o, l, kube); err != nil {
			return err
		}
	} else {
		logger.Info("Real nodes already running", "nodes", o.Nodes)
	}
	return waitNodes(ctx, o, kube)
}

// allRunning says whether every process of the real nodes runs.
func allRunning(o Options, l Layout) bool {
	names := []string{gatewayProcess(), corednsProcess()}
	for _, n := range l.Nodes {
		names = append(names, nodeProcess(n, "containerd"), nodeProcess(n, "kubelet"), nodeProcess(n, "kube-proxy"))
	}
	for _, n := range names {
		if !localrun.Running(o.pidFile(n), o.OutDir) {
			return false
		}
	}
	return netnsExists(l.ClusterNetns())
}

// start makes everything of the nodes, in the order each needs the other.
func start(ctx context.Context, o Options, l Layout, kube kubernetes.Interface) error {
	if err := os.MkdirAll(l.Dir(), 0o755); err != nil {
		return err
	}
	if err := saveSysctls(l); err != nil {
		return err
	}
	cluster := localrun.RealCluster{Nodes: l.Nodes, Edge: o.EdgeNodes, Netns: NetnsPath(l.ClusterNetns()),
		NodeNetns: map[string]string{}, GatewayIP: l.GatewayIP().String(), ReversePorts: o.ReversePorts}
	for i, n := range l.Nodes {
		cluster.NodeNetns[n] = NetnsPath(l.NodeNetns(i))
	}
	if err := cluster.Write(o.OutDir); err != nil {
		return err
	}
	if err := applyRBAC(ctx, kube); err != nil {
		return err
	}
	if err := writeIdentities(o, l); err != nil {
		return err
	}
	pause, err := pauseArchive(ctx, o.ImageDir)
	if err != nil {
		return err
	}
	for _, cg := range append([]string{l.ClusterCgroup()}, nodeDaemonCgroups(l)...) {
		if err := makeCgroup(cg); err != nil {
			return err
		}
	}
	if err := setUpNetwork(ctx, l); err != nil {
		return err
	}
	if err := startGateway(ctx, o, l); err != nil {
		return err
	}
	if err := startCoreDNS(ctx, o, l); err != nil {
		return err
	}
	for i := range l.Nodes {
		if err := startNode(ctx, o, l, i, pause); err != nil {
			return err
		}
	}
	return nil
}

func nodeDaemonCgroups(l Layout) []string {
	var out []string
	for i := range l.Nodes {
		out = append(out, l.NodeCgroup(i)+"/daemons")
	}
	return out
}

// writeIdentities writes the kubeconfigs of the nodes' kubelets and
// kube-proxies and of CoreDNS, each with a certificate of its own.
func writeIdentities(o Options, l Layout) error {
	ca, err := LoadCA(o.CAFile, o.CAKeyFile)
	if err != nil {
		return err
	}
	server := o.server(l)
	for i, n := range l.Nodes {
		if err := ca.WriteKubeconfig(filepath.Join(l.NodeDir(i), "kubelet.kubeconfig"), server, "system:node:"+n, "system:nodes"); err != nil {
			return err
		}
		if err := ca.WriteKubeconfig(filepath.Join(l.NodeDir(i), "kube-proxy.kubeconfig"), server, "system:kube-proxy"); err != nil {
			return err
		}
	}
	conf, kc := corednsFiles(l)
	if err := ca.WriteKubeconfig(kc, server, corednsUser); err != nil {
		return err
	}
	return os.WriteFile(conf, []byte(corefile(kc)), 0o644)
}

// applyRBAC grants CoreDNS its reads and the API server its kubelet access.
func applyRBAC(ctx context.Context, kube kubernetes.Interface) error {
	role, binding := corednsRBAC()
	rbac := kube.RbacV1()
	for _, b := range []func() error{
		func() error { _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); return err },
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := rbac.ClusterRoleBindings().Create(ctx, kubeletClientRBAC(), metav1.CreateOptions{})
			return err
		},
	} {
		if err := b(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("granting the real nodes' RBAC: %w", err)
		}
	}
	return nil
}

// startDetached starts a process of the nodes to outlive this program, for
// hack/local-down.sh to stop.
func startDetached(o Options, name, bin string, args []string) (*localrun.Process, error) {
	p := localrun.NewProcess(name, bin, o.logFile(name), args...)
	return p, p.StartDetached(o.OutDir)
}

func startGateway(ctx context.Context, o Options, l Layout) error {
	bin, args, err := nsCommand(l.ClusterCgroup(), nil, o.Self, "gateway",
		"--out-dir="+o.OutDir, "--apiserver-port="+strconv.Itoa(o.APIServerPort), "--nodes="+strings.Join(o.Nodes, " "),
		"--reverse-ports="+joinInts(o.ReversePorts))
	if err != nil {
		return err
	}
	p, err := startDetached(o, gatewayProcess(), bin, args)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("%s:%d", l.GatewayIP(), o.APIServerPort)
	return p.WaitReady(ctx, o.ReadyTimeout, "its forward of "+addr, func(ctx context.Context) bool {
		c, err := netns.Dial(ctx, NetnsPath(l.ClusterNetns()), addr)
		if err != nil {
			return false
		}
		_ = c.Close()
		_, err = os.Stat(l.EgressSocket())
		return err == nil
	})
}

func startCoreDNS(ctx context.Context, o Options, l Layout) error {
	conf, _ := corednsFiles(l)
	bin, args, err := nsCommand(l.ClusterCgroup(), []string{"--net=" + NetnsPath(l.ClusterNetns())},
		filepath.Join(o.BinDir, "coredns"), "-conf", conf)
	if err != nil {
		return err
	}
	p, err := startDetached(o, corednsProcess(), bin, args)
	if err != nil {
		return err
	}
	return p.WaitReady(ctx, o.ReadyTimeout, "its /ready", func(ctx context.Context) bool {
		return netns.AnswersOK(ctx, NetnsPath(l.ClusterNetns()), "http://127.0.0.1:8181/ready", 2*time.Second)
	})
}

// startNode starts node i's containerd, with the pause image, then its
// kubelet and kube-proxy.
func startNode(ctx context.Context, o Options, l Layout, i int, pause string) error {
	node := l.Nodes[i]
	if err := nodeFiles(l, i, o); err != nil {
		return err
	}
	if err := makeMountNS(ctx, l, i); err != nil {
		return err
	}
	dir := l.NodeDir(i)
	daemons := []struct {
		name string
		bin  string
		args []string
	}{
		{"containerd", "containerd", []string{"--config", filepath.Join(dir, "containerd.toml")}},
		{"kubelet", filepath.Join(o.BinDir, "kubelet"), []string{
			"--config=" + filepath.Join(dir, "kubelet.yaml"),
			"--kubeconfig=" + filepath.Join(dir, "kubelet.kubeconfig"),
			"--hostname-override=" + node,
			"--node-ip=" + l.NodeIP(i).String(),
			"--node-labels=" + Label + "=true",
		}},
		{"kube-proxy", filepath.Join(o.BinDir, "kube-proxy"), []string{"--config=" + filepath.Join(dir, "kube-proxy.yaml")}},
	}
	for _, d := range daemons {
		bin, args, err := nodeCommand(l, i, d.bin, d.args...)
		if err != nil {
			return err
		}
		p, err := startDetached(o, nodeProcess(node, d.name), bin, args)
		if err != nil {
			return err
		}
		if d.name != "containerd" {
			continue
		}
		// The kubelet starts once the runtime answers and has the pause image.
		if err := p.WaitReady(ctx, o.ReadyTimeout, "its socket", func(ctx context.Context) bool {
			return run(ctx, "nsenter", "--mount="+l.MountNS(i), "--", "ctr", "--address", containerdSocket, "version") == nil
		}); err != nil {
			return err
		}
		if err := importImage(ctx, l, i, pause); err != nil {
			return err
		}
	}
	return nil
}

// Import imports image archives into every real node's containerd (those
// Up made: it reads their names when o has none).
func Import(ctx context.Context, o Options, archives []string) error {
	o = o.withRecordedNodes()
	if len(o.Nodes) == 0 {
		return fmt.Errorf("no real nodes in %s", o.OutDir)
	}
	l, err := NewLayout(o.OutDir, o.Nodes)
	if err != nil {
		return err
	}
	// Each node's containerd unpacks on its own: the nodes at once.
	errs := make([]error, len(l.Nodes))
	var wg sync.WaitGroup
	for i := range l.Nodes {
		wg.Go(func() {
			for _, a := range archives {
				if err := importImage(ctx, l, i, a); err != nil {
					errs[i] = fmt.Errorf("importing %s into %s: %w", a, l.Nodes[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitNodes waits until every real node is Ready and labelled, and the
// node-lifecycle controller has lifted its not-ready taint.
func waitNodes(ctx context.Context, o Options, kube kubernetes.Interface) error {
	for _, name := range o.Nodes {
		want := o.Labels
		if slices.Contains(o.EdgeNodes, name) {
			want = maps.Clone(o.Labels)
			want[EdgeLabel] = ""
		}
		var last string
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, o.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if missing := missingLabels(n, want); len(missing) > 0 {
				patch := labelPatch(missing)
				if _, err := kube.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
					last = err.Error()
				}
				return false, nil
			}
			last = nodeState(n)
			return last == "", nil
		})
		if err != nil {
			return fmt.Errorf("real node %s not Ready and schedulable within %s (%s); its kubelet's log: %s", name, o.ReadyTimeout, last, o.logFile(nodeProcess(name, "kubelet")))
		}
	}
	return nil
}

// EdgeLabel marks edge nodes.
const EdgeLabel = "node-role.kubernetes.io/edge"

// nodeState is "" for a Ready node without a taint of an unready one, else
// what keeps it from being so.
func nodeState(n *corev1.Node) string {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return "not Ready"
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return "tainted " + t.Key
		}
	}
	return ""
}

func missingLabels(n *corev1.Node, want map[string]string) map[string]string {
	missing := map[string]string{}
	for k, v := range want {
		if got, ok := n.Labels[k]; !ok || got != v {
			missing[k] = v
		}
	}
	return missing
}

func labelPatch(labels map[string]string) []byte {
	m := map[string]any{"metadata": map[string]any{"labels": labels}}
	data, _ := json.Marshal(m)
	return data
}

// Down stops every process of the real nodes (with their containers) and
// removes what Up made: namespaces, cgroups, mount points, the nodes' Node
// objects while the API server still answers; it puts back the kernel
// settings the kubelets changed. It is harmless when nothing is up.
func Down(ctx context.Context, o Options) error {
	o = o.withRecordedNodes()
	l, err := NewLayout(o.OutDir, o.Nodes)
	if err != nil {
		return err
	}
	var errs []error
	if err := killCgroup(l.Cgroup(), 30*time.Second); err != nil {
		errs = append(errs, err)
	}
	if err := removeMountNamespaces(ctx, l); err != nil {
		errs = append(errs, err)
	}
	if err := tearDownNetwork(ctx, l); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroup(l.Cgroup()); err != nil {
		errs = append(errs, err)
	}
	if err := restoreSysctls(l); err != nil {
		errs = append(errs, err)
	}
	removeMadeHostPaths(l)
	for _, f := range pidFiles(o) {
		_ = os.Remove(f)
	}
	if o.DeleteNodes && len(o.Nodes) > 0 {
		if err := deleteNodes(ctx, o); err != nil {
			klog.FromContext(ctx).Info("Could not delete the real nodes' Node objects", "err", err)
		}
	}
	_ = os.Remove(localrun.RealClusterFile(o.OutDir))
	return errors.Join(errs...)
}

// withRecordedNodes is o with the nodes Up recorded (localrun.RealCluster)
// when o names none, as Import and Down are called without them.
func (o Options) withRecordedNodes() Options {
	if len(o.Nodes) == 0 {
		if c, err := localrun.ReadRealCluster(o.OutDir); err == nil && c != nil {
			o.Nodes = c.Nodes
		}
	}
	return o
}

// pidFiles are the pid files of the real nodes' processes.
func pidFiles(o Options) []string {
	files, _ := filepath.Glob(filepath.Join(o.OutDir, "pids", "real-*.pid"))
	return files
}

// deleteNodes deletes the real nodes' Node objects, so that a control plane
// without them lists none NotReady.
func deleteNodes(ctx context.Context, o Options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range o.Nodes {
		if err := kube.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
