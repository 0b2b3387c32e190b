package common

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Object is an owner as its generated Go type (a pointer to a
// FederatedLearningJob, a DIJob, …), which copies itself.
type Object[T any] interface {
	Owner
	DeepCopy() T
}

// StatusClient is the part of a kind's generated client, for one namespace,
// that the plumbing uses.
type StatusClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	// Delete deletes an owner (ttl.go, after its ttlSecondsAfterFinished).
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Syncer is the part of a sync every kind does the same way, around the
// kind's own decisions: Begin reads the owner and its children, End writes
// its status and records its events. A controller builds one in its
// constructor; its fields are what differs between kinds.
type Syncer[T Object[T]] struct {
	// LogName names the owner in the sync's log lines ("job").
	LogName string
	// Get reads an owner from the cache, as a lister's Get does.
	Get func(namespace, name string) (T, error)
	// Client is the kind's generated client for a namespace; End writes
	// status with it.
	Client func(namespace string) StatusClient[T]
	// Status is what of an owner a sync writes (a pointer to its status),
	// compared before and after the sync to say whether to write.
	Status func(owner T) any
	// Recorder records the events a sync returns.
	Recorder record.EventRecorder
	// Expectations of the owners' pods; nil for a kind that makes no pods.
	Expectations *Expectations
	// Forget, when set, drops what else the kind keeps of an owner that is
	// gone or being deleted, as its expectations are dropped, or that runs
	// no pods (suspended, or another controller's): its quota, its place.
	Forget func(key string)
	// Lifecycle is what the kind tells the lifecycle policies (suspend,
	// deadline, TTL, managedBy) of its owners; nil for a kind without
	// them.
	Lifecycle *Lifecycle[T]
	// Children deletes a suspended owner's children.
	Children *Children
	// Clock tells the time the policies act on; nil for the real one.
	Clock clock.PassiveClock
	// After has a key synced again after a while (a work queue's
	// AddAfter), when a policy's time comes: a deadline, a TTL.
	After func(key string, after time.Duration)

	// The caches of the owners' children, of the kinds the owner has; a nil
	// one is not listed.
	// Each has the owner index (IndexChildren).
	Pods        cache.Indexer
	Services    cache.Indexer
	Deployments cache.Indexer
	HPAs        cache.Indexer
}

// Sync is one sync of one owner, as Begin read it.
type Sync[T Object[T]] struct {
	// Key is the owner's queue key.
	Key string
	// Owner is a deep copy of the cached owner, for the sync to change.
	Owner T
	// Satisfied says whether the owner's own creates and deletes were all
	// seen when the sync began; a sync creates and deletes pods only when
	// they were, so a stale cache never makes it do so twice.
	Satisfied bool
	// The owner's children in the cache: those whose controller reference
	// has its UID, without the ones Sedna's GlobalManager left (Adopted).
	Pods        []*corev1.Pod
	Services    []*corev1.Service
	Deployments []*appsv1.Deployment
	HPAs        []*autoscalingv2.HorizontalPodAutoscaler
	// Adopted are the children Sedna's GlobalManager left, to replace.
	Adopted Adopted

	cached  T
	syncer  *Syncer[T]
	created *created
	// events are the lifecycle policies' events, which End records.
	events []Event
}

// Begin starts the sync of key: it reads the owner from the cache, copies
// it, puts a logger naming it into ctx, reads the expectations, lists and
// claims the children and applies the lifecycle policies (Lifecycle). Children created with the returned context
// are named in one event, which End records. It returns a nil Sync when
// there is nothing to do: the owner is gone or being deleted (its
// expectations are forgotten, and Forget called), another controller runs
// it (RunByNereid), a policy took the whole sync (it was deleted after its TTL,
// or it is suspended: the error is then the policy's), or the key is
// malformed.
func (p *Syncer[T]) Begin(ctx context.Context, key string) (context.Context, *Sync[T], error) {
	cached, ok, err := ReadOwner(key, p.Get)
	if !ok || err != nil {
		if err == nil && p.Expectations != nil {
			p.Expectations.Forget(key)
		}
		if err == nil && p.Forget != nil {
			p.Forget(key)
		}
		return ctx, nil, err
	}
	if !RunByNereid(cached) {
		// Another controller runs it: nothing of it is Nereid's to hold.
		if p.Forget != nil {
			p.Forget(key)
		}
		return ctx, nil, nil
	}
	s := &Sync[T]{Key: key, Owner: cached.DeepCopy(), cached: cached, syncer: p, Satisfied: true}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues(p.LogName, klog.KObj(s.Owner)))
	ctx, s.created = withCreated(ctx)

	// Read the expectations before the cache: a child whose event arrives
	// between the two reads is then in the cache the sync acts on.
	if p.Expectations != nil {
		s.Satisfied = p.Expectations.Satisfied(key)
	}
	if p.Pods != nil && err == nil {
		s.Pods, s.Adopted.Pods, err = claimChildren[*corev1.Pod](s.Owner, "pods", p.Pods)
	}
	if p.Services != nil && err == nil {
		s.Services, s.Adopted.Services, err = claimChildren[*corev1.Service](s.Owner, "services", p.Services)
	}
	if p.Deployments != nil && err == nil {
		s.Deployments, s.Adopted.Deployments, err = claimChildren[*appsv1.Deployment](s.Owner, "deployments", p.Deployments)
	}
	if p.HPAs != nil && err == nil {
		s.HPAs, s.Adopted.HPAs, err = claimChildren[*autoscalingv2.HorizontalPodAutoscaler](s.Owner, "autoscalers", p.HPAs)
	}
	if err != nil {
		return ctx, nil, fmt.Errorf("listing children of %s: %w", key, err)
	}
	if p.Lifecycle != nil {
		if done, err := p.applyLifecycle(ctx, s); done {
			return ctx, nil, err
		}
	}
	return ctx, s, nil
}

