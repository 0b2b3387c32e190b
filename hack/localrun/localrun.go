package localrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The local run's stand-ins for what the chart installs (the LocalControllers'
// ServiceAccount and DaemonSet, the GlobalManager's Role, its Lease and its
// edge hub's objects) live in a namespace of their own, not in
// SystemNamespace, where the README installs the chart: Helm refuses to take
// over objects of the names its release makes that it did not make. The
// GlobalManager runs as the chart's identity moved to that namespace
// (GlobalManagerIdentity.In): its cluster-scoped RBAC and admission policy
// have names no release has, so helm uninstall never takes them away.
const (
	Namespace = "nereid-local"
	// LeaseName is the GlobalManager's leader election Lease, in Namespace:
	// the GlobalManager's default --leader-elect-name.
	LeaseName = "nereid-globalmanager"
	// LocalControllers' ServiceAccount and DaemonSet, in Namespace; the
	// DaemonSet has the chart's name, which the chart's Role grants.
	LocalControllerServiceAccount = "nereid-localcontroller"
	LocalControllerDaemonSet      = "nereid-localcontroller"
	// LocalControllerImage is the image of the DaemonSet's Pods: no real
	// LocalController's.
	LocalControllerImage = "nereid/localcontroller:local"
	// MaxLocalControllers is how many LocalControllers the local run has
	// ports for.
	MaxLocalControllers = 4
	// TokenLifetime is how long the LocalControllers' tokens last; make
	// local-up run again makes new ones.
	TokenLifetime = 48 * time.Hour
	// globalManagerTokenLifetime is how long the GlobalManager's token lasts:
	// as long as the local run does, as the administrator's kubeconfig it
	// replaces did (the GlobalManager stops when its token expires).
	globalManagerTokenLifetime = 365 * 24 * time.Hour
	// fieldManager applies the GlobalManager's identity.
	fieldManager = "nereid-local-up"
	// DIServerTLSSecret keeps the certificate of the DIJob replicas API, in
	// Namespace: the chart's name (<release>-di-server-tls), which the
	// chart's Role lets the GlobalManager read and update.
	DIServerTLSSecret = "nereid-di-server-tls"
	// DIServerTokenAudience is the audience of the tokens the replicas API
	// takes: the chart's default (globalManager.dijob.server.tokenAudiences).
	DIServerTokenAudience = "nereid-di-server"
)

// earlierNamespace is where an earlier local-up made its LocalControllers'
// DaemonSet, ServiceAccount and Leases, which EnsureIdentities deletes.
const earlierNamespace = SystemNamespace

// Nodes are the local run's nodes and those of them that get a
// LocalController.
type Nodes struct {
	Cloud, Edge      []string
	LocalControllers []string
}

// ParseNodes reads the node lists of hack/local-up.sh: cloud and edge node
// names, separated by blanks, and which of them get a LocalController:
// "edge" (or "": the edge nodes), "all" (every node, cloud ones first, as
// Sedna runs them) or a list of names.
func ParseNodes(cloud, edge, localControllers string) (Nodes, error) {
	n := Nodes{Cloud: strings.Fields(cloud), Edge: strings.Fields(edge)}
	all := append(slices.Clone(n.Cloud), n.Edge...)
	switch localControllers {
	case "", "edge":
		n.LocalControllers = slices.Clone(n.Edge)
	case "all":
		n.LocalControllers = all
	default:
		n.LocalControllers = strings.Fields(localControllers)
		for _, node := range n.LocalControllers {
			if !slices.Contains(all, node) {
				return Nodes{}, fmt.Errorf("NEREID_LC_NODES names %s, which is not one of the local run's nodes (%s)", node, strings.Join(all, " "))
			}
		}
	}
	if len(n.LocalControllers) > MaxLocalControllers {
		return Nodes{}, fmt.Errorf("at most %d nodes get a LocalController in the local run (it has ports for %d); set NEREID_EDGE_NODES or NEREID_LC_NODES",
			MaxLocalControllers, MaxLocalControllers)
	}
	return n, nil
}

// EveryNode says whether LocalControllers run on other nodes than the edge
// nodes alone: the DaemonSet then has a Pod on every node and the hub
// accepts every node.
func (n Nodes) EveryNode() bool { return !slices.Equal(n.LocalControllers, n.Edge) }

