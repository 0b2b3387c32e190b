package edgehub

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
)

// untilRevoked reads c until the hub closes it, and fails unless it closes
// it as a policy violation saying want.
func (c *client) untilRevoked(want string) {
	c.t.Helper()
	for {
		_, err := c.recv(5 * time.Second)
		if err == nil {
			continue // what went out before the close
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, want) {
			c.t.Fatalf("got %v, want a policy-violation close saying %q", err, want)
		}
		return
	}
}

// An open connection ends, and says why, when an event takes away what
// admitted it; the other node's connection goes on.
func TestConnectionEndsWhenWhatAdmittedItGoes(t *testing.T) {
	edgeNode := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"node-role.kubernetes.io/edge": ""}}}
	}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "nereid-localcontroller", UID: edgehubtest.AccountUID}}
	cases := map[string]struct {
		take       func(t *testing.T, f *fixture)
		wantReason string // the label of connections_revoked_total
		wantText   string // in the close frame
	}{
		"its ServiceAccount deleted": {
			take: func(t *testing.T, f *fixture) {
				if err := f.kube.CoreV1().ServiceAccounts(hubNS).Delete(t.Context(), account.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantReason: auth.RevokedServiceAccountDeleted, wantText: "ServiceAccount was deleted (nereid-system/nereid-localcontroller)",
		},
		"its DaemonSet deleted": {
			take: func(t *testing.T, f *fixture) {
				if err := f.kube.AppsV1().DaemonSets(hubNS).Delete(t.Context(), edgehubtest.DaemonSetName, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantReason: auth.RevokedDaemonSetDeleted, wantText: "DaemonSet was deleted (nereid-system/nereid-localcontroller)",
		},
		"its DaemonSet being deleted": {
			take: func(t *testing.T, f *fixture) {
				ds := edgehubtest.LCDaemonSet(testDaemonSetUID)
				now := metav1.Now()
				ds.DeletionTimestamp = &now
				if _, err := f.kube.AppsV1().DaemonSets(hubNS).Update(t.Context(), ds, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantReason: auth.RevokedDaemonSetDeleted, wantText: "is being deleted",
		},
		"its Pod released by the DaemonSet": {
			take: func(t *testing.T, f *fixture) {
				pod := edgehubtest.LCPod("edge-a")
				pod.OwnerReferences = nil
				if _, err := f.kube.CoreV1().Pods(hubNS).Update(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantReason: auth.RevokedNotDaemonSetPod, wantText: "no longer controlled by the DaemonSet",
		},
		"its node's edge label removed": {
			take: func(t *testing.T, f *fixture) {
				if _, err := f.kube.CoreV1().Nodes().Update(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-a"}}, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantReason: auth.RevokedNotEdgeNode, wantText: "node edge-a is no longer an edge node",
		},
		"its node deleted": {
			take: func(t *testing.T, f *fixture) {
				if err := f.kube.CoreV1().Nodes().Delete(t.Context(), "edge-a", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			wantReason: auth.RevokedNotEdgeNode, wantText: "node edge-a is no longer an edge node",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := append(edgeObjects(), []runtime.Object{account, edgehubtest.LCPod("edge-a"), edgehubtest.LCPod("edge-b"), edgeNode("edge-a"), edgeNode("edge-b")}...)
			f := newFixture(t, testConfig, objs...)
			a := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
			a.untilSynced()
			b := f.connect("edge-b", &edgeproto.Hello{Node: "edge-b", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
			b.untilSynced()
			tc.take(t, f)
			a.untilRevoked(tc.wantText)
			// The ServiceAccount and the DaemonSet are the other node's too;
			// the other node's connection goes on otherwise.
			want := 1.0
			if tc.wantReason == auth.RevokedDaemonSetDeleted || tc.wantReason == auth.RevokedServiceAccountDeleted {
				b.untilRevoked(tc.wantText)
				want = 2
			} else {
				b.quiet(200 * time.Millisecond)
			}
			if got := f.metric("connections_revoked_total", "reason", tc.wantReason); got != want {
				t.Errorf("connections_revoked_total{reason=%q} = %v, want %v", tc.wantReason, got, want)
			}
		})
	}
}

// What a watch missed, the recheck finds: a Pod the DaemonSet released
// without an event the hub saw, and a token a review no longer takes as
// the same Pod's (the hub cannot verify tokens itself here, so it has each
// reviewed again).
func TestTheRecheckEndsConnectionsTheWatchesMissed(t *testing.T) {
	f := newFixture(t, testConfig, append(edgeObjects(), edgehubtest.LCPod("edge-a"))...)
	a := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	a.untilSynced()
	b := f.connect("edge-b", &edgeproto.Hello{Node: "edge-b", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	b.untilSynced()
	// The cache says edge-a's Pod has no controller, as if the event had
	// been lost; edge-b's token now reviews as another Pod's.
	released := edgehubtest.LCPod("edge-a")
	released.OwnerReferences = nil
	if err := f.hub.auth.Caches().Pods[0].Update(released); err != nil {
		t.Fatal(err)
	}
	f.hub.mu.Lock()
	sa, sb := f.hub.sessions["edge-a"], f.hub.sessions["edge-b"]
	sb.token = "token-edge-c" // read by the rechecker, which this test calls
	f.hub.mu.Unlock()
	// Nothing happens before the connections are due.
	f.hub.recheckDue(t.Context())
	if sa.ctx.Err() != nil || sb.ctx.Err() != nil {
		t.Fatal("a connection ended before it was due for its recheck")
	}
	for _, s := range []*session{sa, sb} {
		s.checkedAt.Store(time.Now().Add(-recheckPeriod).UnixNano())
	}
	f.hub.recheckDue(t.Context())
	a.untilRevoked("it has no controller (a bare Pod)")
	b.untilRevoked("TokenReview binds it to Pod nereid-system/lc-edge-c")
	for reason, want := range map[string]float64{auth.RevokedNotDaemonSetPod: 1, auth.RevokedTokenRefused: 1} {
		if got := f.metric("connections_revoked_total", "reason", reason); got != want {
			t.Errorf("connections_revoked_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
}
