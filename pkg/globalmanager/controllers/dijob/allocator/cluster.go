package allocator

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// amounts are quantities of resources in thousandths (a quantity's
// MilliValue), so that fitting is integer arithmetic.
type amounts map[corev1.ResourceName]int64

// maxAmount bounds one quantity in thousandths (2^60: a million million
// cores, an exbibyte) and maxSum a sum of them, so that no arithmetic on
// amounts overflows: anyone who may create a pod chooses its requests, and
// MilliValue wraps past 2^63 thousandths (cpu "1e16" is 0 to it, cpu
// "9223372036854776" far below zero), which would make a node that a pod
// fills look empty, or a replica that asks for everything ask for nothing.
const (
	maxAmount int64 = 1 << 60
	maxSum    int64 = 1 << 61
)

// milliOf is q in thousandths, within [0, maxAmount].
func milliOf(q resource.Quantity) int64 {
	switch {
	case q.Sign() <= 0:
		return 0
	case q.Cmp(*resource.NewMilliQuantity(maxAmount, resource.DecimalSI)) >= 0:
		return maxAmount
	}
	return q.MilliValue()
}

// add adds b to a (sign 1) or takes it away (sign -1), each sum held within
// [-maxSum, maxSum].
func (a amounts) add(b amounts, sign int64) {
	for name, v := range b {
		a[name] = min(max(a[name]+sign*v, -maxSum), maxSum)
	}
}

// onePod is what every replica takes of a node's allocatable "pods".
const onePod = 1000

// cluster is the room on the nodes while jobs are placed.
type cluster struct {
	nodes  []*node // sorted by name, so that ties go to the first name
	byName map[string]*node
}

// node is one node of a cluster.
type node struct {
	name        string
	schedulable bool
	edge        bool
	// match is what the node affinity matcher reads: name and labels.
	match *corev1.Node
	// taints are the node's NoSchedule and NoExecute taints.
	taints   []corev1.Taint
	capacity amounts
	// taken is the node's Used, plus the placements counted since.
	taken amounts
}

func newCluster(views []Node) *cluster {
	c := &cluster{byName: make(map[string]*node, len(views))}
	for _, v := range views {
		if _, dup := c.byName[v.Name]; dup {
			continue
		}
		_, edge := v.Labels[EdgeNodeLabel]
		n := &node{
			name:        v.Name,
			schedulable: v.Schedulable,
			edge:        edge,
			match:       &corev1.Node{},
			capacity:    milli(v.Allocatable),
			taken:       milli(v.Used),
		}
		n.match.Name, n.match.Labels = v.Name, v.Labels
		for _, t := range v.Taints {
			if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
				n.taints = append(n.taints, t)
			}
		}
		c.byName[v.Name] = n
		c.nodes = append(c.nodes, n)
	}
	slices.SortFunc(c.nodes, func(a, b *node) int { return strings.Compare(a.name, b.name) })
	return c
}

func milli(list corev1.ResourceList) amounts {
	a := make(amounts, len(list))
	for name, q := range list {
		a[name] = milliOf(q)
	}
	return a
}

// candidate is a replica with its rules parsed.
type candidate struct {
	Replica
	// index is the replica's place in the job's replicas.
	index int
	// spread is true for collectors, false for the packed types.
	spread bool
	// edge is true when the replica asks for edge nodes.
	edge     bool
	selector labels.Selector            // nil when the replica has no nodeSelector
	affinity *nodeaffinity.NodeSelector // nil when it has no required node affinity
	// err is why the replica's node affinity cannot be read.
	err error
	// needs are the replica's non-zero requests and one pod.
	needs amounts
	// resources are the names in needs, in the order messages name them.
	resources []corev1.ResourceName
}

