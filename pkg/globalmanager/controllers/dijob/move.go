package dijob

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// AnnotationMove, on a pod of a preemptible job, is the number of the move
// (status.reschedules) that deletes it, written before the count and the
// deletions as AnnotationRestart is: a lost status write or a GlobalManager
// stopping in between neither loses a move nor counts one twice. (A
// GlobalManager that starts again finds the mark without the placement
// chosen, and places the job afresh.)
const AnnotationMove = "nereid.io/move"

// moveStep is what a move does in one sync. A move takes three syncs: a
// live pod is marked with the move's number (AnnotationMove), the count is
// written, then every pod goes and is made again on the new placement.
type moveStep int

const (
	// moveWaits: nothing is done; there is no pod to move (the placement
	// applies as pods are made), or the cache is behind.
	moveWaits moveStep = iota
	// moveMarks: a live pod is marked with the move's number, then the
	// move is counted.
	moveMarks
	// moveCounts: the marked move is counted in status.
	moveCounts
	// moveDeletes: the status holds the count; every pod goes.
	moveDeletes
)

// planMove says what the move of the job does in this sync, and the move's
// number, from the mark decide found (moveN, moveMarked).
func (sc *syncCtx) planMove() (moveStep, int32) {
	n := sc.moveN
	if !sc.moveMarked {
		if len(sc.live) == 0 {
			return moveWaits, 0
		}
		return moveMarks, sc.status.Reschedules + 1
	}
	if sc.status.Reschedules < n {
		return moveCounts, n
	}
	if !sc.satisfied {
		return moveWaits, n
	}
	return moveDeletes, n
}

// moveJob carries out a move of the job, as planMove says.
func (c *Controller) moveJob(ctx context.Context, sc *syncCtx) ([]common.Event, error) {
	step, n := sc.planMove()
	switch step {
	case moveWaits:
		return nil, nil
	case moveMarks:
		first := slices.MinFunc(sc.live, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
		if err := c.mark(ctx, sc.key, first, AnnotationMove, n); err != nil {
			return nil, err
		}
		fallthrough
	case moveCounts:
		// The count first: the pods go once the status holds it.
		sc.status.Reschedules = n
	case moveDeletes:
		if err := c.children.DeletePods(ctx, sc.key, sc.job, sc.live, "the allocator moves the job to a better placement"); err != nil {
			return nil, err
		}
	}
	msg := fmt.Sprintf("the allocator moves the job to a better placement (move %d); every pod is made again", n)
	return setPhase(sc.status, div2.JobRescheduling, "Moved", msg, sc.now, corev1.EventTypeNormal), nil
}

// moveOf is the move a live pod is marked for, when one is.
func moveOf(live []*corev1.Pod) (int32, bool) {
	for _, p := range live {
		if n, ok := markOf(p, AnnotationMove); ok {
			return n, true
		}
	}
	return 0, false
}
