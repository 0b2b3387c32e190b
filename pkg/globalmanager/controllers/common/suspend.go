package common

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionSuspended is the condition type that says whether spec.suspend
// holds an owner's pods stopped: True (reason Suspended) while it does,
// False (reason Resumed) once the owner runs again. An owner never
// suspended has none.
const ConditionSuspended = "Suspended"

// The reasons of the Suspended condition, and of the events at its changes,
// as a Kubernetes Job's events.
const (
	ReasonSuspended = "Suspended"
	ReasonResumed   = "Resumed"
)

// whySuspended is why a suspended owner's pods are deleted, in its event.
const whySuspended = "the job is suspended (spec.suspend)"

// suspend stops a suspended, unfinished owner: its pods that have not
// ended, its Deployments
// and their autoscalers go (its Services stay, they hold no pods), what
// it holds elsewhere is released (Forget: its quota, its place; Release:
// its gang's group objects), and its
// status says so through the Suspended condition and the kind's
// Suspended. Nothing else of its status changes: its edge reports, rounds
// and learning-cycle stage are kept, and resuming runs it from there. A
// job created suspended makes nothing. It ends the sync: the kind's own
// sync does not run.
func (p *Syncer[T]) suspend(ctx context.Context, s *Sync[T], now metav1.Time) error {
	conds := p.Lifecycle.Conditions(s.Owner)
	if found, suspended, _ := conds.Get(ConditionSuspended); !found || !suspended {
		conds.Set(ConditionSuspended, true, ReasonSuspended, "spec.suspend is true: the job's pods are stopped", now)
		s.events = append(s.events, Event{Type: corev1.EventTypeNormal, Reason: ReasonSuspended, Message: "suspended: its pods are stopped"})
	}
	if p.Forget != nil {
		p.Forget(s.Key)
	}
	var err error
	if s.Satisfied && p.Children != nil {
		// Pods that ended hold nothing, and one that succeeded holds a
		// result (a learner done, a stage whose report is on its way):
		// they stay, as a suspended Kubernetes Job's finished pods do.
		running := Adopted{
			Pods:        PodsToClean(slices.Concat(s.Pods, s.Adopted.Pods), "Running"),
			Deployments: slices.Concat(s.Deployments, s.Adopted.Deployments),
			HPAs:        slices.Concat(s.HPAs, s.Adopted.HPAs),
		}
		err = p.Children.removeChildren(ctx, s.Key, s.Owner, running, whySuspended)
	}
	if release := p.Lifecycle.Release; release != nil && s.Satisfied {
		err = errors.Join(err, release(ctx, s.Owner))
	}
	p.Lifecycle.Suspended(s.Owner, s.Pods, now)
	return s.End(ctx, err, nil)
}

// resume marks an owner that was suspended as running again; the kind's
// sync then makes its pods, asking for its quota again.
func (p *Syncer[T]) resume(s *Sync[T], now metav1.Time) []Event {
	conds := p.Lifecycle.Conditions(s.Owner)
	if found, suspended, _ := conds.Get(ConditionSuspended); !found || !suspended {
		return nil
	}
	conds.Set(ConditionSuspended, false, ReasonResumed, "spec.suspend is false: the job runs again", now)
	return []Event{{Type: corev1.EventTypeNormal, Reason: ReasonResumed, Message: "resumed: its pods are made again"}}
}
