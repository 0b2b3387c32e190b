package view

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/kinds/all" // every kind in the table
	"github.com/nereid-ml/nereid/pkg/plugin/cli"
)

// Read reads the fleet and the jobs in c.Namespace ("" for every namespace)
// as c's user sees them, now.
//
// What the user may not list (Nodes, Leases, pods, a kind), and a kind of
// the GlobalManager's table the API server does not serve, is a Note and
// the rest is read; any other failure of the API server is the error.
func Read(ctx context.Context, c *cli.Clients) (*Snapshot, error) {
	return readAt(ctx, c, time.Now())
}

// reading is one Read: the clients, its time and the notes so far.
type reading struct {
	c     *cli.Clients
	now   time.Time
	notes []string
}

// skip turns err into a Note when it says the user may not read what (or
// the API server does not serve it), and returns whether it did; a nil err
// is not skipped.
func (r *reading) skip(err error, what string) bool {
	switch {
	case apierrors.IsForbidden(err):
		r.notes = append(r.notes, fmt.Sprintf("You may not list %s.", what))
	case apierrors.IsNotFound(err):
		r.notes = append(r.notes, fmt.Sprintf("The API server does not serve %s (its CRD is not installed).", what))
	default:
		return false
	}
	return true
}

// inNamespace names the namespace read, for notes.
func (r *reading) inNamespace(what string) string {
	if r.c.Namespace == "" {
		return what + " in any namespace"
	}
	return what + " in namespace " + r.c.Namespace
}

func readAt(ctx context.Context, c *cli.Clients, now time.Time) (*Snapshot, error) {
	r := &reading{c: c, now: now.UTC()}
	pods, err := r.workerPods(ctx)
	if err != nil {
		return nil, err
	}
	jobs, err := r.jobs(ctx, pods)
	if err != nil {
		return nil, err
	}
	nodes, err := r.nodes(ctx, jobs, pods)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Taken: r.now, Namespace: c.Namespace, Nodes: nodes, Jobs: jobs, Notes: r.notes}, nil
}

// workerPods are the pods of Nereid's controllers (every one carries the
// owner-uid label), by their owner's UID.
func (r *reading) workerPods(ctx context.Context) (map[string][]*corev1.Pod, error) {
	l, err := r.c.Kube.CoreV1().Pods(r.c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: common.LabelOwnerUID})
	if r.skip(err, r.inNamespace("pods")) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("listing the jobs' pods: %w", err)
	}
	out := map[string][]*corev1.Pod{}
	for i := range l.Items {
		p := &l.Items[i]
		uid := p.Labels[common.LabelOwnerUID]
		out[uid] = append(out[uid], p)
	}
	return out, nil
}

// jobs reads every job of every kind of the table that has a Progress (the
// jobs and services; not Datasets and Models), sorted by namespace, kind
// and name.
func (r *reading) jobs(ctx context.Context, pods map[string][]*corev1.Pod) ([]Job, error) {
	out := []Job{} // [] in JSON, never null
	for _, k := range kinds.All() {
		if k.Progress == nil {
			continue
		}
		src, ok := sources[k.GVK.GroupKind()]
		if !ok {
			r.notes = append(r.notes, fmt.Sprintf("kubectl nereid does not know how to show %ss; upgrade it.", k.GVK.Kind))
			continue
		}
		objs, err := src.list(ctx, r.c.Nereid, r.c.Namespace)
		if r.skip(err, r.inNamespace(k.Resource+"."+k.GVK.Group)) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.Resource, err)
		}
		for _, obj := range objs {
			f := src.facts(obj)
			out = append(out, r.job(k, k.Progress(obj), f, pods[string(f.meta.GetUID())]))
		}
	}
	slices.SortFunc(out, func(a, b Job) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}

// job is one object's Job.
func (r *reading) job(k *kinds.Kind, p kinds.Progress, f facts, pods []*corev1.Pod) Job {
	j := Job{
		Kind: k.GVK.Kind, Namespace: f.meta.GetNamespace(), Name: f.meta.GetName(),
		Created: f.meta.GetCreationTimestamp().UTC(), Phase: phaseOf(p, f), Progress: f.progress,
		Conditions: f.conditions, Nodes: nodesOf(pods),
	}
	if f.replicas {
		j.Replicas = replicas(f.tasks, pods)
	}
	if f.cycle != nil {
		j.Stages = stages(f.cycle)
	}
	if !f.finished {
		j.Waiting = common.ClipText(waiting(f.conditions, pods), MaxMessageBytes)
	}
	for i := range j.Conditions {
		j.Conditions[i].Message = common.ClipText(j.Conditions[i].Message, MaxMessageBytes)
	}
	return j
}

// MaxMessageBytes bounds each condition's message and what a job waits for,
// as read: a tenant who writes a long message into a status does not make
// every snapshot (and the dashboard's every poll) large.
const MaxMessageBytes = 1024

// phaseOf is the phase as the object's own API version names it, or
// status.phase, or a learning cycle's stage and state, or the kind's own
// phase.
func phaseOf(p kinds.Progress, f facts) string {
	switch {
	case f.ownPhase != "":
		return f.ownPhase
	case p.Phase != "":
		return p.Phase
	case p.Stage != "" || p.State != "":
		return strings.TrimSpace(p.Stage + " " + p.State)
	}
	return f.phase
}

// nodesOf are the nodes pods are on, sorted.
func nodesOf(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			out = append(out, p.Spec.NodeName)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
