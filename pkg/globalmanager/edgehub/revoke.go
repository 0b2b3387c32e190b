package edgehub

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// An open connection lasts only as long as what admitted it: its token, its
// Pod, the Pod's DaemonSet, its ServiceAccount and its node's edge labels.
// The watches the hub has for admitting connections (the LocalController
// Pods, the accepted ServiceAccounts, the edge nodes, the DaemonSet) end the
// connections whose identity an event takes away, within the watch's
// latency: a Pod deleted or no longer controlled by the DaemonSet (the
// DaemonSet released it), the ServiceAccount deleted or made again, the
// DaemonSet deleted or made again, the node deleted or its labels no longer
// matching the edge node selector. What a watch could miss, and a token that
// stops verifying (a signing key the API server dropped), the recheck of
// every open connection finds (recheck.go), within revocationBound.

// revokeWhere ends the sessions for which why says why, with reason.
func (h *Hub) revokeWhere(reason string, why func(s *session) string) {
	type gone struct {
		s   *session
		why string
	}
	var ending []gone
	h.mu.RLock()
	for _, s := range h.sessions {
		if w := why(s); w != "" {
			ending = append(ending, gone{s, w})
		}
	}
	h.mu.RUnlock()
	// Closing writes to the connection: not under the lock the informers'
	// handlers take.
	for _, g := range ending {
		g.s.revoke(reason, g.why)
	}
}

// serviceAccountChanged ends the connections of sa (namespace/name) when
// current, its state now, says it is gone (nil), being deleted, or another
// ServiceAccount of the same name.
func (h *Hub) serviceAccountChanged(sa string, current *corev1.ServiceAccount) {
	h.auth.forgetServiceAccount(sa)
	h.revokeWhere(revokedServiceAccountDeleted, func(s *session) string {
		if s.id.serviceAccount != sa {
			return ""
		}
		return serviceAccountGone(s.id, current)
	})
}

// The reasons say first what went, then its name: a close frame holds 123
// bytes of them.

// serviceAccountGone says why id's ServiceAccount, whose state now is
// current (nil: deleted), no longer admits it; "" if it does.
func serviceAccountGone(id *identity, current *corev1.ServiceAccount) string {
	switch {
	case current == nil:
		return fmt.Sprintf("the LocalController's ServiceAccount was deleted (%s)", id.serviceAccount)
	case current.DeletionTimestamp != nil:
		return fmt.Sprintf("the LocalController's ServiceAccount is being deleted (%s)", id.serviceAccount)
	case id.serviceAccountUID != "" && current.UID != id.serviceAccountUID:
		return fmt.Sprintf("the LocalController's ServiceAccount was deleted and made again (%s)", id.serviceAccount)
	}
	return ""
}

// daemonSetChanged ends the connections of Pods of the LocalControllers'
// DaemonSet as it was, when current, its state now, says it is gone (nil),
// being deleted, or another DaemonSet of the same name.
func (h *Hub) daemonSetChanged(current *appsv1.DaemonSet) {
	h.auth.forgetDaemonSet()
	h.revokeWhere(revokedDaemonSetDeleted, func(s *session) string { return h.daemonSetGone(s.id, current) })
}

// daemonSetGone says why the DaemonSet, whose state now is current (nil:
// deleted), no longer admits id; "" if it does.
func (h *Hub) daemonSetGone(id *identity, current *appsv1.DaemonSet) string {
	ds := h.auth.daemonSet
	switch {
	case current == nil:
		return fmt.Sprintf("the LocalControllers' DaemonSet was deleted (%s)", ds)
	case current.DeletionTimestamp != nil:
		return fmt.Sprintf("the LocalControllers' DaemonSet is being deleted (%s)", ds)
	case current.UID != id.daemonSet:
		return fmt.Sprintf("the LocalControllers' DaemonSet was deleted and made again (%s)", ds)
	}
	return ""
}

// podControllerChanged ends the connection of pod when its controller is no
// longer the DaemonSet that admitted it (the DaemonSet released it).
func (h *Hub) podControllerChanged(pod *corev1.Pod) {
	h.auth.forgetPodIdentities(pod.UID)
	controller := controllerUID(pod)
	h.revokeWhere(revokedNotDaemonSetPod, func(s *session) string {
		if s.id.podUID != pod.UID || controller == s.id.daemonSet {
			return ""
		}
		return fmt.Sprintf("the LocalController's Pod is no longer controlled by the DaemonSet %s (%s)", h.auth.daemonSet, s.id.pod)
	})
}

// nodeLeft ends the connections of node once it is no longer an edge node:
// deleted, or its labels no longer match the edge node selector.
func (h *Hub) nodeLeft(node string) {
	h.auth.forgetNode(node)
	h.revokeWhere(revokedNotEdgeNode, func(s *session) string {
		if s.node != node {
			return ""
		}
		return fmt.Sprintf("node %s is no longer an edge node: deleted, or its labels no longer match %q", node, h.cfg.nodeSelector.String())
	})
}

// revokeIfGone ends s if the caches say its DaemonSet or its ServiceAccount
// went before s was recorded, when their events could not find it. A
// ServiceAccount the cache does not hold proves nothing (the cache may lag
// one just made); the recheck settles it.
func (h *Hub) revokeIfGone(s *session) {
	ds, _ := cachedObject[*appsv1.DaemonSet](h.auth.daemonSets, h.auth.daemonSet.String())
	if why := h.daemonSetGone(s.id, ds); why != "" {
		s.revoke(revokedDaemonSetDeleted, why)
		return
	}
	if sa, ok := get[*corev1.ServiceAccount](h.auth.accountCache, s.id.serviceAccount); ok {
		if why := serviceAccountGone(s.id, sa); why != "" {
			s.revoke(revokedServiceAccountDeleted, why)
		}
	}
}

// controllerUID is the UID of pod's controller, "" for none.
func controllerUID(pod *corev1.Pod) types.UID {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return ref.UID
	}
	return ""
}
