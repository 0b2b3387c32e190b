package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nereid-ml/nereid/hack/localrun"
	"github.com/nereid-ml/nereid/pkg/plugin/playworker"
)

// FreePort returns a loopback port nobody listens on now, for a process the test
// starts (and may start again on the same port).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := PickFreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// The ports FreePort hands out: below the control planes' blocks (20000–29999,
// hack/lib/ports.sh) and Linux's ephemeral range (32768 and up), where a bind to
// :0 and every outgoing connection take theirs, and above the real nodes'
// kubelets and kube-proxies (10248–10259). So between FreePort's answer and its
// process's bind — or a killed process's restart on the same port, while tests
// run in parallel — no other socket of this machine is given that port by the
// kernel; only a test binary beside this one choosing the same could, and each
// binary starts at a random point of the range and walks it in turn.
const (
	freePortFirst = 12000
	freePortCount = 8000
)

var freePortNext atomic.Int64

func init() { freePortNext.Store(rand.Int64N(freePortCount)) }

// PickFreePort is FreePort for programs that are not tests.
func PickFreePort() (int, error) {
	for range 100 {
		port := freePortFirst + int(freePortNext.Add(1)%freePortCount)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // someone has it
		}
		if err := ln.Close(); err != nil {
			return 0, err
		}
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d..%d after 100 tries", freePortFirst, freePortFirst+freePortCount-1)
}

// EdgeHub is a GlobalManager started with its edge hub.
type EdgeHub struct {
	*Process
	// Address is the hub's host:port.
	Address string
	// CAFile holds the CA the LocalControllers trust.
	CAFile string
}

// EdgeServiceAccount is the ServiceAccount EdgeIdentity gives the
// LocalControllers of a test namespace, and EdgeDaemonSet their DaemonSet;
// StartGlobalManagerWithEdgeHub accepts the tokens of that ServiceAccount
// bound to that DaemonSet's Pods (and only those). The DaemonSet has the
// chart's name: the chart's Role, which the tests' GlobalManagers get in
// their namespace, grants the DaemonSet by name.
const (
	EdgeServiceAccount = "localcontroller"
	EdgeDaemonSet      = "nereid-localcontroller"
)

// EdgeNodeLabel is the label of the local control plane's edge nodes (and
// the GlobalManager's default --edge-node-selector).
const EdgeNodeLabel = localrun.EdgeNodeLabel

// edgeTokenLifetime is how long the tokens of the tests' LocalControllers last.
const edgeTokenLifetime = time.Hour

// edgeDaemonSet is the LocalControllers' DaemonSet of a test namespace.
func edgeDaemonSet(namespace string) localrun.EdgeDaemonSet {
	return localrun.EdgeDaemonSet{Namespace: namespace, Name: EdgeDaemonSet, ServiceAccount: EdgeServiceAccount,
		Image: "nereid/localcontroller:test", NodeSelector: map[string]string{EdgeNodeLabel: ""}}
}