// clock is the time the policies act on.
func (p *Syncer[T]) clock() clock.PassiveClock {
	if p.Clock == nil {
		return clock.RealClock{}
	}
	return p.Clock
}

// claimChildren lists owner's children of one kind from the cache (by the
// owner index), keeps those it controls and separates the adopted ones.
func claimChildren[T metav1.Object](owner Owner, kind string, children cache.Indexer) (own, adopted []T, err error) {
	objs, err := ListOwned[T](children, owner)
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", kind, err)
	}
	own, adopted = SplitAdopted(Claim[T](owner, objs))
	return own, adopted, nil
}

// PodsMade returns the pods this sync has created so far (with the context
// Begin returned), as the API server returned them. They are not in the
// cache yet; a status computed with them is the one the next sync computes,
// so it is written once.
func (s *Sync[T]) PodsMade() []*corev1.Pod {
	return s.created.madePods()
}

// End ends the sync by the rule every kind follows, and returns actErr (what
// the sync's acts failed with), joined with a failed status write:
//
//   - While the owner's own creates and deletes are in flight and the sync
//     has nothing to say (no error, no event), nothing is written: their
//     events sync the owner again, and a write now would only be replaced.
//   - Otherwise the status of s.Owner, which the sync changed, is written
//     when it differs semantically from the cached one, with WriteStatus's
//     rule for conflicts.
//   - events (the lifecycle policies' first) are recorded once the status
//     that explains them is written, or
//     when nothing needed writing; a conflict leaves them to the next sync,
//     which computes them again from the newer object.
//   - what the sync created is named in one SuccessfulCreate event, recorded
//     whatever the status write does: the creates are done, and no later
//     sync would compute it again.
//
// logValues are key/value pairs that describe the new status in the log.
func (s *Sync[T]) End(ctx context.Context, actErr error, events []Event, logValues ...any) error {
	p := s.syncer
	events = append(s.events, events...)
	if msg := s.created.message(); msg != "" {
		p.Recorder.Event(s.Owner, corev1.EventTypeNormal, ReasonSuccessfulCreate, msg)
	}
	inFlight := p.Expectations != nil && !p.Expectations.Satisfied(s.Key) && actErr == nil && len(events) == 0
	if !inFlight && !equality.Semantic.DeepEqual(p.Status(s.cached), p.Status(s.Owner)) {
		wrote, err := WriteStatus(ctx, s.Key, actErr, func(ctx context.Context) error {
			_, err := p.Client(s.Owner.GetNamespace()).UpdateStatus(ctx, s.Owner, metav1.UpdateOptions{})
			return err
		})
		if !wrote {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Updated status", logValues...)
	}
	RecordEvents(p.Recorder, s.Owner, events)
	return actErr
}
