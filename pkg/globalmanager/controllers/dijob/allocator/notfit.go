package allocator

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// NotFitError says why a job does not fit, about the first replica that
// found no node. Its message is written for the job's user: it is what
// kubectl describe shows.
type NotFitError struct {
	// Job is the job's key.
	Job string
	// Replica is the replica that found no node.
	Replica Replica
	// Placed counts the job's replicas placed before it: what they take was
	// not free for it.
	Placed int
	// Nodes counts the nodes the replica may use: schedulable, selected by
	// its nodeSelector and required node affinity, of its pool (edge or
	// cloud), and with every NoSchedule and NoExecute taint tolerated.
	Nodes int
	// RuledOut says why the other nodes may not be used, one entry per
	// reason, in the order of the Exclusion constants.
	RuledOut []RuledOut
	// Resource, when Nodes is not 0, is the first resource (cpu, memory,
	// ephemeral-storage, the others by name, pods) that none of those nodes
	// has enough of free; "" when each lacks a different one (see Lacking).
	Resource corev1.ResourceName
	// Requested is what the replica requests of Resource.
	Requested resource.Quantity
	// MostFree is the most of Resource free on one of those nodes (never
	// below zero), on MostFreeNode, the first by name of equals;
	// MostFreeNode is "" when none of them has Resource at all.
	MostFree     resource.Quantity
	MostFreeNode string
	// Lacking, when Nodes is not 0 and Resource is "", says for each node the
	// replica may use the first resource it has too little of free.
	Lacking []Lack
}

// RuledOut is the nodes a replica may not use for one reason.
type RuledOut struct {
	Reason Exclusion
	// Nodes are the nodes ruled out, by name.
	Nodes []string
	// Taints, for ExcludedTaint, are the taints not tolerated, one per node.
	Taints []corev1.Taint
}

// Lack is a resource a node has too little of free.
type Lack struct {
	Node     string
	Resource corev1.ResourceName
	Free     resource.Quantity
}

// shownNodes is how many nodes a message names for one reason.
const shownNodes = 3

// describe names a replica as messages do.
func describe(r Replica) string {
	return fmt.Sprintf("replica %d (%s, rank %d of the task)", r.Rank, r.Task, r.TaskRank)
}

func (e *NotFitError) Error() string {
	var b strings.Builder
	b.WriteString(describe(e.Replica))
	if e.Nodes == 0 {
		e.writeRuledOut(&b)
		return b.String()
	}
	switch {
	case e.Resource != "" && e.MostFreeNode != "":
		fmt.Fprintf(&b, " needs %s %s: the most free on %s it may use is %s (%s)",
			e.Resource, e.Requested.String(), theNodes(e.Nodes), e.MostFree.String(), e.MostFreeNode)
	case e.Resource != "" && e.Nodes == 1:
		fmt.Fprintf(&b, " needs %s %s: the one node it may use has no %s", e.Resource, e.Requested.String(), e.Resource)
	case e.Resource != "":
		fmt.Fprintf(&b, " needs %s %s: none of the %d nodes it may use has %s", e.Resource, e.Requested.String(), e.Nodes, e.Resource)
	default:
		var needs []string
		for _, name := range ordered(milli(e.Replica.Requests)) {
			if q := e.Replica.Requests[name]; q.Sign() > 0 && name != corev1.ResourcePods {
				needs = append(needs, fmt.Sprintf("%s %s", name, q.String()))
			}
		}
		var lacks []string
		for _, l := range e.Lacking {
			lacks = append(lacks, fmt.Sprintf("%s has %s %s free", l.Node, l.Free.String(), l.Resource))
		}
		fmt.Fprintf(&b, " needs %s: none of the %d nodes it may use has all of it free (%s)",
			list(needs, len(needs)), e.Nodes, list(lacks, shownNodes))
	}
	switch {
	case e.Placed == 1:
		b.WriteString("; 1 replica of the job was placed before it")
	case e.Placed > 1:
		fmt.Fprintf(&b, "; %d replicas of the job were placed before it", e.Placed)
	}
	return b.String()
}

// writeRuledOut says why the replica may use no node.
func (e *NotFitError) writeRuledOut(b *strings.Builder) {
	total := 0
	for _, r := range e.RuledOut {
		total += len(r.Nodes)
	}
	switch total {
	case 0:
		b.WriteString(" has no node to run on: the cluster has no nodes")
		return
	case 1:
		r := e.RuledOut[0]
		fmt.Fprintf(b, " may not use the only node, which %s (%s)", phrases[r.Reason][0], r.examples())
		return
	}
	fmt.Fprintf(b, " may use none of the %d nodes: ", total)
	for i, r := range e.RuledOut {
		if i > 0 {
			b.WriteString("; ")
		}
		phrase := phrases[r.Reason][0]
		if len(r.Nodes) > 1 {
			phrase = phrases[r.Reason][1]
		}
		fmt.Fprintf(b, "%d %s (%s)", len(r.Nodes), phrase, r.examples())
	}
}

