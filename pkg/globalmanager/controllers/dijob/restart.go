package dijob

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// AnnotationRestart, on a failed pod, is the number of the restart its
// failure causes. It is written on the pod before the count reaches the
// job's status and the pods are deleted only once the status has it, so a
// status write that is lost (it conflicted with a newer job) or a
// GlobalManager that stops in between never loses a restart nor counts
// one twice.
const AnnotationRestart = "nereid.io/restart"

// spentBackoff is the message of a job that fails because of why after
// restarts restarts, its backoffLimit limit.
func spentBackoff(why string, restarts, limit int32) string {
	if limit == 0 {
		return why + "; its backoffLimit is 0: the job does not restart"
	}
	return fmt.Sprintf("%s; the job restarted %d times, as many as its backoffLimit (%d) allows", why, restarts, limit)
}

// restartStep is what a restart does in one sync. A restart takes three
// syncs: the failure is marked with the restart's number
// (AnnotationRestart), the count is written, then every pod goes.
type restartStep int

const (
	// restartWaits: the cache is behind (the mark, or an earlier
	// restart's deletions, not all seen yet); nothing is done.
	restartWaits restartStep = iota
	// restartFails: the backoff limit is spent; the job fails.
	restartFails
	// restartBacksOff: the restart waits out its backoff.
	restartBacksOff
	// restartMarks: the failure is marked with its number, then counted.
	restartMarks
	// restartCounts: the marked failure is counted in status.
	restartCounts
	// restartDeletes: the status holds the count; every pod goes.
	restartDeletes
)

// planRestart says what the restart that sc.failed causes does in this
// sync, the restart's number, and, when it backs off, how long it waits.
func (sc *syncCtx) planRestart() (step restartStep, n int32, wait time.Duration) {
	n, counted := restartOf(sc.failed)
	if !counted {
		if !sc.satisfied {
			// An earlier restart's deletions, or the mark this failure was
			// given, are not all seen yet: it must not be counted again,
			// nor fail the job on a count that already holds it.
			return restartWaits, 0, 0
		}
		if sc.status.Restarts >= backoffLimit(sc.job) {
			return restartFails, 0, 0
		}
		// Restarts after the first wait, doubling, as the Job controller's
		// do: a job that fails at once must not recreate its pods back to
		// back.
		if wait := restartDelay(sc.status.Restarts) - sc.now.Sub(lastRestart(sc.status)); sc.status.Restarts > 0 && wait > 0 {
			return restartBacksOff, 0, wait
		}
		return restartMarks, sc.status.Restarts + 1, 0
	}
	if sc.status.Restarts < n {
		return restartCounts, n, 0
	}
	if !sc.satisfied {
		return restartWaits, n, 0
	}
	return restartDeletes, n, 0
}

// restartJob makes every pod of the job again after one failed, counting it
// in status.restarts, or fails the job when its backoff limit is spent, as
// planRestart says.
func (c *Controller) restartJob(ctx context.Context, sc *syncCtx) ([]common.Event, error) {
	why := fmt.Sprintf("pod %s failed", sc.failed.Name)
	if m := podFailure(sc.failed); m != "" {
		why += ": " + m
	}
	limit := backoffLimit(sc.job)
	now := sc.now
	step, n, wait := sc.planRestart()
	switch step {
	case restartWaits:
		return nil, nil
	case restartFails:
		msg := spentBackoff(why, sc.status.Restarts, limit)
		sc.status.CompletionTimestamp = &now
		err := c.children.DeletePods(ctx, sc.key, sc.job, common.PodsToClean(sc.live, string(sc.job.Spec.CleanPodPolicy)), "the job failed")
		return setPhase(sc.status, div2.JobFailed, "BackoffLimitExceeded", msg, now, corev1.EventTypeWarning), err
	case restartBacksOff:
		c.queue.AddAfter(sc.key, wait)
		msg := fmt.Sprintf("%s; restarting in %s (backoff after %d restarts)", why, wait.Round(time.Second), sc.status.Restarts)
		return setPhase(sc.status, div2.JobRestarting, "BackOff", msg, now, corev1.EventTypeWarning), nil
	case restartMarks:
		if err := c.mark(ctx, sc.key, sc.failed, AnnotationRestart, n); err != nil {
			return nil, err
		}
		fallthrough
	case restartCounts:
		// The count first: the pods go once the status holds it.
		sc.status.Restarts = n
	case restartDeletes:
		if err := c.children.DeletePods(ctx, sc.key, sc.job, sc.live, "restarting the job: "+why); err != nil {
			return nil, err
		}
	}
	msg := fmt.Sprintf("%s; every pod is made again (restart %d of %d)", why, n, limit)
	return setPhase(sc.status, div2.JobRestarting, "PodFailed", msg, now, corev1.EventTypeWarning), nil
}

