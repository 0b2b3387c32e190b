package common

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonDeadlineExceeded is the reason of the failure, and of its event, of
// an owner active longer than its activeDeadlineSeconds, as a Kubernetes
// Job's.
const ReasonDeadlineExceeded = "DeadlineExceeded"

// maxDeadlineSeconds is the longest deadline a time.Duration holds (about
// 292 years); a longer one would overflow into the past.
const maxDeadlineSeconds = int64(math.MaxInt64 / time.Second)

// enforceDeadline fails an unfinished, running owner that has been active
// longer than its activeDeadlineSeconds, through its kind's Fail; the
// kind's sync then removes its pods as for any failure. Before then the
// owner is synced again when its deadline comes. Its activity counts from
// when it started, or from when it was last resumed, if later: time
// suspended is not counted, as a Kubernetes Job's is not.
func (p *Syncer[T]) enforceDeadline(s *Sync[T], spec LifecycleSpec, now metav1.Time) []Event {
	l := p.Lifecycle
	if spec.ActiveDeadlineSeconds == nil || l.Fail == nil {
		return nil
	}
	if *spec.ActiveDeadlineSeconds > maxDeadlineSeconds {
		return nil // further than a time.Duration reaches: never, in practice
	}
	deadline := p.activeSince(s.Owner).Add(time.Duration(*spec.ActiveDeadlineSeconds) * time.Second)
	if now.Time.Before(deadline) {
		p.requeueAt(s.Key, deadline, now.Time)
		return nil
	}
	msg := fmt.Sprintf("active longer than its activeDeadlineSeconds (%d s)", *spec.ActiveDeadlineSeconds)
	l.Fail(s.Owner, ReasonDeadlineExceeded, msg, now)
	return []Event{{Type: corev1.EventTypeWarning, Reason: ReasonDeadlineExceeded, Message: "the job was " + msg}}
}

// activeSince is when owner's activity began: when it started (its
// creation, for a kind that keeps no start time), or when it was last
// resumed, whichever is later.
func (p *Syncer[T]) activeSince(owner T) time.Time {
	l := p.Lifecycle
	since := owner.GetCreationTimestamp().Time
	if l.Started != nil {
		if started := l.Started(owner); started != nil && started.After(since) {
			since = started.Time
		}
	}
	if found, suspended, at := l.Conditions(owner).Get(ConditionSuspended); found && !suspended && at.After(since) {
		since = at.Time
	}
	return since
}
