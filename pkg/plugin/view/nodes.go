package view

import (
	"context"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// LeaseNamespace is where the edge links' Leases are read when the user may
// not list Leases in every namespace: the GlobalManager's default
// --edge-namespace.
const LeaseNamespace = "nereid-system"

// A Node's Link: connected or disconnected, as its Lease says; without
// one, "" for a Node not labelled an edge node (a cloud node has no edge
// link to know), else unknown (an edge node no LocalController ever
// connected from, or a node the user may not list).
const (
	LinkConnected    = links.LinkConnected
	LinkDisconnected = links.LinkDisconnected
	LinkUnknown      = "unknown"
)

// nodes reads the Nodes and the edge links' Leases, and puts on each node
// the workers, jobs and Datasets on it. Every Node is there, and every node
// that has a Lease or a worker even when the user may not list Nodes.
func (r *reading) nodes(ctx context.Context, jobs []Job, pods map[string][]*corev1.Pod) ([]Node, error) {
	byName := map[string]*Node{}
	get := func(name string) *Node {
		n := byName[name]
		if n == nil {
			n = &Node{Name: name, Link: LinkUnknown}
			byName[name] = n
		}
		return n
	}
	l, err := r.c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	switch {
	case r.skip(err, "nodes"):
	case err != nil:
		return nil, fmt.Errorf("listing the nodes: %w", err)
	default:
		for i := range l.Items {
			n := get(l.Items[i].Name)
			n.Ready = readyOf(&l.Items[i])
			_, n.Edge = l.Items[i].Labels[links.EdgeNodeRole]
			if !n.Edge {
				n.Link = "" // unless its Lease says one
			}
		}
	}
	leases, err := r.leases(ctx)
	if err != nil {
		return nil, err
	}
	for i := range leases {
		r.link(get(links.LeaseNode(&leases[i])), &leases[i])
	}
	for _, ps := range pods {
		for _, p := range ps {
			switch {
			case p.Spec.NodeName == "":
			case common.PodFinished(p):
				// A learning cycle keeps a round's pods, a DIJob its
				// ended replicas: tens on a node, which no longer work there.
				get(p.Spec.NodeName).Ended++
			default:
				n := get(p.Spec.NodeName)
				n.Workers = append(n.Workers, p.Namespace+"/"+p.Name)
			}
		}
	}
	for _, j := range jobs {
		for _, name := range j.Nodes {
			n := get(name)
			n.Jobs = append(n.Jobs, JobRef(j.Kind, j.Namespace, j.Name))
			n.Objects++
		}
	}
	if err := r.countDatasets(ctx, byName); err != nil {
		return nil, err
	}
	out := make([]Node, 0, len(byName))
	for _, n := range byName {
		slices.Sort(n.Workers)
		slices.Sort(n.Jobs)
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// JobRef is how a Node names a job: "<kind>/<namespace>/<name>".
func JobRef(kind, namespace, name string) string {
	return kind + "/" + namespace + "/" + name
}

// readyOf is the status of node's Ready condition, "Unknown" without one.
func readyOf(node *corev1.Node) string {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return string(c.Status)
		}
	}
	return string(corev1.ConditionUnknown)
}

// leases lists the edge links' Leases: in every namespace (whatever the
// GlobalManager's --edge-namespace), else in LeaseNamespace.
func (r *reading) leases(ctx context.Context) ([]coordinationv1.Lease, error) {
	opts := metav1.ListOptions{LabelSelector: links.LabelEdgeNode}
	l, err := r.c.Kube.CoordinationV1().Leases(metav1.NamespaceAll).List(ctx, opts)
	if apierrors.IsForbidden(err) {
		l, err = r.c.Kube.CoordinationV1().Leases(LeaseNamespace).List(ctx, opts)
		if r.skip(err, "leases in namespace "+LeaseNamespace+", which say the edge nodes' links") {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listing the edge links' leases: %w", err)
	}
	return l.Items, nil
}

// link puts a node's link Lease on n: down when the hub said so or did not
// renew it in time (links.LinkDown).
func (r *reading) link(n *Node, l *coordinationv1.Lease) {
	down, since := links.LinkDown(l, r.now)
	n.Link = LinkConnected
	if down {
		n.Link = LinkDisconnected
	}
	if !since.IsZero() {
		t := since.UTC()
		n.LastHeard = &t
	}
	n.Outbox = l.Annotations[links.AnnotationOutbox]
}

// countDatasets counts in the nodes' Objects the Datasets on them.
func (r *reading) countDatasets(ctx context.Context, byName map[string]*Node) error {
	l, err := r.c.Nereid.SednaV1alpha1().Datasets(r.c.Namespace).List(ctx, metav1.ListOptions{})
	if r.skip(err, r.inNamespace("datasets.sedna.io")) {
		return nil
	} else if err != nil {
		return fmt.Errorf("listing the datasets: %w", err)
	}
	for _, d := range l.Items {
		if n := byName[d.Spec.NodeName]; n != nil {
			n.Objects++
		}
	}
	return nil
}