func candidates(job Job) []*candidate {
	cands := make([]*candidate, len(job.Replicas))
	for i, r := range job.Replicas {
		c := &candidate{Replica: r, index: i, spread: r.Type == v2alpha1.TaskTypeCollector, edge: asksForEdge(r), needs: amounts{}}
		for name, q := range r.Requests {
			if v := milliOf(q); v > 0 && name != corev1.ResourcePods {
				c.needs[name] = v
			}
		}
		c.needs[corev1.ResourcePods] = onePod
		c.resources = ordered(c.needs)
		if len(r.NodeSelector) > 0 {
			c.selector = labels.SelectorFromSet(r.NodeSelector)
		}
		if required := requiredTerms(r.Affinity); required != nil {
			c.affinity, c.err = nodeaffinity.NewNodeSelector(required)
			if c.err != nil {
				c.err = fmt.Errorf("%s: required node affinity: %w", describe(r), c.err)
			}
		}
		cands[i] = c
	}
	return cands
}

func requiredTerms(a *corev1.Affinity) *corev1.NodeSelector {
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
}

// asksForEdge says whether a replica requires EdgeNodeLabel: its
// nodeSelector names it, or every term of its required node affinity needs
// the label present (In, Exists, Gt or Lt).
func asksForEdge(r Replica) bool {
	if _, ok := r.NodeSelector[EdgeNodeLabel]; ok {
		return true
	}
	required := requiredTerms(r.Affinity)
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		return false
	}
	for _, term := range required.NodeSelectorTerms {
		if !slices.ContainsFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool {
			return e.Key == EdgeNodeLabel && e.Operator != corev1.NodeSelectorOpNotIn && e.Operator != corev1.NodeSelectorOpDoesNotExist
		}) {
			return false
		}
	}
	return true
}

// ordered returns the names of a in the order messages name them: cpu,
// memory, ephemeral-storage, the others by name, pods last.
func ordered(a amounts) []corev1.ResourceName {
	first := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	rank := func(n corev1.ResourceName) int {
		if i := slices.Index(first, n); i >= 0 {
			return i
		}
		if n == corev1.ResourcePods {
			return len(first) + 1
		}
		return len(first)
	}
	names := make([]corev1.ResourceName, 0, len(a))
	for n := range a {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y corev1.ResourceName) int {
		if d := rank(x) - rank(y); d != 0 {
			return d
		}
		return strings.Compare(string(x), string(y))
	})
	return names
}

// Exclusion is why a replica may not use a node.
type Exclusion string

// The exclusions, in the order they are checked: a node is excluded for the
// first that applies.
const (
	// ExcludedNotReady: the node is cordoned or not Ready.
	ExcludedNotReady Exclusion = "NotReady"
	// ExcludedSelector: the replica's nodeSelector or required node
	// affinity does not select the node.
	ExcludedSelector Exclusion = "Selector"
	// ExcludedEdge: the node is an edge node and the replica does not ask
	// for edge nodes.
	ExcludedEdge Exclusion = "Edge"
	// ExcludedTaint: the node has a NoSchedule or NoExecute taint the
	// replica does not tolerate.
	ExcludedTaint Exclusion = "Taint"
)

// exclusion returns why the replica may not use n, "" when it may, and for
// ExcludedTaint the taint.
func (c *candidate) exclusion(n *node) (Exclusion, corev1.Taint) {
	if !n.schedulable {
		return ExcludedNotReady, corev1.Taint{}
	}
	if c.err != nil {
		// An affinity that cannot be read selects nothing, as for the
		// scheduler.
		return ExcludedSelector, corev1.Taint{}
	}
	if c.selector != nil && !c.selector.Matches(labels.Set(n.match.Labels)) {
		return ExcludedSelector, corev1.Taint{}
	}
	if c.affinity != nil && !c.affinity.Match(n.match) {
		return ExcludedSelector, corev1.Taint{}
	}
	if n.edge && !c.edge {
		return ExcludedEdge, corev1.Taint{}
	}
	// Comparison operators in tolerations are an alpha feature of Kubernetes
	// 1.35, off by default; with them off the logger is never used.
	if taint, untolerated := schedulingcorev1.FindMatchingUntoleratedTaint(klog.Background(), n.taints, c.Tolerations, nil, false); untolerated {
		return ExcludedTaint, taint
	}
	return "", corev1.Taint{}
}

