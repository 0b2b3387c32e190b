package localrun

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/nereid-ml/nereid/hack/realnode/netns"
)

// GlobalManager is the command line of a GlobalManager process.
type GlobalManager struct {
	// Kubeconfig is its identity: the chart's ServiceAccount
	// (GlobalManagerIdentity), not an administrator's.
	Kubeconfig string
	// Namespace limits it to one namespace; "" manages every namespace.
	Namespace string
	// HealthAddress serves /healthz, /readyz and /metrics; port 0 picks a
	// free one, which its log names.
	HealthAddress string
	// LeaseNamespace holds its leader election Lease (which needs the
	// chart's Role there: GlobalManagerIdentity.RoleIn); "" runs it without
	// leader election, acting at once.
	LeaseNamespace string
	// EdgeHub is the hub LocalControllers connect to; nil runs none.
	EdgeHub *EdgeHub
	// DIJobConversion is the address of the DIJob CRD's conversion webhook
	// (127.0.0.1:0 picks a free port, which the GlobalManager puts into the
	// CRD as a loopback URL); "" serves none. One GlobalManager at a time
	// can own the cluster's one CRD, so tests that start several leave it
	// off unless they convert.
	DIJobConversion string
	// DIServer is the DIJob replicas HTTP API (v2alpha1); nil serves none.
	DIServer *DIServer
	// DIV1Server is the replicas server of v1alpha1 DIJobs' coordinators;
	// nil serves none.
	DIV1Server *DIV1Server
	// Verbosity is klog's -v; 0 leaves the default.
	Verbosity int
	// Extra flags go last, so that they win over the ones above.
	Extra []string
}

// EdgeHub is the GlobalManager's edge hub.
type EdgeHub struct {
	// Address is its host:port.
	Address string
	// Namespace keeps its Secret, its CA ConfigMap and the nodes' link
	// Leases (which needs the chart's Role there).
	Namespace string
	// CAFile is where it writes the CA that LocalControllers trust.
	CAFile string
	// LocalControllers are the DaemonSet whose Pods' tokens it accepts and
	// the ServiceAccount they run as.
	LocalControllers EdgeDaemonSet
	// EveryNode accepts LocalControllers on every node, as Sedna runs them;
	// otherwise only on the edge nodes (the GlobalManager's default
	// --edge-node-selector).
	EveryNode bool
}

// DIServer is the GlobalManager's DIJob replicas HTTP API
// (/v2alpha1/job/<namespace>.<name>/replicas).
type DIServer struct {
	// Address is its host:port.
	Address string
	// URL is where DIJob pods reach it: their DI_SERVER_URL.
	URL string
	// TLSSecret, in the GlobalManager's --edge-namespace, keeps the serving
	// certificate the GlobalManager makes itself for URL's host, and its
	// CA, which every DIJob pod gets; "" serves plain HTTP.
	TLSSecret string
	// TokenAudience is the audience a caller's token must have, for which
	// every DIJob pod gets a token bound to it; "" takes the API server's.
	TokenAudience string
}

// DIV1Server is the GlobalManager's replicas server of v1alpha1 DIJobs
// (DI-orchestrator v0.2's /v1alpha1/replicas), which their coordinators
// call over plain HTTP.
type DIV1Server struct {
	// Address is its host:port.
	Address string
	// URL is where coordinators reach it, host:port: their
	// KUBERNETES_SERVER_URL.
	URL string
}

