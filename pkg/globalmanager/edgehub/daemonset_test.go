package edgehub

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// A Pod is a LocalController only when the LocalControllers' DaemonSet, as
// it is now, controls it; whatever else it is, it is refused with a reason
// that says what it is.
func TestOnlyTheDaemonSetsPodsAreLocalControllers(t *testing.T) {
	now := metav1.Now()
	withController := func(ref *metav1.OwnerReference) *corev1.Pod {
		p := lcPod("edge-0")
		p.OwnerReferences = nil
		if ref != nil {
			p.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		return p
	}
	replicaSet := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "lc-5d8f", UID: "rs-uid"}}
	otherDS := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: testDaemonSetUID}}
	type result struct {
		DaemonSet types.UID
		Status    int
		Metric    string
	}
	cases := map[string]struct {
		pod        *corev1.Pod          // in the API server, not cached; nil for none
		cached     *corev1.Pod          // in the cache
		ds         *appsv1.DaemonSet    // nil for none
		podName    types.NamespacedName // the token's Pod, lc-edge-0 in hubNS when empty
		want       result
		wantReason string
	}{
		"a Pod of the DaemonSet, cached": {cached: lcPod("edge-0"), ds: lcDaemonSet(testDaemonSetUID),
			want: result{DaemonSet: testDaemonSetUID}},
		"a Pod of the DaemonSet, just made (read)": {pod: lcPod("edge-0"), ds: lcDaemonSet(testDaemonSetUID),
			want: result{DaemonSet: testDaemonSetUID}},
		"a bare Pod": {cached: withController(nil), ds: lcDaemonSet(testDaemonSetUID),
			want: result{Status: http.StatusForbidden, Metric: refusedNotDaemonSetPod}, wantReason: "it has no controller (a bare Pod)"},
		"a Pod of a ReplicaSet": {cached: withController(metav1.NewControllerRef(replicaSet, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))),
			ds:   lcDaemonSet(testDaemonSetUID),
			want: result{Status: http.StatusForbidden, Metric: refusedNotDaemonSetPod}, wantReason: "its controller is ReplicaSet lc-5d8f (apps/v1), not the DaemonSet"},
		"a Pod of another DaemonSet": {cached: withController(metav1.NewControllerRef(otherDS, daemonSetKind)), ds: lcDaemonSet(testDaemonSetUID),
			want: result{Status: http.StatusForbidden, Metric: refusedNotDaemonSetPod}, wantReason: "its controller is DaemonSet other"},
		"a Pod of the DaemonSet deleted and made again": {cached: lcPod("edge-0"), ds: lcDaemonSet("ds-uid-2"),
			want:       result{Status: http.StatusForbidden, Metric: refusedNotDaemonSetPod},
			wantReason: "of UID ds-uid, and that DaemonSet is now UID ds-uid-2"},
		"the DaemonSet does not exist": {cached: lcPod("edge-0"),
			want: result{Status: http.StatusForbidden, Metric: refusedNotDaemonSetPod}, wantReason: "DaemonSet nereid-system/nereid-localcontroller does not exist"},
		"the DaemonSet is being deleted": {cached: lcPod("edge-0"),
			ds:   func() *appsv1.DaemonSet { d := lcDaemonSet(testDaemonSetUID); d.DeletionTimestamp = &now; return d }(),
			want: result{Status: http.StatusForbidden, Metric: refusedNotDaemonSetPod}, wantReason: "is being deleted"},
		"a Pod in another namespace": {ds: lcDaemonSet(testDaemonSetUID), podName: types.NamespacedName{Namespace: "default", Name: "lc-edge-0"},
			want: result{Status: http.StatusForbidden, Metric: refusedNotDaemonSetPod}, wantReason: "in another namespace"},
		"a Pod that is gone": {ds: lcDaemonSet(testDaemonSetUID),
			want: result{Status: http.StatusUnauthorized, Metric: refusedInvalidToken}, wantReason: "no longer exists"},
		"a Pod made again under the same name": {pod: func() *corev1.Pod { p := lcPod("edge-0"); p.UID = "uid-new"; return p }(),
			ds:   lcDaemonSet(testDaemonSetUID),
			want: result{Status: http.StatusUnauthorized, Metric: refusedInvalidToken}, wantReason: "no longer exists"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			if tc.pod != nil {
				kube = kubefake.NewClientset(tc.pod)
			}
			cfg := testConfig.withDefaults()
			if err := cfg.validate(); err != nil {
				t.Fatal(err)
			}
			a := newAuthenticator(kube, cfg, clock.RealClock{})
			pods, daemonSets := cache.NewStore(cache.MetaNamespaceKeyFunc), cache.NewStore(cache.MetaNamespaceKeyFunc)
			a.podCache, a.daemonSets = stores{pods}, daemonSets
			if tc.cached != nil {
				_ = pods.Add(tc.cached)
			}
			if tc.ds != nil {
				_ = daemonSets.Add(tc.ds)
			}
			pod := cmpOr(tc.podName, types.NamespacedName{Namespace: hubNS, Name: "lc-edge-0"})
			uid, refusal := a.checkController(t.Context(), pod, "uid-edge-0")
			got := result{DaemonSet: uid}
			if refusal != nil {
				got.Status, got.Metric = refusal.status, refusal.metric
				if !strings.Contains(refusal.reason, tc.wantReason) || !strings.Contains(refusal.reason, pod.String()) {
					t.Errorf("reason %q, want it to name the Pod and say %q", refusal.reason, tc.wantReason)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// cmpOr is v, or def when v is the zero value.
func cmpOr(v, def types.NamespacedName) types.NamespacedName {
	if v == (types.NamespacedName{}) {
		return def
	}
	return v
}

// Through the hub: a token bound to a bare Pod of the LocalController's
// ServiceAccount on an edge node is refused before the upgrade with 403 and
// its own reason label; the DaemonSet's Pod on the same kind of node
// connects.
func TestABarePodOfTheServiceAccountIsRefused(t *testing.T) {
	bare := lcPod("edge-b")
	bare.OwnerReferences = nil
	f := newFixture(t, testConfig, append(edgeObjects(), bare)...)
	conn, resp, err := f.dial(jwtWith("token-edge-b", nil))
	if err == nil {
		conn.Close()
		t.Fatal("a bare Pod's token was upgraded")
	}
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
		t.Fatalf("dial: %v, want a refused handshake", err)
	}
	body := make([]byte, 512)
	n, _ := resp.Body.Read(body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body[:n]), "it has no controller (a bare Pod)") {
		t.Errorf("got %d %q, want 403 saying it is a bare Pod", resp.StatusCode, body[:n])
	}
	if got := f.metric("connections_refused_total", "reason", refusedNotDaemonSetPod); got != 1 {
		t.Errorf("connections_refused_total{reason=%q} = %v, want 1", refusedNotDaemonSetPod, got)
	}
	f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID}).untilSynced()
}
