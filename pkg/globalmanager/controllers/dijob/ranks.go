package dijob

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// Ranks that stay put. A DI-engine worker reads DI_RANK and DI_NODES once,
// at its start, and picks its role and peers by them; a scale of one task
// must not move the ranks of the others' running pods, nor give a new pod a
// rank a running one holds. So a pod keeps its rank for life, and every
// pod's DI_NODES is a prefix of the longest one any pod of the job has: all
// of them agree on the name at each index they list.
//
// The table a new pod gets is the longest DI_NODES of the job's pods (read
// from that pod, whose environment the cache does not keep), with each new
// replica at the index that already names it when no pod holds that rank (a
// replica removed by a scale down and asked for again, a pod of a changed
// template, one whose first making failed), or else appended. A job with no
// pods starts afresh: ranks in spec order, as DI-orchestrator numbers them.

// envNodes is the variable every pod's table is in.
const envNodes = "DI_NODES"

// rankTable is DI_NODES as the job's pods know it, and each current task's
// DI_<TASK>_NODES; order is the tasks' order in the environment.
type rankTable struct {
	nodes []string
	tasks map[string][]string
	order []string
}

// currentTable is the table the job's pods know (the longest of theirs) and
// the ranks they hold; an empty table for a job with no pods.
func (c *Controller) currentTable(ctx context.Context, job *div2.DIJob, pods []*corev1.Pod) (*rankTable, map[int]bool, error) {
	table := &rankTable{tasks: map[string][]string{}}
	held := map[int]bool{}
	for _, p := range pods {
		if r, ok := RankOf(p); ok {
			held[r] = true
		}
	}
	// Longest first; a pod gone since the cache saw it gives way to the next.
	byLength := slices.Clone(pods)
	slices.SortStableFunc(byLength, func(a, b *corev1.Pod) int { return listed(b) - listed(a) })
	for _, p := range byLength {
		if listed(p) == 0 {
			break
		}
		full, err := c.children.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading the DI_NODES of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		if full.UID != p.UID || len(full.Spec.Containers) == 0 {
			continue
		}
		env := full.Spec.Containers[0].Env
		table.nodes = splitList(envValue(env, envNodes))
		for i := range job.Spec.Tasks {
			t := job.Spec.Tasks[i].TaskName()
			table.tasks[t] = splitList(envValue(env, envName(t)))
		}
		break
	}
	for i := range job.Spec.Tasks {
		table.order = append(table.order, job.Spec.Tasks[i].TaskName())
	}
	return table, held, nil
}

// assign gives each of missing (in spec order) its rank and adds it to the
// table: the index that names it, when no pod holds that rank, or the next
// past the end. name is a replica's entry in the lists.
func (t *rankTable) assign(missing []replica, name func(replica) string, held map[int]bool) []int {
	at := make(map[string]int, len(t.nodes))
	for i, n := range t.nodes {
		at[n] = i
	}
	ranks := make([]int, len(missing))
	for i, r := range missing {
		n := name(r)
		if k, ok := at[n]; ok && !held[k] {
			ranks[i] = k
		} else {
			ranks[i] = len(t.nodes)
			t.nodes = append(t.nodes, n)
		}
		held[ranks[i]] = true
		if !slices.Contains(t.tasks[r.taskName], n) {
			t.tasks[r.taskName] = append(t.tasks[r.taskName], n)
		}
	}
	return ranks
}

// listed is how many names the pod's DI_NODES holds, as its annotation says.
func listed(p *corev1.Pod) int {
	n, err := strconv.Atoi(p.Annotations[AnnotationReplicas])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
