package placement

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// nodeTTL is how long what was read of a node is reused.
const nodeTTL = 10 * time.Second

// Nodes reads the nodes pods are pinned to, each at most once per nodeTTL:
// a waiting job's syncs ask again and again. A nil *Nodes reads nothing
// (what the scheduler wrote on the pods is still said).
type Nodes struct {
	kube  kubernetes.Interface
	clock clock.PassiveClock

	mu    sync.Mutex
	nodes map[string]nodeRead
}

// NewNodes reads nodes through kube, timed by clk.
func NewNodes(kube kubernetes.Interface, clk clock.PassiveClock) *Nodes {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Nodes{kube: kube, clock: clk}
}

type nodeRead struct {
	node *corev1.Node // nil: it does not exist
	ok   bool         // false: it could not be read
	// requested is what the pods bound there ask for; nil when they could
	// not be listed (resources are then not judged).
	requested corev1.ResourceList
	at        time.Time
}

// nodeSays says why pod, pinned to node, may not go there: the node does
// not exist, is cordoned, has a taint the pod does not tolerate, or has
// less of a resource free than the pod asks for. Empty when none of these
// holds (the scheduler's message says the rest). lasts says the refusal
// holds until a person acts (every reason but a node too full for now:
// one whose pods will end). A pod already bound to the node (its
// template's spec.nodeName, never seen by a scheduler) is judged only by
// whether the node exists: a kubelet runs it whatever the taints say.
func (r *Nodes) nodeSays(ctx context.Context, pod *corev1.Pod, node string) (why string, lasts bool) {
	if r == nil || r.kube == nil || node == "" {
		return "", false
	}
	read := r.get(ctx, node)
	if !read.ok {
		return "", false
	}
	n := read.node
	switch {
	case n == nil:
		return "which does not exist", true
	case pod.Spec.NodeName != "":
		return "", false
	case n.Spec.Unschedulable:
		return "which is cordoned (unschedulable)", true
	}
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
	if len(untolerated) > 0 {
		return "whose taint " + strings.Join(untolerated, ", ") + " it does not tolerate", true
	}
	return short(pod, n, read.requested)
}

// short says which resource node n has too little of for pod: "" when it
// has enough of each (or what is requested there is not known). lasts
// says the pod asks for more of one than the node can hold at all, not
// only than it has free now.
func short(pod *corev1.Pod, n *corev1.Node, requested corev1.ResourceList) (why string, lasts bool) {
	if len(n.Status.Allocatable) == 0 {
		return "", false // a node that reports nothing
	}
	asks := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	names := make([]string, 0, len(asks))
	for name := range asks {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var whys []string
	for _, name := range names {
		want := asks[corev1.ResourceName(name)]
		if want.IsZero() {
			continue
		}
		allocatable, has := n.Status.Allocatable[corev1.ResourceName(name)]
		if !has {
			allocatable = resource.Quantity{}
		}
		if want.Cmp(allocatable) > 0 {
			lasts = true
		}
		if requested == nil {
			// The pods there could not be listed (a GlobalManager of one
			// namespace sees no others'): what the node has at all.
			if want.Cmp(allocatable) > 0 {
				whys = append(whys, fmt.Sprintf("%s: it asks for %s, the node has %s allocatable", name, want.String(), allocatable.String()))
			}
			continue
		}
		free := allocatable.DeepCopy()
		used := requested[corev1.ResourceName(name)]
		free.Sub(used)
		if want.Cmp(free) <= 0 {
			continue
		}
		if free.Sign() < 0 {
			free = resource.Quantity{}
		}
		whys = append(whys, fmt.Sprintf("%s: it asks for %s, %s of the node's %s allocatable is free (%s requested by the pods there)",
			name, want.String(), free.String(), allocatable.String(), used.String()))
	}
	if len(whys) == 0 {
		return "", false
	}
	return "which has too little free: " + strings.Join(whys, "; "), lasts
}

// get is what is known of the node (its node nil when it does not exist,
// ok false when it could not be read).
func (r *Nodes) get(ctx context.Context, node string) nodeRead {
	now := r.clock.Now()
	r.mu.Lock()
	read, cached := r.nodes[node]
	r.mu.Unlock()
	if cached && now.Sub(read.at) < nodeTTL {
		return read
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := r.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	read = nodeRead{at: now, ok: err == nil || apierrors.IsNotFound(err)}
	if err == nil {
		// What is judged of it: its taints, whether it is cordoned, what
		// it can hold and what its pods ask for.
		read.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Spec:   corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
			Status: corev1.NodeStatus{Allocatable: n.Status.Allocatable}}
		read.requested = r.requested(ctx, node)
	}
	r.mu.Lock()
	if r.nodes == nil || len(r.nodes) > 10000 {
		// Bounded: the names come from templates anyone may write.
		r.nodes = map[string]nodeRead{}
	}
	r.nodes[node] = read
	r.mu.Unlock()
	return read
}

// requested is the sum of what the unfinished pods bound to node ask for,
// nil when they cannot be listed (then only allocatable is judged).
func (r *Nodes) requested(ctx context.Context, node string) corev1.ResourceList {
	pods, err := r.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil
	}
	sum := corev1.ResourceList{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node || common.PodFinished(p) {
			continue
		}
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
	}
	return sum
}