// Run is the local run of one out dir (hack/local-up.sh's state dir).
type Run struct {
	// OutDir is the state dir: logs/, pids/ and the files below are in it.
	OutDir string
	// BinDir holds the globalmanager and localcontroller binaries.
	BinDir string
	// Manifests is the chart rendered with its defaults
	// (build/deploy/nereid.yaml), whose GlobalManager identity the local
	// run's GlobalManager has.
	Manifests string
	// Admin is the administrator's client configuration, which makes the
	// identities.
	Admin *rest.Config
	Nodes Nodes
	// FirstPort is the first of the ports reserved for Nereid's processes:
	// the GlobalManager's health and metrics, then its edge hub, then per
	// LocalController its worker API and its health and metrics.
	FirstPort int
	// DIServerPort is the loopback port of the GlobalManager's DIJob
	// replicas API (v2alpha1); 0 serves none.
	DIServerPort int
	// DIV1ServerPort is the loopback port of the GlobalManager's replicas
	// server of v1alpha1 DIJobs' coordinators; 0 serves none.
	DIV1ServerPort int
	// ReadyTimeout bounds each wait for a process or a Pod.
	ReadyTimeout time.Duration
	// Real are the run's real nodes (hack/realnode), nil when it has none.
	// With them the GlobalManager runs in their cluster network, and the
	// LocalControllers' DaemonSet is the chart's, rendered by Helm from
	// Chart: real nodes run its Pods, kwok's stand in for the others.
	Real *RealCluster
	// Helm and Chart render the chart for real nodes.
	Helm, Chart string
	// Logf tells the user what happens.
	Logf func(format string, args ...any)
}

// GlobalManagerKubeconfig is the path of the local run's GlobalManager's
// kubeconfig in outDir: the chart's ServiceAccount's.
func GlobalManagerKubeconfig(outDir string) string {
	return filepath.Join(outDir, "kubeconfigs", "globalmanager.kubeconfig")
}

func (r *Run) edgeDir(node string) string { return filepath.Join(r.OutDir, "edge", node) }
func (r *Run) caFile() string             { return filepath.Join(r.OutDir, "edge", "ca.crt") }
func (r *Run) address(offset int) string  { return "127.0.0.1:" + strconv.Itoa(r.FirstPort+offset) }

// listenIP is where the GlobalManager listens: the host's loopback, or,
// with real nodes, their cluster network's gateway address, from whose
// loopback port the gateway forwards (RealCluster.ReversePorts), so that
// r.address reaches it from the host either way.
func (r *Run) listenIP() string {
	if r.Real != nil {
		return r.Real.GatewayIP
	}
	return "127.0.0.1"
}

func (r *Run) listen(port int) string { return r.listenIP() + ":" + strconv.Itoa(port) }

// netns is the network namespace the GlobalManager runs in: "" for this
// process's.
func (r *Run) netns() string {
	if r.Real != nil {
		return r.Real.Netns
	}
	return ""
}
func (r *Run) logFile(name string) string { return filepath.Join(r.OutDir, "logs", name+".log") }

// localControllers is the DaemonSet of the local run's LocalControllers.
func (r *Run) localControllers() EdgeDaemonSet {
	// Its Pods stand in for the LocalControllers of kwok's nodes only: a real
	// node (hack/realnode) runs the chart's DaemonSet, and kwok would not run
	// a stand-in there.
	d := EdgeDaemonSet{Namespace: Namespace, Name: LocalControllerDaemonSet, ServiceAccount: LocalControllerServiceAccount,
		Image: LocalControllerImage, NodeSelector: map[string]string{EdgeNodeLabel: "", KwokNodeLabel: KwokNodeLabelValue}}
	if r.Nodes.EveryNode() {
		// kwok runs the extra Pods; only the chosen nodes get a LocalController process.
		d.NodeSelector = map[string]string{KwokNodeLabel: KwokNodeLabelValue}
	}
	return d
}

// GlobalManager is the command line of the local run's GlobalManager.
func (r *Run) GlobalManager() GlobalManager {
	gm := GlobalManager{
		Kubeconfig:     GlobalManagerKubeconfig(r.OutDir),
		HealthAddress:  r.listen(r.FirstPort),
		LeaseNamespace: Namespace,
		EdgeHub: &EdgeHub{Address: r.listen(r.FirstPort + 1), Namespace: Namespace, CAFile: r.caFile(),
			LocalControllers: r.localControllers(), EveryNode: r.Nodes.EveryNode()},
		DIJobConversion: r.listen(0),
		DIServer:        r.diServer(),
		DIV1Server:      r.diV1Server(),
	}
	if r.Real != nil {
		// The real nodes' LocalControllers dial the hub at the gateway
		// address (the chart's localController.gmAddress).
		gm.Extra = append(gm.Extra, "--edge-hostnames="+r.Real.GatewayIP)
	}
	return gm
}

