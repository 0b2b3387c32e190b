package common

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// Lifecycle is what a kind tells the framework so that its owners have the
// lifecycle every Kubernetes job has, each policy in its own file:
// managedby.go (an owner another controller runs is left alone), ttl.go (a
// finished owner is deleted after its TTL), deadline.go (an owner active
// past its deadline fails) and suspend.go (a suspended owner's pods stop).
// Syncer.Begin applies them, in that order, before the kind's own sync, so
// no kind can skip one.
type Lifecycle[T any] struct {
	// Spec reads the owner's lifecycle fields.
	Spec func(owner T) LifecycleSpec
	// Conditions is the owner's list of conditions, where the Suspended
	// condition goes.
	Conditions func(owner T) Conditions
	// Finished is when the owner finished (succeeded or failed), nil while
	// it has not, a zero time when it has but when is not known (it then
	// has no TTL); nil for a kind that never finishes (a service), which
	// has no deadline and no TTL either.
	Finished func(owner T) *metav1.Time
	// Started is when the owner began to run (status.startTime), nil when
	// its kind keeps none: its creation then counts.
	Started func(owner T) *metav1.Time
	// Fail makes the owner failed as its kind fails one (phase, Failed
	// condition, completion time) with reason and message; the kind's sync
	// then removes its pods as for any failure. Nil for a kind that never
	// finishes.
	Fail func(owner T, reason, message string, now metav1.Time)
	// Release, when set, deletes what the owner holds beyond its pods
	// while it runs none (suspended): its gang's group objects, which a
	// gang scheduler's queue counts. The kind's sync makes them again.
	Release func(ctx context.Context, owner T) error
	// Suspended writes what the owner's status says while it is suspended
	// and its pods are the ones left (going): its phase, its counts, its
	// observedGeneration. Its other status stays as it was.
	Suspended func(owner T, pods []*corev1.Pod, now metav1.Time)
}

// LifecycleSpec is an owner's lifecycle fields (spec.suspend,
// activeDeadlineSeconds, ttlSecondsAfterFinished), whatever its kind;
// managedBy is read by RunByNereid.
type LifecycleSpec struct {
	Suspend                 bool
	ActiveDeadlineSeconds   *int64
	TTLSecondsAfterFinished *int32
}

// SednaJobLifecycle reads the lifecycle fields of a Sedna job's spec.
func SednaJobLifecycle(l *sednav1.JobLifecycle) LifecycleSpec {
	out := SednaServiceLifecycle(&l.ServiceLifecycle)
	out.ActiveDeadlineSeconds, out.TTLSecondsAfterFinished = l.ActiveDeadlineSeconds, l.TTLSecondsAfterFinished
	return out
}

// SednaServiceLifecycle reads the lifecycle fields of a Sedna service's spec.
func SednaServiceLifecycle(l *sednav1.ServiceLifecycle) LifecycleSpec {
	return LifecycleSpec{Suspend: ptr.Deref(l.Suspend, false)}
}

// Conditions is an owner's list of conditions, whatever their Go type.
type Conditions interface {
	// Get returns the condition of a type: whether there is one, whether
	// it is True, and when its status last changed.
	Get(condType string) (found, isTrue bool, since metav1.Time)
	// Set sets the condition of a type, moving its times only when
	// something about it changed.
	Set(condType string, isTrue bool, reason, message string, now metav1.Time)
}

// SednaConditions is a Sedna object's conditions (status.conditions, or
// status.jobConditions of a learning cycle) as Conditions.
func SednaConditions(owner metav1.Object, conds *[]sednav1.JobCondition) Conditions {
	return sednaConditions{owner: owner, conds: conds}
}

type sednaConditions struct {
	owner metav1.Object
	conds *[]sednav1.JobCondition
}

func (c sednaConditions) Get(condType string) (bool, bool, metav1.Time) {
	cond := FindJobCondition(*c.conds, condType)
	if cond == nil {
		return false, false, metav1.Time{}
	}
	return true, cond.Status == corev1.ConditionTrue, cond.LastTransitionTime
}

func (c sednaConditions) Set(condType string, isTrue bool, reason, message string, now metav1.Time) {
	SetJobConditionIn(c.conds, JobConditionFor(c.owner, condType, isTrue, reason, message), now)
}

// applyLifecycle applies the lifecycle policies to the sync Begin read. It
// returns done when the policies took the whole sync (an owner deleted
// after its TTL, or suspended): the kind's sync then does nothing more.
// Events a policy records (DeadlineExceeded, Resumed) are recorded by End.
func (p *Syncer[T]) applyLifecycle(ctx context.Context, s *Sync[T]) (done bool, err error) {
	l := p.Lifecycle
	spec := l.Spec(s.Owner)
	now := metav1.NewTime(p.clock().Now())
	var finished *metav1.Time
	if l.Finished != nil {
		finished = l.Finished(s.Owner)
	}
	if finished != nil {
		return p.expireAfterFinished(ctx, s, spec, *finished, now)
	}
	if !spec.Suspend {
		s.events = append(s.events, p.resume(s, now)...)
		s.events = append(s.events, p.enforceDeadline(s, spec, now)...)
		return false, nil
	}
	return true, p.suspend(ctx, s, now)
}

// requeueAt has key synced again at t, when a policy's time comes.
func (p *Syncer[T]) requeueAt(key string, t, now time.Time) {
	if p.After != nil {
		p.After(key, t.Sub(now))
	}
}

// FinishedAt is when a Sedna job finished: its completion time once a
// condition of one of the finishing types (Complete, Failed) is True, or
// that condition's last change when it has no completion time; nil while
// none is True.
func FinishedAt(conds []sednav1.JobCondition, completion *metav1.Time, finishing ...string) *metav1.Time {
	for _, t := range finishing {
		c := FindJobCondition(conds, t)
		if c == nil || c.Status != corev1.ConditionTrue {
			continue
		}
		if completion != nil {
			return completion
		}
		at := c.LastTransitionTime
		return &at
	}
	return nil
}