// plan is one job's placement while it is made: what its replicas take on
// each node, on top of the cluster's taken.
type plan struct {
	c     *cluster
	added map[*node]amounts
	count map[*node]int
	// placed counts the replicas placed so far.
	placed int
}

// free returns how much of a resource n has free, and whether n lists it.
func (p *plan) free(n *node, name corev1.ResourceName) (int64, bool) {
	capacity, listed := n.capacity[name]
	return capacity - n.taken[name] - p.added[n][name], listed
}

func (p *plan) fits(n *node, c *candidate) bool {
	for name, need := range c.needs {
		free, listed := p.free(n, name)
		if !listed && name == corev1.ResourcePods {
			continue
		}
		if free < need {
			return false
		}
	}
	return true
}

// fullness is how full n is for c: the mean, over the resources c requests,
// of the share of n's allocatable taken (by pods, other placements and this
// job's replicas placed so far); for a replica that requests nothing, the
// share of its pods.
func (p *plan) fullness(n *node, c *candidate) float64 {
	sum, count := 0.0, 0
	for name := range c.needs {
		if name == corev1.ResourcePods && len(c.needs) > 1 {
			continue
		}
		capacity := n.capacity[name]
		if capacity <= 0 {
			continue
		}
		sum += float64(n.taken[name]+p.added[n][name]) / float64(capacity)
		count++
	}
	if count == 0 {
		return 0
	}
	return sum / float64(count)
}

func (p *plan) add(n *node, c *candidate) {
	if p.added[n] == nil {
		p.added[n] = amounts{}
	}
	p.added[n].add(c.needs, 1)
	p.count[n]++
	p.placed++
}

// choose returns the node for c: for a packed replica the fullest it fits
// on, for a spread one the one with the fewest replicas of the job, then the
// emptiest; ties to the first by name. It returns nil when c fits nowhere.
func (p *plan) choose(c *candidate) *node {
	var best *node
	bestCount, bestFullness := 0, 0.0
	for _, n := range p.c.nodes {
		if reason, _ := c.exclusion(n); reason != "" || !p.fits(n, c) {
			continue
		}
		count, fullness := p.count[n], p.fullness(n, c)
		better := best == nil
		switch {
		case better:
		case c.spread:
			better = count < bestCount || (count == bestCount && fullness < bestFullness)
		default:
			better = fullness > bestFullness
		}
		if better {
			best, bestCount, bestFullness = n, count, fullness
		}
	}
	return best
}

// place places a job's replicas, the packed ones first, then the collectors,
// each in rank order, without taking anything in the cluster. It returns
// the placement, or why the first replica that found no node did not fit.
func (c *cluster) place(key string, cands []*candidate) (Placement, *NotFitError) {
	order := make([]*candidate, 0, len(cands))
	for _, spread := range []bool{false, true} {
		for _, cand := range cands {
			if cand.spread == spread {
				order = append(order, cand)
			}
		}
	}
	p := &plan{c: c, added: map[*node]amounts{}, count: map[*node]int{}}
	placement := make(Placement, len(cands))
	for _, cand := range order {
		n := p.choose(cand)
		if n == nil {
			return nil, p.notFit(key, cand)
		}
		p.add(n, cand)
		placement[cand.index] = n.name
	}
	return placement, nil
}

// take counts what a placement of the replicas takes on its nodes (sign 1),
// or gives it back (sign -1). Replicas on nodes the cluster does not have
// take nothing.
func (c *cluster) take(cands []*candidate, placement Placement, sign int64) {
	for i, name := range placement {
		if n, ok := c.byName[name]; ok && i < len(cands) {
			n.taken.add(cands[i].needs, sign)
		}
	}
}

// usable says whether every replica may still use its node in placement:
// the node is there, schedulable, and suits the replica's selector,
// affinity, pool and tolerations. Free room is not checked: the replicas'
// pods are on those nodes and hold it.
func (c *cluster) usable(cands []*candidate, placement Placement) bool {
	if len(placement) != len(cands) {
		return false
	}
	for i, name := range placement {
		n, ok := c.byName[name]
		if !ok {
			return false
		}
		if reason, _ := cands[i].exclusion(n); reason != "" {
			return false
		}
	}
	return true
}
