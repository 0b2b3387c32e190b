package placement

import (
	"context"
	"fmt"
	"maps"
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

// maxNodesKept bounds what is kept of nodes: their names come from
// templates anyone who may write a job writes.
const maxNodesKept = 10000

// Nodes reads the nodes pods are pinned to, each at most once per nodeTTL,
// and what the pods bound to one ask for only when a pod not yet bound
// there is judged by it: a waiting job's syncs ask again and again, many
// at once. A nil *Nodes reads nothing (what the scheduler wrote on the pods
// is still said).
type Nodes struct {
	kube kubernetes.Interface

	nodes     readOnce[nodeRead]
	requested readOnce[corev1.ResourceList]
}

// NewNodes reads nodes through kube, timed by clk.
func NewNodes(kube kubernetes.Interface, clk clock.PassiveClock) *Nodes {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Nodes{kube: kube, nodes: readOnce[nodeRead]{clock: clk}, requested: readOnce[corev1.ResourceList]{clock: clk}}
}

type nodeRead struct {
	node *corev1.Node // nil: it does not exist
	ok   bool         // false: it could not be read
}

// readOnce keeps what was read of each key for nodeTTL and reads a key
// once at a time: the callers asking while it is read wait for that read.
// What is older than nodeTTL is dropped by a sweep nodeTTL after a read,
// whether or not anyone asks again: a node read while its job's pods
// waited is not kept once they run.
type readOnce[V any] struct {
	clock clock.PassiveClock

	mu       sync.Mutex
	reads    map[string]*reading[V]
	sweeping bool // a sweep is due
}

type reading[V any] struct {
	done  chan struct{} // closed once value is read
	value V
	at    time.Time
}

// get is key's value, read by read unless a read of it finished less than
// nodeTTL ago or is under way; the zero value when ctx ends first.
func (c *readOnce[V]) get(ctx context.Context, key string, read func() V) V {
	now := c.clock.Now()
	c.mu.Lock()
	r, ok := c.reads[key]
	if ok && isDone(r.done) {
		ok = now.Sub(r.at) < nodeTTL // else it is under way
	}
	if ok {
		c.mu.Unlock()
		select {
		case <-r.done:
			return r.value
		case <-ctx.Done():
			var zero V
			return zero
		}
	}
	if c.reads == nil || len(c.reads) >= maxNodesKept {
		c.reads = map[string]*reading[V]{} // a read under way still ends for its waiters
	}
	r = &reading[V]{done: make(chan struct{}), at: now}
	c.reads[key] = r
	if !c.sweeping {
		c.sweeping = true
		time.AfterFunc(nodeTTL, c.sweep)
	}
	c.mu.Unlock()
	r.value = read()
	close(r.done)
	return r.value
}

// sweep drops the reads older than nodeTTL, and comes again while any is
// kept.
func (c *readOnce[V]) sweep() {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	maps.DeleteFunc(c.reads, func(_ string, r *reading[V]) bool { return now.Sub(r.at) >= nodeTTL && isDone(r.done) })
	c.sweeping = len(c.reads) > 0
	if c.sweeping {
		time.AfterFunc(nodeTTL, c.sweep)
	}
}

// isDone says whether done is closed.
func isDone(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
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
	read := r.node(ctx, node)
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
	return short(pod, n, func() corev1.ResourceList { return r.requestedOn(ctx, node) })
}

// short says which resource node n has too little of for pod: "" when it
// has enough of each (or what is requested there is not known). lasts
// says the pod asks for more of one than the node can hold at all, not
// only than it has free now. requestedThere is what the pods on the node
// ask for, read only when pod asks for something.
func short(pod *corev1.Pod, n *corev1.Node, requestedThere func() corev1.ResourceList) (why string, lasts bool) {
	if len(n.Status.Allocatable) == 0 {
		return "", false // a node that reports nothing
	}
	asks := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	asksAny := false
	for _, q := range asks {
		asksAny = asksAny || !q.IsZero()
	}
	if !asksAny {
		return "", false // the pods there need not be read
	}
	requested := requestedThere()
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

// node is what is known of the node (its node nil when it does not exist,
// ok false when it could not be read).
func (r *Nodes) node(ctx context.Context, node string) nodeRead {
	return r.nodes.get(ctx, node, func() nodeRead {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		n, err := r.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		read := nodeRead{ok: err == nil || apierrors.IsNotFound(err)}
		if err == nil {
			// What is judged of it: its taints, whether it is cordoned and
			// what it can hold.
			read.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name},
				Spec:   corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
				Status: corev1.NodeStatus{Allocatable: n.Status.Allocatable}}
		}
		return read
	})
}

// requestedOn is the sum of what the unfinished pods bound to node ask for,
// nil when they cannot be listed (then only allocatable is judged). They
// are listed from the API server's cache (resourceVersion 0): a message
// does not need a quorum read of every pod on the node.
func (r *Nodes) requestedOn(ctx context.Context, node string) corev1.ResourceList {
	return r.requested.get(ctx, node, func() corev1.ResourceList {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		pods, err := r.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("spec.nodeName", node).String(),
			ResourceVersion: "0",
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
	})
}