// phrases say why nodes are ruled out, of one node and of several.
var phrases = map[Exclusion][2]string{
	ExcludedNotReady: {"is cordoned or not Ready", "are cordoned or not Ready"},
	ExcludedSelector: {"does not match its nodeSelector or required node affinity", "do not match its nodeSelector or required node affinity"},
	ExcludedEdge: {"is an edge node, for replicas that ask for " + EdgeNodeLabel + " only",
		"are edge nodes, for replicas that ask for " + EdgeNodeLabel + " only"},
	ExcludedTaint: {"has a taint it does not tolerate", "have a taint it does not tolerate"},
}

// examples names the first nodes ruled out, with the taint for a taint.
func (r RuledOut) examples() string {
	names := make([]string, len(r.Nodes))
	for i, n := range r.Nodes {
		names[i] = n
		if i < len(r.Taints) {
			names[i] = n + ": " + r.Taints[i].ToString()
		}
	}
	return list(names, shownNodes)
}

// list joins items as a sentence does ("a, b and c"), the first shown of
// them, then how many more.
func list(items []string, shown int) string {
	if len(items) > shown {
		return strings.Join(items[:shown], ", ") + fmt.Sprintf(" and %d more", len(items)-shown)
	}
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// theNodes names a number of nodes after "on".
func theNodes(n int) string {
	if n == 1 {
		return "the one node"
	}
	return fmt.Sprintf("the %d nodes", n)
}

// notFit explains why c fits on no node, as the plan stands.
func (p *plan) notFit(key string, c *candidate) *NotFitError {
	e := &NotFitError{Job: key, Replica: c.Replica, Placed: p.placed}
	var usable []*node
	ruledOut := map[Exclusion]*RuledOut{}
	for _, n := range p.c.nodes {
		reason, taint := c.exclusion(n)
		if reason == "" {
			usable = append(usable, n)
			continue
		}
		r := ruledOut[reason]
		if r == nil {
			r = &RuledOut{Reason: reason}
			ruledOut[reason] = r
		}
		r.Nodes = append(r.Nodes, n.name)
		if reason == ExcludedTaint {
			r.Taints = append(r.Taints, taint)
		}
	}
	for _, reason := range []Exclusion{ExcludedNotReady, ExcludedSelector, ExcludedEdge, ExcludedTaint} {
		if r := ruledOut[reason]; r != nil {
			e.RuledOut = append(e.RuledOut, *r)
		}
	}
	e.Nodes = len(usable)
	if e.Nodes == 0 {
		return e
	}
	for _, name := range c.resources {
		need := c.needs[name]
		short, most, mostNode := true, int64(0), ""
		for _, n := range usable {
			free, listed := p.free(n, name)
			if (!listed && name == corev1.ResourcePods) || free >= need {
				short = false
				break
			}
			if listed && (mostNode == "" || free > most) {
				most, mostNode = free, n.name
			}
		}
		if short {
			e.Resource, e.Requested = name, c.requested(name)
			e.MostFree, e.MostFreeNode = quantity(most, e.Requested.Format), mostNode
			return e
		}
	}
	for _, n := range usable {
		for _, name := range c.resources {
			free, listed := p.free(n, name)
			if (!listed && name == corev1.ResourcePods) || free >= c.needs[name] {
				continue
			}
			e.Lacking = append(e.Lacking, Lack{Node: n.name, Resource: name, Free: quantity(free, c.requested(name).Format)})
			break
		}
	}
	return e
}

// requested is what c requests of a resource, as written.
func (c *candidate) requested(name corev1.ResourceName) resource.Quantity {
	if name == corev1.ResourcePods {
		return *resource.NewQuantity(1, resource.DecimalSI)
	}
	return c.Requests[name].DeepCopy()
}

// quantity turns thousandths into a quantity of the given format, never
// below zero.
func quantity(milli int64, format resource.Format) resource.Quantity {
	milli = max(milli, 0)
	if milli%1000 == 0 {
		return *resource.NewQuantity(milli/1000, format)
	}
	return *resource.NewMilliQuantity(milli, format)
}