// diV1Server is the local run's v1 replicas server: plain HTTP, as
// DI-engine's v1 coordinators call it, on a loopback port, which is also
// their KUBERNETES_SERVER_URL (the coordinators' pods have loopback
// addresses, from which the demo speaks).
func (r *Run) diV1Server() *DIV1Server {
	if r.DIV1ServerPort == 0 {
		return nil
	}
	address := r.listen(r.DIV1ServerPort)
	if r.Real != nil {
		// Real coordinators dial DI-orchestrator's name for it, the
		// Service di-server in di-system (ensureDIServerService), which
		// keeps their pods' addresses.
		return &DIV1Server{Address: address, URL: DIV1ServerService + "." + DIV1ServerNamespace + ":" + strconv.Itoa(DIV1ServerServicePort)}
	}
	return &DIV1Server{Address: address, URL: address}
}

// diServer is the local run's DIJob replicas API, served as the chart serves
// it: HTTPS with a certificate the GlobalManager makes and keeps in its
// namespace, whose CA every DIJob pod gets, taking tokens of the chart's
// audience only; on a loopback port instead of behind a Service, so its URL
// (the certificate's host) is 127.0.0.1.
func (r *Run) diServer() *DIServer {
	if r.DIServerPort == 0 {
		return nil
	}
	address := r.listen(r.DIServerPort)
	return &DIServer{Address: address, URL: "https://" + address, TLSSecret: DIServerTLSSecret, TokenAudience: DIServerTokenAudience}
}

// LocalController is the command line of the i-th LocalController, of node.
func (r *Run) LocalController(i int, node string) LocalController {
	dir := r.edgeDir(node)
	return LocalController{
		Node: node, Hub: r.address(1), CAFile: r.caFile(), TokenFile: filepath.Join(dir, "token"),
		WorkerAddress: r.address(2 + 2*i), HealthAddress: r.address(3 + 2*i),
		DataDir: filepath.Join(dir, "data"), NodeRoot: filepath.Join(dir, "root"),
		DatasetPollPeriod: 2 * time.Second,
	}
}

// ProcessError says that a process did not come up; its log says why.
type ProcessError struct {
	Name, LogPath string
	Err           error
}

func (e *ProcessError) Error() string { return e.Err.Error() }
func (e *ProcessError) Unwrap() error { return e.Err }

// EnsureIdentities gives the GlobalManager the chart's identity, in a
// kubeconfig (GlobalManagerKubeconfig), and each LocalController its node's
// Pod of the DaemonSet and a token bound to it, in edge/<node>/token.
func (r *Run) EnsureIdentities(ctx context.Context) error {
	kube, err := kubernetes.NewForConfig(r.Admin)
	if err != nil {
		return err
	}
	if err := r.removeEarlierIdentities(ctx, kube); err != nil {
		return err
	}
	if err := EnsureNamespace(ctx, kube, Namespace); err != nil {
		return err
	}
	if err := r.ensureGlobalManagerIdentity(ctx, kube); err != nil {
		return err
	}
	lcs := r.localControllers()
	if r.Real != nil {
		if lcs.Template, err = r.renderLocalControllers(ctx); err != nil {
			return err
		}
		if r.DIV1ServerPort != 0 {
			if err := r.ensureDIV1ServerService(ctx, kube); err != nil {
				return err
			}
		}
	}
	ids, err := lcs.Identities(ctx, kube, r.Nodes.LocalControllers, r.ReadyTimeout, TokenLifetime)
	if err != nil {
		return &ProcessError{Name: "kube-controller-manager", LogPath: r.logFile("kube-controller-manager"), Err: err}
	}
	for _, node := range r.Nodes.LocalControllers {
		if err := os.MkdirAll(r.edgeDir(node), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(r.edgeDir(node), "token"), []byte(ids[node].Token), 0o600); err != nil {
			return err
		}
		r.Logf("LocalController of %s: Pod %s/%s", node, Namespace, ids[node].Pod.Name)
	}
	return nil
}