// renumber makes every pod of the job again, with ranks afresh, when the
// names its pods know would pass the bound a job's DI_NODES keeps to (tasks
// renamed or replaced while older pods ran). Not a failure: it is not
// counted in status.restarts.
func (c *Controller) renumber(ctx context.Context, sc *syncCtx, names int) ([]common.Event, error) {
	msg := fmt.Sprintf("DI_NODES would list %d names, more than the %d a job's pods may carry; every pod is made again with ranks afresh",
		names, div2.MaxJobReplicas)
	if err := c.children.DeletePods(ctx, sc.key, sc.job, sc.live, "renumbering the job's ranks"); err != nil {
		return nil, err
	}
	return setPhase(sc.status, div2.JobRestarting, "Renumbered", msg, sc.now, corev1.EventTypeNormal), nil
}

// mark writes n under annotation on pod: the number of the restart or move
// that is to delete it, before the count and the deletions. Until the cache
// shows it the job's expectations are not satisfied.
func (c *Controller) mark(ctx context.Context, key string, pod *corev1.Pod, annotation string, n int32) error {
	return c.children.MarkPod(ctx, key, pod, annotation, strconv.Itoa(int(n)))
}

// restartOf is the restart a failed pod's failure causes, when it is marked.
func restartOf(pod *corev1.Pod) (int32, bool) {
	return markOf(pod, AnnotationRestart)
}

// markOf is the number mark wrote under annotation on pod, when it did.
func markOf(pod *corev1.Pod, annotation string) (int32, bool) {
	n, err := strconv.ParseInt(pod.Annotations[annotation], 10, 32)
	return int32(n), err == nil && n > 0
}

// The delay before restart n+1 after restart n: 10 s, doubling, at most 6 min.
const (
	restartBackoffBase = 10 * time.Second
	restartBackoffMax  = 6 * time.Minute
)

func restartDelay(restarts int32) time.Duration {
	d := restartBackoffBase
	for i := int32(1); i < restarts && d < restartBackoffMax; i++ {
		d *= 2
	}
	return min(d, restartBackoffMax)
}

// lastRestart is when the job's Restarting condition last changed: when it
// came back from its last restart (False), or when this failure was first
// seen (True, set by the wait itself, which then counts from there).
func lastRestart(status *div2.DIJobStatus) time.Time {
	for _, c := range status.Conditions {
		if c.Type == div2.ConditionType(div2.JobRestarting) {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func backoffLimit(job *div2.DIJob) int32 {
	if job.Spec.BackoffLimit == nil {
		return 3
	}
	return *job.Spec.BackoffLimit
}

// podFailure is what a failed pod says of its failure: its message or
// reason, else its first container's termination.
func podFailure(p *corev1.Pod) string {
	if p.Status.Message != "" {
		return p.Status.Message
	}
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return fmt.Sprintf("container %s exited with %d (%s)", cs.Name, t.ExitCode, t.Reason)
		}
	}
	return ""
}
