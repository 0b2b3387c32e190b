package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/test/framework"
)

// revocationBound is how soon the hub closes a connection whose identity
// went (doc.go, docs/edge-channel.md): its watches see most of it at once, its recheck of
// every connection the rest.
const revocationBound = time.Minute

// openSession connects as the LocalController of the DaemonSet's Pod on
// node and says hello; it returns the connection once the hub has sent it
// Synced.
func openSession(t *testing.T, hub *framework.EdgeHub, ns, node string) *websocket.Conn {
	t.Helper()
	conn, resp, err := dialEdge(t, hub, boundToken(t, framework.EdgeDaemonSetPod(t, ns, node)))
	if err != nil {
		t.Fatalf("the DaemonSet's Pod on %s was refused: %v (%v)", node, err, resp)
	}
	send(t, conn, &edgeproto.Hello{Node: node, Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, frame, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("before Synced: %v", err)
		}
		if m, err := edgeproto.Decode(frame); err == nil && m.Type() == edgeproto.TypeSynced {
			return conn
		}
	}
}

// untilRevoked reads conn until the hub closes it, and fails unless it does
// so within revocationBound of since, as a policy violation saying want.
func untilRevoked(t *testing.T, conn *websocket.Conn, since time.Time, want string) {
	t.Helper()
	_ = conn.SetReadDeadline(since.Add(revocationBound))
	var err error
	for {
		if _, _, err = conn.ReadMessage(); err != nil {
			break
		}
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, want) {
		t.Fatalf("after %s: %v; want the hub to close the connection within %s saying %q", time.Since(since).Round(time.Millisecond), err, revocationBound, want)
	}
	t.Logf("closed %s after the change: %q", time.Since(since).Round(time.Millisecond), ce.Text)
}

// revoked is how many connections the hub closed for reason.
func revoked(t *testing.T, hub *framework.EdgeHub, reason string) float64 {
	t.Helper()
	m, err := framework.ScrapeMetrics(t.Context(), "http://"+hub.HealthAddress())
	if err != nil {
		t.Fatal(err)
	}
	return m.Get(`nereid_edgehub_connections_revoked_total{reason="` + reason + `"}`)
}

// TestDeletingTheLocalControllersServiceAccountClosesItsConnection deletes
// the ServiceAccount of a connected LocalController (its DaemonSet Pod
// stays): the hub closes the connection within the bound, and the token no
// longer connects.
func TestDeletingTheLocalControllersServiceAccountClosesItsConnection(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	token := boundToken(t, framework.EdgeDaemonSetPod(t, ns, "edge-0"))
	conn := openSession(t, hub, ns, "edge-0")
	start := time.Now()
	if err := framework.KubeClient(t).CoreV1().ServiceAccounts(ns).Delete(t.Context(), framework.EdgeServiceAccount, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	untilRevoked(t, conn, start, "the LocalController's ServiceAccount was deleted")
	if n := revoked(t, hub, "serviceaccount_deleted"); n != 1 {
		t.Errorf("%v connections closed as serviceaccount_deleted, want 1", n)
	}
	framework.Eventually(t, 30*time.Second, "the token to be refused", func(context.Context) (bool, error) {
		conn, resp, err := dialEdge(t, hub, token)
		if err == nil {
			conn.Close()
			return false, nil
		}
		return resp != nil && resp.StatusCode == 401, nil
	})
}

// TestRemovingTheNodesEdgeLabelClosesItsConnection runs the hub with an
// edge node selector of the test's own, on a label edge-1 gets for the test,
// so that the LocalControllers' DaemonSet keeps its Pod there: taking the
// label off closes the connection within the bound, and the token no longer
// connects.
func TestRemovingTheNodesEdgeLabelClosesItsConnection(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	const label = "nereid.io/test-edge"
	kube := framework.KubeClient(t)
	setLabel := func(ctx context.Context, value *string) error {
		patch := `{"metadata":{"labels":{"` + label + `":null}}}`
		if value != nil {
			patch = `{"metadata":{"labels":{"` + label + `":"` + *value + `"}}}`
		}
		_, err := kube.CoreV1().Nodes().Patch(ctx, "edge-1", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := setLabel(t.Context(), &ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setLabel(context.WithoutCancel(t.Context()), nil) })
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns, "--edge-node-selector="+label+"="+ns)
	token := boundToken(t, framework.EdgeDaemonSetPod(t, ns, "edge-1"))
	conn := openSession(t, hub, ns, "edge-1")
	start := time.Now()
	if err := setLabel(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	untilRevoked(t, conn, start, "node edge-1 is no longer an edge node")
	if n := revoked(t, hub, "not_edge_node"); n != 1 {
		t.Errorf("%v connections closed as not_edge_node, want 1", n)
	}
	refused(t, hub, token, 403, "node edge-1 is not an edge node")
}

// TestDeletingTheLocalControllersDaemonSetClosesItsConnections deletes the
// DaemonSet of two connected LocalControllers: the hub closes both
// connections within the bound, for the DaemonSet's deletion (its event
// comes before the garbage collector deletes the Pods).
func TestDeletingTheLocalControllersDaemonSetClosesItsConnections(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	conns := map[string]*websocket.Conn{}
	for _, node := range []string{"edge-0", "edge-1"} {
		conns[node] = openSession(t, hub, ns, node)
	}
	kube := framework.KubeClient(t)
	start := time.Now()
	if err := kube.AppsV1().DaemonSets(ns).Delete(t.Context(), framework.EdgeDaemonSet, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, conn := range conns {
		untilRevoked(t, conn, start, "the LocalControllers' DaemonSet was deleted")
	}
	if n := revoked(t, hub, "daemonset_deleted"); n != 2 {
		t.Errorf("%v connections closed as daemonset_deleted, want 2", n)
	}
}
