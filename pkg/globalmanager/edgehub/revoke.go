package edgehub

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
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
	h.revokeWhere(auth.RevokedServiceAccountDeleted, func(s *session) string {
		if s.id.ServiceAccount != sa {
			return ""
		}
		return auth.ServiceAccountGone(s.id, current)
	})
}

// daemonSetChanged ends the connections of Pods of the LocalControllers'
// DaemonSet as it was, when current, its state now, says it is gone (nil),
// being deleted, or another DaemonSet of the same name.
func (h *Hub) daemonSetChanged(current *appsv1.DaemonSet) {
	h.revokeWhere(auth.RevokedDaemonSetDeleted, func(s *session) string { return h.auth.DaemonSetGone(s.id, current) })
}

// podControllerChanged ends the connection of pod when its controller is no
// longer the DaemonSet that admitted it (the DaemonSet released it).
func (h *Hub) podControllerChanged(pod *corev1.Pod) {
	controller := auth.ControllerUID(pod)
	h.revokeWhere(auth.RevokedNotDaemonSetPod, func(s *session) string {
		if s.id.PodUID != pod.UID || controller == s.id.DaemonSet {
			return ""
		}
		return fmt.Sprintf("the LocalController's Pod is no longer controlled by the DaemonSet %s (%s)", h.auth.DaemonSet(), s.id.Pod)
	})
}

// nodeLeft ends the connections of node once it is no longer an edge node:
// deleted, or its labels no longer match the edge node selector. The next
// reach scan judges it again.
func (h *Hub) nodeLeft(node string) {
	h.reachSaw()
	h.revokeWhere(auth.RevokedNotEdgeNode, func(s *session) string {
		if s.node != node {
			return ""
		}
		return fmt.Sprintf("node %s is no longer an edge node: deleted, or its labels no longer match %q", node, h.cfg.nodeSelector.String())
	})
}

// revokeIfGone ends s if the caches say its DaemonSet or its ServiceAccount
// went before s was recorded, when their events could not find it.
func (h *Hub) revokeIfGone(s *session) {
	if reason, why := h.auth.GoneFromCaches(s.id); why != "" {
		s.revoke(reason, why)
	}
}