// Args is the GlobalManager's command line.
func (g GlobalManager) Args() []string {
	args := []string{"--kubeconfig=" + g.Kubeconfig, "--health-address=" + g.HealthAddress}
	if g.Namespace != "" {
		args = append(args, "--namespace="+g.Namespace)
	}
	if g.LeaseNamespace == "" {
		args = append(args, "--leader-elect=false")
	} else {
		args = append(args, "--leader-elect-namespace="+g.LeaseNamespace)
	}
	if h := g.EdgeHub; h != nil {
		lcs := h.LocalControllers
		args = append(args, "--edge-address="+h.Address, "--edge-namespace="+h.Namespace, "--edge-ca-out="+h.CAFile,
			"--edge-service-accounts="+lcs.Namespace+"/"+lcs.ServiceAccount, "--edge-daemonset="+lcs.Namespace+"/"+lcs.Name)
		if h.EveryNode {
			args = append(args, "--edge-node-selector=")
		}
	}
	args = append(args, "--dijob-conversion-address="+g.DIJobConversion)
	if s := g.DIServer; s != nil {
		args = append(args, "--di-server-address="+s.Address, "--di-server-url="+s.URL)
		if s.TLSSecret != "" {
			args = append(args, "--di-server-tls-secret="+s.TLSSecret)
		}
		if s.TokenAudience != "" {
			args = append(args, "--di-server-token-audiences="+s.TokenAudience)
		}
	}
	if s := g.DIV1Server; s != nil {
		args = append(args, "--di-v1-server-address="+s.Address, "--di-v1-server-url="+s.URL)
	}
	if g.Verbosity > 0 {
		args = append(args, "-v="+strconv.Itoa(g.Verbosity))
	}
	return append(args, g.Extra...)
}

// Endpoints say where the GlobalManager serves what, as "what: URL", for
// people to read.
func (g GlobalManager) Endpoints() []string {
	e := []string{"metrics: http://" + g.HealthAddress + "/metrics"}
	if g.EdgeHub != nil {
		e = append(e, "edge hub: wss://"+g.EdgeHub.Address)
	}
	if g.DIServer != nil {
		e = append(e, "DIJob replicas API (v2alpha1): "+g.DIServer.URL)
	}
	if g.DIV1Server != nil {
		e = append(e, "v1 replicas server: http://"+g.DIV1Server.Address)
	}
	return e
}

// WaitForEdgeHub waits until gm's edge hub has written its CA to
// hub.CAFile and listens: it writes the CA just before it listens, so a
// LocalController that dialled on seeing the file could find nobody there.
func WaitForEdgeHub(ctx context.Context, gm *Process, hub *EdgeHub, timeout time.Duration) error {
	return waitForEdgeHubIn(ctx, gm, "", hub, timeout)
}

// waitForEdgeHubIn is WaitForEdgeHub for a GlobalManager in the network
// namespace at ns ("" for this process's).
func waitForEdgeHubIn(ctx context.Context, gm *Process, ns string, hub *EdgeHub, timeout time.Duration) error {
	err := gm.WaitReady(ctx, timeout, "its edge hub's CA in "+hub.CAFile, func(context.Context) bool {
		info, err := os.Stat(hub.CAFile)
		return err == nil && info.Size() > 0
	})
	if err != nil {
		return err
	}
	return waitForListenerIn(ctx, gm, ns, "its edge hub", hub.Address, timeout)
}

// WaitForListener waits until what gm serves on address (host:port)
// accepts connections: a server of the leader's, which starts once it leads,
// after /readyz answers.
func WaitForListener(ctx context.Context, gm *Process, what, address string, timeout time.Duration) error {
	return waitForListenerIn(ctx, gm, "", what, address, timeout)
}

// waitForListenerIn is WaitForListener for a GlobalManager in the network
// namespace at ns ("" for this process's).
func waitForListenerIn(ctx context.Context, gm *Process, ns, what, address string, timeout time.Duration) error {
	return gm.WaitReady(ctx, timeout, what+" to listen on "+address, func(ctx context.Context) bool {
		conn, err := netns.Dial(ctx, ns, address)
		if err != nil {
			return false
		}
		_ = conn.Close()
		return true
	})
}

// answersOK says whether url answers 200.
func answersOK(ctx context.Context, url string) bool { return answersOKIn(ctx, "", url) }

// answersOKIn says whether url answers 200 to a client in the network
// namespace at ns ("" for this process's).
func answersOKIn(ctx context.Context, ns, url string) bool {
	return netns.AnswersOK(ctx, ns, url, 3*time.Second)
}