func (r *Run) ensureGlobalManagerIdentity(ctx context.Context, kube kubernetes.Interface) error {
	rendered, err := ReadManifests(r.Manifests)
	if err != nil {
		return err
	}
	id, err := NewGlobalManagerIdentity(rendered).In(Namespace)
	if err != nil {
		return err
	}
	if err := Apply(ctx, r.Admin, fieldManager, id.Objects); err != nil {
		return fmt.Errorf("applying the chart's GlobalManager identity from %s: %w", r.Manifests, err)
	}
	token, err := GlobalManagerToken(ctx, kube, Namespace, globalManagerTokenLifetime)
	if err != nil {
		return err
	}
	path := GlobalManagerKubeconfig(r.OutDir)
	cfg := r.Admin
	if r.Real != nil {
		// In the cluster network, the API server is the gateway's forward
		// of its port; its certificate names it kubernetes.
		cfg = rest.CopyConfig(r.Admin)
		u, err := url.Parse(cfg.Host)
		if err != nil {
			return err
		}
		cfg.Host = "https://" + net.JoinHostPort(r.Real.GatewayIP, u.Port())
		cfg.ServerName = "kubernetes"
	}
	if err := WriteTokenKubeconfig(path, cfg, GlobalManagerServiceAccount, token); err != nil {
		return err
	}
	r.Logf("GlobalManager runs as ServiceAccount %s/%s with the chart's RBAC (%s)", Namespace, GlobalManagerServiceAccount, path)
	return nil
}

// removeEarlierIdentities deletes what earlier versions of local-up made: the
// bare Pods localcontroller-<node> in Namespace, which the DaemonSet would
// adopt, and the DaemonSet, ServiceAccount and edge Leases in
// SystemNamespace, which would be in the way of helm install, and the
// GlobalManager identity they gave the chart's names (whose admission policy
// would refuse the GlobalManager's new identity). That DaemonSet
// is known by its image, which no real one has; a DaemonSet of that name
// from the chart or the plain manifests is left alone, with its
// ServiceAccount.
func (r *Run) removeEarlierIdentities(ctx context.Context, kube kubernetes.Interface) error {
	var errs []error
	ignoreNotFound := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, node := range r.Nodes.LocalControllers {
		ignoreNotFound(kube.CoreV1().Pods(Namespace).Delete(ctx, "localcontroller-"+node, metav1.DeleteOptions{}))
	}
	ds, err := kube.AppsV1().DaemonSets(earlierNamespace).Get(ctx, LocalControllerDaemonSet, metav1.GetOptions{})
	if err == nil && len(ds.Spec.Template.Spec.Containers) > 0 && ds.Spec.Template.Spec.Containers[0].Image == LocalControllerImage {
		r.Logf("deleting %s/%s, which an earlier local-up made (the local run's is in %s now)", earlierNamespace, LocalControllerDaemonSet, Namespace)
		ignoreNotFound(kube.AppsV1().DaemonSets(earlierNamespace).Delete(ctx, LocalControllerDaemonSet, metav1.DeleteOptions{}))
		ignoreNotFound(kube.CoreV1().ServiceAccounts(earlierNamespace).Delete(ctx, LocalControllerServiceAccount, metav1.DeleteOptions{}))
		ignoreNotFound(kube.CoordinationV1().Leases(earlierNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: "nereid.io/edge-node"}))
	} else {
		ignoreNotFound(err)
	}
	// The GlobalManager identity an earlier local-up applied in
	// SystemNamespace, under a release's names, unless a release took it over.
	if rendered, err := ReadManifests(r.Manifests); err != nil {
		errs = append(errs, err)
	} else {
		deleted, err := DeleteOwnedBy(ctx, r.Admin, fieldManager, NewGlobalManagerIdentity(rendered).Objects)
		if len(deleted) > 0 {
			r.Logf("deleted the GlobalManager identity an earlier local-up made in %s (the local run's is in %s now): %s",
				SystemNamespace, Namespace, strings.Join(deleted, ", "))
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deleting what an earlier local-up made: %w", err)
	}
	return nil
}

