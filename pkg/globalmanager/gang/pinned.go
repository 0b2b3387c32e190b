package gang

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// AnnotationPinnedNode is, on a pod whose template named a node
// (spec.nodeName) that Decorate turned into a required node affinity, that
// node: what a waiting gang's condition names, with why the pod cannot go
// there.
const AnnotationPinnedNode = "nereid.io/pinned-node"

// pinnedNodeTTL is how long what was read of a pinned node is reused.
const pinnedNodeTTL = 10 * time.Second

// nodeReads reads the nodes pods are pinned to, each at most once per
// pinnedNodeTTL: a waiting job's syncs ask again and again.
type nodeReads struct {
	kube  kubernetes.Interface
	clock clock.PassiveClock

	mu    sync.Mutex
	nodes map[string]nodeRead
}

type nodeRead struct {
	node *corev1.Node // nil: it does not exist
	ok   bool         // false: it could not be read
	at   time.Time
}

// pinnedSays says why pod, pinned to a node (AnnotationPinnedNode), may not
// be placed: the node does not exist, is cordoned, or has a taint the pod
// does not tolerate. Empty when none of these holds (the scheduler's
// message says the rest).
func (r *nodeReads) pinnedSays(ctx context.Context, pod *corev1.Pod) string {
	node := pod.Annotations[AnnotationPinnedNode]
	if r == nil || r.kube == nil || node == "" {
		return ""
	}
	n, ok := r.get(ctx, node)
	if !ok {
		return ""
	}
	why := ""
	switch {
	case n == nil:
		why = "which does not exist"
	case n.Spec.Unschedulable:
		why = "which is cordoned (unschedulable)"
	default:
		var untolerated []string
		for i := range n.Spec.Taints {
			t := &n.Spec.Taints[i]
			if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
				continue
			}
			if !slices.ContainsFunc(pod.Spec.Tolerations, func(tol corev1.Toleration) bool {
				return tol.ToleratesTaint(klog.FromContext(ctx), t, false)
			}) {
				untolerated = append(untolerated, t.ToString())
			}
		}
		if len(untolerated) == 0 {
			return ""
		}
		why = "whose taint " + strings.Join(untolerated, ", ") + " it does not tolerate"
	}
	return fmt.Sprintf("pod %s is pinned to node %s, %s", pod.Name, node, why)
}

// get is the node, nil when it does not exist; ok false when it could not
// be read.
func (r *nodeReads) get(ctx context.Context, node string) (*corev1.Node, bool) {
	now := r.clock.Now()
	r.mu.Lock()
	read, cached := r.nodes[node]
	r.mu.Unlock()
	if cached && now.Sub(read.at) < pinnedNodeTTL {
		return read.node, read.ok
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := r.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	read = nodeRead{at: now, ok: err == nil || apierrors.IsNotFound(err)}
	if err == nil {
		// What is judged of it: its taints and whether it is cordoned.
		read.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Spec: corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints}}
	}
	r.mu.Lock()
	if r.nodes == nil || len(r.nodes) > 10000 {
		// Bounded: the names come from templates anyone may write.
		r.nodes = map[string]nodeRead{}
	}
	r.nodes[node] = read
	r.mu.Unlock()
	return read.node, read.ok
}
