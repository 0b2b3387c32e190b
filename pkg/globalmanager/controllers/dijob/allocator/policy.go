package allocator

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// Placement is the node of each replica of a job, in rank order: what
// status.allocation holds.
type Placement []string

// Policy decides where jobs' replicas run.
type Policy interface {
	// Allocate places every replica of job on nodes, or returns an error and
	// no placement: a *NotFitError when a replica finds no node.
	Allocate(job Job, nodes []Node) (Placement, error)
	// Optimize returns a new placement for each preemptible job among jobs
	// that should move from its previous placement; jobs that stay are not
	// in the map.
	Optimize(jobs []Job, nodes []Node, previous map[string]Placement) (map[string]Placement, error)
}

// PackAndSpread is the policy the package documentation describes: it packs
// learners, evaluators and tasks of type none, and spreads collectors. Its
// zero value is ready to use; it keeps no state, so one value serves any
// number of goroutines.
type PackAndSpread struct{}

var _ Policy = PackAndSpread{}

// Allocate places every replica of job on nodes, whose Used must count every
// pod that holds room, job's own pods excepted (see Nodes). It returns the
// placement, an error naming a replica whose node affinity cannot be read,
// or a *NotFitError about the first replica that found no node; never part
// of a placement. The same job and nodes always give the same answer.
func (PackAndSpread) Allocate(job Job, nodes []Node) (Placement, error) {
	cands := candidates(job)
	for _, c := range cands {
		if c.err != nil {
			return nil, c.err
		}
	}
	placement, notFit := newCluster(nodes).place(job.Key, cands)
	if notFit != nil {
		return nil, notFit
	}
	return placement, nil
}

// Optimize considers again, one after the other, the preemptible jobs among
// jobs that have a placement in previous: the high-priority ones first, then
// the older, then by key. It returns the new placement of each job that
// moves; the others, and every job that is not preemptible, are not in the
// map.
//
// nodes' Used must count every pod except those of the preemptible jobs in
// jobs: build it with Nodes and an exclude that returns true for the pods of
// those jobs. Optimize counts the room of each of them itself, at its
// previous placement until it is its turn, so that a job moves only into
// room that no other job holds. (Counting their pods in Used too would not
// break anything, only keep jobs from moving.) Jobs that are not preemptible
// are left where they are: their pods are in Used.
//
// A job moves when a new placement, made as Allocate makes it into the room
// left, is strictly better than its previous one. Better is, in this order:
// its learners on fewer nodes; its learners, evaluators and tasks of type
// none on fewer nodes; all its replicas on fewer nodes. An equal score never
// moves a job. A job whose previous placement can no longer be used (a node
// is gone, cordoned or not Ready, or no longer suits a replica's
// nodeSelector, affinity, pool or tolerations, or the job's number of
// replicas changed) moves to any new placement that fits, and stays when
// none does. Room is not checked at a previous placement: the job's pods are
// on those nodes and hold it.
//
// A job whose node affinity cannot be read is left alone (Allocate says
// why). The error is for input Optimize cannot use: two jobs with one key.
func (PackAndSpread) Optimize(jobs []Job, nodes []Node, previous map[string]Placement) (map[string]Placement, error) {
	c := newCluster(nodes)
	type entry struct {
		job   Job
		cands []*candidate
		prev  Placement
	}
	var preemptible []entry
	seen := make(map[string]bool, len(jobs))
	for _, job := range jobs {
		if seen[job.Key] {
			return nil, fmt.Errorf("job %s listed twice", job.Key)
		}
		seen[job.Key] = true
		prev, ok := previous[job.Key]
		if !job.Preemptible || !ok {
			continue
		}
		cands := candidates(job)
		c.take(cands, prev, 1)
		if !slices.ContainsFunc(cands, func(c *candidate) bool { return c.err != nil }) {
			preemptible = append(preemptible, entry{job: job, cands: cands, prev: prev})
		}
	}
	slices.SortFunc(preemptible, func(a, b entry) int {
		return cmp.Or(
			cmp.Compare(priorityRank(a.job.Priority), priorityRank(b.job.Priority)),
			a.job.Created.Compare(b.job.Created),
			cmp.Compare(a.job.Key, b.job.Key),
		)
	})
	moves := map[string]Placement{}
	for _, e := range preemptible {
		c.take(e.cands, e.prev, -1)
		usable := c.usable(e.cands, e.prev)
		fresh, notFit := c.place(e.job.Key, e.cands)
		if notFit == nil && !slices.Equal(fresh, e.prev) &&
			(!usable || scoreOf(e.cands, fresh).better(scoreOf(e.cands, e.prev))) {
			moves[e.job.Key] = fresh
			c.take(e.cands, fresh, 1)
			continue
		}
		c.take(e.cands, e.prev, 1)
	}
	return moves, nil
}

// priorityRank orders priorities, the highest first.
func priorityRank(p v2alpha1.Priority) int {
	if p == v2alpha1.PriorityHigh {
		return 0
	}
	return 1
}

// score is how well a placement packs a job: the number of distinct nodes
// of its learners, of its packed replicas (learners, evaluators, tasks of
// type none), and of all its replicas. Fewer is better, in that order.
type score [3]int

func scoreOf(cands []*candidate, placement Placement) score {
	learners, packed, all := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, node := range placement {
		all[node] = true
		if cands[i].spread {
			continue
		}
		packed[node] = true
		if cands[i].Type == v2alpha1.TaskTypeLearner {
			learners[node] = true
		}
	}
	return score{len(learners), len(packed), len(all)}
}

// better says whether s is strictly better than o.
func (s score) better(o score) bool {
	return slices.Compare(s[:], o[:]) < 0
}