// StartGlobalManager starts the GlobalManager, to outlive this program, and
// waits until it is ready and its edge hub listens.
func (r *Run) StartGlobalManager(ctx context.Context) error {
	gm := r.GlobalManager()
	// Removed first, so that the wait sees the new hub's CA; its folder made,
	// which a run whose only LocalControllers are real nodes' has not.
	if err := os.Remove(gm.EdgeHub.CAFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(gm.EdgeHub.CAFile), 0o755); err != nil {
		return err
	}
	bin, args := filepath.Join(r.BinDir, "globalmanager"), gm.Args()
	if ns := r.netns(); ns != "" {
		bin, args = "nsenter", append([]string{"--net=" + ns, "--", bin}, args...)
	}
	p := NewProcess("globalmanager", bin, r.logFile("globalmanager"), args...)
	r.Logf("starting %s", p.Name)
	if err := p.StartDetached(r.OutDir); err != nil {
		return err
	}
	ns := r.netns()
	health := "http://" + gm.HealthAddress
	err := p.WaitReady(ctx, r.ReadyTimeout, "/readyz on "+gm.HealthAddress, func(ctx context.Context) bool {
		return answersOKIn(ctx, ns, health+"/readyz")
	})
	if err == nil {
		err = waitForEdgeHubIn(ctx, p, ns, gm.EdgeHub, r.ReadyTimeout)
	}
	if err == nil && gm.DIServer != nil {
		err = waitForListenerIn(ctx, p, ns, "its DIJob replicas API", gm.DIServer.Address, r.ReadyTimeout)
	}
	if err == nil && gm.DIV1Server != nil {
		healthz := "http://" + gm.DIV1Server.Address + "/healthz"
		err = p.WaitReady(ctx, r.ReadyTimeout, "its v1 replicas server's "+healthz, func(ctx context.Context) bool {
			return answersOKIn(ctx, ns, healthz)
		})
	}
	if err != nil {
		return &ProcessError{Name: p.Name, LogPath: p.LogPath, Err: err}
	}
	r.Logf("GlobalManager ready (%s)", strings.Join(r.Endpoints(), ", "))
	return nil
}

// Endpoints are where the GlobalManager serves what (GlobalManager's
// Endpoints) as the host reaches it: with real nodes it listens on their
// cluster network's gateway address, which only pods and the nodes reach,
// and the gateway forwards the host's loopback ports to it, so an address
// there is given as 127.0.0.1's, and a last line says where pods reach them.
func (r *Run) Endpoints() []string {
	e := r.GlobalManager().Endpoints()
	if r.Real == nil {
		return e
	}
	for i, line := range e {
		for _, port := range r.Real.ReversePorts {
			at := net.JoinHostPort(r.Real.GatewayIP, strconv.Itoa(port))
			e[i] = strings.Replace(line, "//"+at, "//127.0.0.1:"+strconv.Itoa(port), 1)
			if e[i] != line {
				break
			}
		}
	}
	return append(e, "(pods and the real nodes reach them at "+r.Real.GatewayIP+", on the same ports)")
}

// StartLocalControllers starts a LocalController on each of the nodes that
// get one, to outlive this program, each once the previous one serves.
func (r *Run) StartLocalControllers(ctx context.Context) error {
	// A node that no longer gets one keeps no LC_SERVER for the demo to use.
	stale, _ := filepath.Glob(filepath.Join(r.OutDir, "edge", "*", "lc-server"))
	for _, f := range stale {
		if !slices.Contains(r.Nodes.LocalControllers, filepath.Base(filepath.Dir(f))) {
			_ = os.Remove(f)
		}
	}
	for i, node := range r.Nodes.LocalControllers {
		lc := r.LocalController(i, node)
		if err := os.MkdirAll(lc.NodeRoot, 0o755); err != nil {
			return err
		}
		p := NewProcess("localcontroller-"+node, filepath.Join(r.BinDir, "localcontroller"), r.logFile("localcontroller-"+node), lc.Args()...)
		r.Logf("starting %s", p.Name)
		if err := p.StartDetached(r.OutDir); err != nil {
			return err
		}
		if err := WaitForLocalController(ctx, p, lc, r.ReadyTimeout); err != nil {
			return &ProcessError{Name: p.Name, LogPath: p.LogPath, Err: err}
		}
		// What a worker on this node would have as LC_SERVER (the demo reads it).
		if err := os.WriteFile(filepath.Join(r.edgeDir(node), "lc-server"), []byte(lc.WorkerURL()+"\n"), 0o644); err != nil {
			return err
		}
		r.Logf("LocalController of %s ready (worker API: %s/sedna/workers/{name}/info)", node, lc.WorkerURL())
	}
	if r.Real != nil {
		kube, err := kubernetes.NewForConfig(r.Admin)
		if err != nil {
			return err
		}
		return r.waitForRealLocalControllers(ctx, kube)
	}
	return nil
}