// StartGlobalManagerWithEdgeHub runs a GlobalManager for namespace whose edge
// hub listens on a free loopback port, keeps its certificate, CA and node
// Leases in namespace, and accepts the tokens of namespace's
// EdgeServiceAccount bound to Pods of its EdgeDaemonSet.
func StartGlobalManagerWithEdgeHub(t testing.TB, namespace string, extra ...string) *EdgeHub {
	t.Helper()
	hub := &localrun.EdgeHub{
		Address: "127.0.0.1:" + strconv.Itoa(FreePort(t)), Namespace: namespace,
		CAFile: filepath.Join(t.TempDir(), "edgehub-ca.crt"), LocalControllers: edgeDaemonSet(namespace),
	}
	gm := startGlobalManager(t, localrun.GlobalManager{
		Kubeconfig: GlobalManagerKubeconfig(t, namespace), Namespace: namespace,
		HealthAddress: "127.0.0.1:0", EdgeHub: hub, Verbosity: 2, Extra: extra,
	})
	if err := localrun.WaitForEdgeHub(t.Context(), gm.Process, hub, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return &EdgeHub{Process: gm, Address: hub.Address, CAFile: hub.CAFile}
}

// EdgeIdentity gives a LocalController of node the identity a real one has:
// the Pod on node of namespace's EdgeDaemonSet (made if missing, as
// EnsureEdgeDaemonSet does), whose ServiceAccount is EdgeServiceAccount, and
// a token with the edge hub's audience bound to that Pod, written to a file.
// The GlobalManager reads the node from the token.
func EdgeIdentity(t testing.TB, namespace, node string) (tokenFile string) {
	t.Helper()
	token, err := NewEdgeIdentity(t.Context(), KubeClient(t), namespace, EdgeServiceAccount, node)
	if err != nil {
		t.Fatal(err)
	}
	return WriteToken(t, node, token)
}

// EdgeDaemonSetPod is the Pod of namespace's EdgeDaemonSet on node, made if
// missing, once the scheduler has bound it there.
func EdgeDaemonSetPod(t testing.TB, namespace, node string) *corev1.Pod {
	t.Helper()
	kube := KubeClient(t)
	ds, err := edgeDaemonSet(namespace).Ensure(t.Context(), kube)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := DaemonSetPods(t.Context(), kube, ds, []string{node}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return pods[node]
}

// PodToken creates, in namespace, serviceAccount (if missing) and a bare Pod
// (no controller) named pod on node that runs as it, and returns a token of
// serviceAccount bound to that Pod with audience ("" for the API server's
// own). The edge hub refuses such a Pod: it is not one of the
// LocalControllers' DaemonSet.
func PodToken(t testing.TB, namespace, serviceAccount, pod, node, audience string) string {
	t.Helper()
	kube := KubeClient(t)
	if err := localrun.EnsureServiceAccount(t.Context(), kube, namespace, serviceAccount); err != nil {
		t.Fatal(err)
	}
	token, err := NewPodToken(t.Context(), kube, namespace, serviceAccount, pod, node, audience)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// WriteToken writes token to a file named for name and returns its path.
func WriteToken(t testing.TB, name, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".token")
	if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// NewEdgeIdentity returns a token with the edge hub's audience bound to the
// Pod on node of namespace's EdgeDaemonSet, whose Pods run as
// serviceAccount; it makes the ServiceAccount and the DaemonSet (on the
// nodes labelled EdgeNodeLabel) if missing and waits for that Pod.
func NewEdgeIdentity(ctx context.Context, kube kubernetes.Interface, namespace, serviceAccount, node string) (token string, err error) {
	d := edgeDaemonSet(namespace)
	d.ServiceAccount = serviceAccount
	ids, err := d.Identities(ctx, kube, []string{node}, time.Minute, edgeTokenLifetime)
	if err != nil {
		return "", err
	}
	return ids[node].Token, nil
}

// EnsureEdgeDaemonSet creates in namespace, unless they exist,
// serviceAccount and a DaemonSet named name of LocalController Pods that run
// as it on the nodes nodeSelector picks (localrun.EdgeDaemonSet), and
// returns the DaemonSet.
func EnsureEdgeDaemonSet(ctx context.Context, kube kubernetes.Interface, namespace, name, serviceAccount string, nodeSelector map[string]string) (*appsv1.DaemonSet, error) {
	return localrun.EdgeDaemonSet{Namespace: namespace, Name: name, ServiceAccount: serviceAccount,
		Image: "nereid/localcontroller:test", NodeSelector: nodeSelector}.Ensure(ctx, kube)
}

// DaemonSetPods waits up to timeout until ds has a Pod bound to each of
// nodes, not being deleted, and returns them by node.
func DaemonSetPods(ctx context.Context, kube kubernetes.Interface, ds *appsv1.DaemonSet, nodes []string, timeout time.Duration) (map[string]*corev1.Pod, error) {
	return localrun.DaemonSetPods(ctx, kube, ds, nodes, timeout)
}

// NewPodToken creates, in namespace, a bare Pod named pod on node that runs
// as serviceAccount (it tolerates every taint, so an unready node does not
// evict it and void its token), and returns a token of serviceAccount bound
// to that Pod, with audience ("" for the API server's own, the one every Pod
// gets by default).
func NewPodToken(ctx context.Context, kube kubernetes.Interface, namespace, serviceAccount, pod, node, audience string) (string, error) {
	created, err := kube.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName: node, ServiceAccountName: serviceAccount,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "main", Image: "nereid/localcontroller:test"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating Pod %s on %s: %w", pod, node, err)
	}
	return NewBoundToken(ctx, kube, created, audience)
}

// NewBoundToken returns a token of pod's ServiceAccount bound to pod, as the
// kubelet would project into it, with audience ("" for the API server's own),
// valid for an hour.
func NewBoundToken(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod, audience string) (string, error) {
	return localrun.BoundToken(ctx, kube, pod, audience, edgeTokenLifetime)
}

// LocalController is a LocalController process a test started.
type LocalController struct {
	*Process
	Node string
	// WorkerURL is its LC_SERVER: where workers post.
	WorkerURL string
	// HealthURL serves /healthz and /metrics.
	HealthURL string
	// DataDir holds its store; it survives Kill and Start.
	DataDir string
	// Root is the node's root filesystem as the LocalController sees it
	// (--node-root): a Dataset's url /data/x.txt is Root/data/x.txt.
	Root string
}

// StartLocalController runs a LocalController for node against hub, proving
// its identity with tokenFile. Its node root is a fresh folder (Root) and it
// counts Datasets every 200 ms.
func StartLocalController(t testing.TB, hub *EdgeHub, node, tokenFile string, extra ...string) *LocalController {
	t.Helper()
	dir := t.TempDir()
	cmd := localrun.LocalController{
		Node: node, Hub: hub.Address, CAFile: hub.CAFile, TokenFile: tokenFile,
		WorkerAddress: "127.0.0.1:" + strconv.Itoa(FreePort(t)), HealthAddress: "127.0.0.1:" + strconv.Itoa(FreePort(t)),
		DataDir: filepath.Join(dir, "data"), NodeRoot: filepath.Join(dir, "root"),
		DatasetPollPeriod: 200 * time.Millisecond, Verbosity: 2, Extra: extra,
	}
	lc := &LocalController{
		Process:   NewProcess("localcontroller-"+node, Binary(t, "localcontroller"), filepath.Join(dir, "localcontroller.log"), cmd.Args()...),
		Node:      node,
		WorkerURL: cmd.WorkerURL(),
		HealthURL: cmd.HealthURL(),
		DataDir:   cmd.DataDir,
		Root:      cmd.NodeRoot,
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lc.Stop(t)
		if t.Failed() {
			t.Logf("last lines of %s's log:\n%s", lc.Name, localrun.Tail(lc.LogPath, 40))
		}
	})
	if err := localrun.WaitForLocalController(t.Context(), lc.Process.Process, cmd, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return lc
}

// Metrics reads the LocalController's /metrics page.
func (lc *LocalController) Metrics(t testing.TB) Metrics {
	t.Helper()
	m, err := ScrapeMetrics(t.Context(), lc.HealthURL)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// WaitForReportsAcknowledged waits until lc's outbox is empty: the
// GlobalManager has acknowledged every report lc took before the call (from
// its workers, its dataset counting and its learning cycles), which it does
// only once a report is applied to its object's status, or refused for good.
// Nothing lc holds is then sent, or applied, again.
func WaitForReportsAcknowledged(t testing.TB, lc *LocalController) {
	t.Helper()
	Eventually(t, 60*time.Second, lc.Name+"'s outbox to be acknowledged", func(ctx context.Context) (bool, error) {
		m, err := ScrapeMetrics(ctx, lc.HealthURL)
		if err != nil {
			return false, nil // restarting
		}
		n, ok := m["nereid_cloudlink_outbox_reports"]
		return ok && n == 0, nil
	})
}

// PostAsWorker posts body to lc's worker API as worker, a pod of namespace,
// would: from the pod's address. kwok gives the local run's pods addresses
// in 127.64.0.0/16 (hack/local-up.sh), on the loopback interface, which a
// test may speak from. A worker that is no pod, or a pod without an address
// yet, posts from 127.0.0.1, its node's own address. It returns the HTTP
// status and body; status 0 means the connection was closed (a
// LocalController closes one from an address that is no worker's at once).
func PostAsWorker(t testing.TB, lc *LocalController, namespace, worker string, body []byte) (int, string) {
	t.Helper()
	from := "127.0.0.1"
	pod, err := KubeClient(t).CoreV1().Pods(namespace).Get(t.Context(), worker, metav1.GetOptions{})
	if err == nil && pod.Status.PodIP != "" {
		from = pod.Status.PodIP
	}
	return PostFrom(from, lc.WorkerURL+"/sedna/workers/"+worker+"/info", body)
}

// PostFrom posts body to url from the local address from.
func PostFrom(from, url string, body []byte) (int, string) {
	resp, err := playworker.ClientFrom(from).Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(msg)
}
