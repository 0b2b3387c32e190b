package view

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// taskOf is the task of a DIJob's pod: its diengine/task-name label (a
// v2alpha1 job's replicas), else its replica-type label (a v1alpha1 job's
// coordinator, collectors, learners, aggregators and DDP learners).
func taskOf(p *corev1.Pod) string {
	if t := p.Labels[dijob.LabelTaskName]; t != "" {
		return t
	}
	return p.Labels[coordinated.LabelReplicaType]
}

// replicas counts a DIJob's pods per task and node: tasks in the spec's
// order (those the spec does not name, v1alpha1 replica types, after them
// by name), nodes by name, unscheduled ("") first.
func replicas(tasks []string, pods []*corev1.Pod) []Replica {
	type key struct{ task, node string }
	counts := map[key]*Replica{}
	for _, p := range pods {
		k := key{taskOf(p), p.Spec.NodeName}
		r := counts[k]
		if r == nil {
			r = &Replica{Task: k.task, Node: k.node}
			counts[k] = r
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			r.Running++
		case corev1.PodSucceeded, corev1.PodFailed:
			r.Ended++
		default:
			r.Pending++
		}
	}
	order := func(task string) int {
		if i := slices.Index(tasks, task); i >= 0 {
			return i
		}
		return len(tasks)
	}
	out := make([]Replica, 0, len(counts))
	for _, r := range counts {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Replica) int {
		return cmp.Or(cmp.Compare(order(a.Task), order(b.Task)), strings.Compare(a.Task, b.Task), strings.Compare(a.Node, b.Node))
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
