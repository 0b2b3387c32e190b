package auth

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
)

// A Pod is a LocalController only when the LocalControllers' DaemonSet, as
// it is now, controls it; whatever else it is, it is refused with a reason
// that says what it is.
func TestOnlyTheDaemonSetsPodsAreLocalControllers(t *testing.T) {
	now := metav1.Now()
	withController := func(ref *metav1.OwnerReference) *corev1.Pod {
		p := edgehubtest.LCPod("edge-0")
		p.OwnerReferences = nil
		if ref != nil {
			p.OwnerReferences = []metav1.OwnerReference{*ref}
		}
		return p
	}
	replicaSet := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "lc-5d8f", UID: "rs-uid"}}
	otherDS := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "other", UID: edgehubtest.DaemonSetUID}}
	type result struct {
		DaemonSet types.UID
		Status    int
		Metric    string
	}
	cases := map[string]struct {
		pod        *corev1.Pod          // in the API server, not cached; nil for none
		cached     *corev1.Pod          // in the cache
		ds         *appsv1.DaemonSet    // nil for none
		podName    types.NamespacedName // the token's Pod, lc-edge-0 in edgehubtest.Namespace when empty
		want       result
		wantReason string
	}{
		"a Pod of the DaemonSet, cached": {cached: edgehubtest.LCPod("edge-0"), ds: edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID),
			want: result{DaemonSet: edgehubtest.DaemonSetUID}},
		"a Pod of the DaemonSet, just made (read)": {pod: edgehubtest.LCPod("edge-0"), ds: edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID),
			want: result{DaemonSet: edgehubtest.DaemonSetUID}},
		"a bare Pod": {cached: withController(nil), ds: edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID),
			want: result{Status: http.StatusForbidden, Metric: RefusedNotDaemonSetPod}, wantReason: "it has no controller (a bare Pod)"},
		"a Pod of a ReplicaSet": {cached: withController(metav1.NewControllerRef(replicaSet, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))),
			ds:   edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID),
			want: result{Status: http.StatusForbidden, Metric: RefusedNotDaemonSetPod}, wantReason: "its controller is ReplicaSet lc-5d8f (apps/v1), not the DaemonSet"},
		"a Pod of another DaemonSet": {cached: withController(metav1.NewControllerRef(otherDS, daemonSetKind)), ds: edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID),
			want: result{Status: http.StatusForbidden, Metric: RefusedNotDaemonSetPod}, wantReason: "its controller is DaemonSet other"},
		"a Pod of the DaemonSet deleted and made again": {cached: edgehubtest.LCPod("edge-0"), ds: edgehubtest.LCDaemonSet("ds-uid-2"),
			want:       result{Status: http.StatusForbidden, Metric: RefusedNotDaemonSetPod},
			wantReason: "of UID ds-uid, and that DaemonSet is now UID ds-uid-2"},
		"the DaemonSet does not exist": {cached: edgehubtest.LCPod("edge-0"),
			want: result{Status: http.StatusForbidden, Metric: RefusedNotDaemonSetPod}, wantReason: "DaemonSet nereid-system/nereid-localcontroller does not exist"},
		"the DaemonSet is being deleted": {cached: edgehubtest.LCPod("edge-0"),
			ds: func() *appsv1.DaemonSet {
				d := edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID)
				d.DeletionTimestamp = &now
				return d
			}(),
			want: result{Status: http.StatusForbidden, Metric: RefusedNotDaemonSetPod}, wantReason: "is being deleted"},
		"a Pod in another namespace": {ds: edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID), podName: types.NamespacedName{Namespace: "default", Name: "lc-edge-0"},
			want: result{Status: http.StatusForbidden, Metric: RefusedNotDaemonSetPod}, wantReason: "in another namespace"},
		"a Pod that is gone": {ds: edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID),
			want: result{Status: http.StatusUnauthorized, Metric: RefusedInvalidToken}, wantReason: "no longer exists"},
		"a Pod made again under the same name": {pod: func() *corev1.Pod { p := edgehubtest.LCPod("edge-0"); p.UID = "uid-new"; return p }(),
			ds:   edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID),
			want: result{Status: http.StatusUnauthorized, Metric: RefusedInvalidToken}, wantReason: "no longer exists"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kube := kubefake.NewClientset()
			if tc.pod != nil {
				kube = kubefake.NewClientset(tc.pod)
			}
			a := New(testConfig(t, kube, clock.RealClock{}))
			pods, daemonSets := cache.NewStore(cache.MetaNamespaceKeyFunc), cache.NewStore(cache.MetaNamespaceKeyFunc)
			a.podCache, a.daemonSets = stores{pods}, daemonSets
			if tc.cached != nil {
				_ = pods.Add(tc.cached)
			}
			if tc.ds != nil {
				_ = daemonSets.Add(tc.ds)
			}
			pod := cmpOr(tc.podName, types.NamespacedName{Namespace: edgehubtest.Namespace, Name: "lc-edge-0"})
			uid, refusal := a.checkController(t.Context(), pod, "uid-edge-0")
			got := result{DaemonSet: uid}
			if refusal != nil {
				got.Status, got.Metric = refusal.Status, refusal.Metric
				if !strings.Contains(refusal.Reason, tc.wantReason) || !strings.Contains(refusal.Reason, pod.String()) {
					t.Errorf("reason %q, want it to name the Pod and say %q", refusal.Reason, tc.wantReason)
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
