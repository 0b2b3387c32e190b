package edgehub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// ConditionEdgeSynced is the condition the hub sets on an object it cannot
// send to its edge nodes (False), and sets True once a later version of it is
// sent. An object that was always sent has none: the hub writes nothing to
// the status of objects it sends as it should.
const ConditionEdgeSynced = "EdgeSynced"

// The reasons of ConditionEdgeSynced.
const (
	// ReasonObjectTooLarge: the object, even without status, managedFields
	// and the last-applied annotation, is over the largest frame a
	// LocalController reads.
	ReasonObjectTooLarge = "ObjectTooLarge"
	// ReasonNotEncodable: the object could not be encoded for the channel.
	ReasonNotEncodable = "NotEncodable"
	// ReasonSent: the object's current version was sent.
	ReasonSent = "Sent"
)

// syncCondition is a condition the hub wants on an object: EdgeSynced, or
// EdgeLinked (reach.go).
type syncCondition struct {
	typ             string
	ok              bool
	reason, message string
	// eventType, when set, is the type of the event that says the same
	// once the condition is written.
	eventType string
}

// unsendableCondition is the condition for an object that cannot be sent for
// err. Its message does not depend on the object's size or the node, so that
// every node's session wants the same condition, and writing it (which makes a
// new version, which is tried again) settles at once.
func unsendableCondition(err error) syncCondition {
	if errors.Is(err, edgeproto.ErrTooLarge) {
		return syncCondition{typ: ConditionEdgeSynced, reason: ReasonObjectTooLarge, message: fmt.Sprintf(
			"cannot be sent to its edge nodes: over the %d MiB the edge channel carries, even without its status, managedFields "+
				"and last-applied annotation; their LocalControllers keep the previous version or none (see the %s events for the nodes)",
			edgeproto.MaxObjectFrameBytes>>20, ReasonUnsendable)}
	}
	return syncCondition{typ: ConditionEdgeSynced, reason: ReasonNotEncodable, message: fmt.Sprintf(
		"cannot be sent to its edge nodes: %v; their LocalControllers keep the previous version or none", err)}
}

var sentCondition = syncCondition{typ: ConditionEdgeSynced, ok: true, reason: ReasonSent, message: "the current version was sent to its edge nodes"}

// conditionAccess reads and writes the hub's conditions of an object, in
// the condition type its kind's status keeps.
type conditionAccess struct {
	// status and message of obj's condition of type typ; "" when it has
	// none.
	status func(obj metav1.Object, typ string) (corev1.ConditionStatus, string)
	// set sets it on obj, saying whether that changed anything.
	set func(obj metav1.Object, c syncCondition, now metav1.Time) bool
	// update writes obj's status.
	update func(ctx context.Context, obj metav1.Object) error
}

func (c syncCondition) status() corev1.ConditionStatus {
	if c.ok {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

// The condition lists an object's type keeps (the API types' methods).
type (
	metaConditioned interface{ MetaConditions() *[]metav1.Condition }
	jobConditioned  interface {
		metav1.Object
		ConditionList() *[]sednav1.JobCondition
	}
)

// kind is a kind the hub sends, and the access to its objects' conditions.
type kind struct {
	*desired.Kind
	// conditions reads and writes the EdgeSynced condition of its objects.
	conditions conditionAccess
}

// edgeKinds are the kinds of table the hub sends, with their informers in
// factory; it writes their status with client.
func edgeKinds(table []*kinds.Kind, client nereidclient.Interface, factory nereidinformers.SharedInformerFactory) []*kind {
	sent := desired.KindsOf(table, factory)
	out := make([]*kind, 0, len(sent))
	for _, t := range table {
		if t.Edge == nil {
			continue
		}
		update := t.Edge.UpdateStatus
		out = append(out, &kind{Kind: sent[len(out)],
			conditions: conditionsOf(func(ctx context.Context, obj metav1.Object) error { return update(ctx, client, obj) })})
	}
	return out
}

// conditionsOf reads and writes the hub's conditions in the list the
// object's type keeps, and writes its status with update.
func conditionsOf(update func(context.Context, metav1.Object) error) conditionAccess {
	return conditionAccess{
		status: func(obj metav1.Object, typ string) (corev1.ConditionStatus, string) {
			switch o := obj.(type) {
			case metaConditioned:
				if c := apimeta.FindStatusCondition(*o.MetaConditions(), typ); c != nil {
					return corev1.ConditionStatus(c.Status), c.Message
				}
			case jobConditioned:
				if c := common.FindJobCondition(*o.ConditionList(), typ); c != nil {
					return c.Status, c.Message
				}
			}
			return "", ""
		},
		set: func(obj metav1.Object, c syncCondition, now metav1.Time) bool {
			switch o := obj.(type) {
			case metaConditioned:
				return apimeta.SetStatusCondition(o.MetaConditions(), metav1.Condition{
					Type: c.typ, Status: metav1.ConditionStatus(c.status()), Reason: c.reason, Message: c.message,
					ObservedGeneration: obj.GetGeneration(), LastTransitionTime: now,
				})
			case jobConditioned:
				return common.SetJobConditionIn(o.ConditionList(), common.JobConditionFor(obj, c.typ, c.ok, c.reason, c.message), now)
			}
			return false
		},
		update: update,
	}
}

// conditionWriter writes the conditions the sessions and the reach scan
// want, one object at a time, off their loops.
type conditionWriter struct {
	hub  *Hub
	mu   sync.Mutex
	want map[conditionKey]syncCondition
	// peak is the most want held since it was last made: a map keeps the
	// room of its largest wave (every object of a fleet, once), so an
	// emptied one that had grown is made again.
	peak  int
	queue workqueue.TypedRateLimitingInterface[conditionKey]
}

// shrinkPast is the peak past which an emptied want map is made again.
const shrinkPast = 64

// conditionKey is one condition of one object.
type conditionKey struct {
	ref edgeproto.ObjectRef
	typ string
}

func newConditionWriter(h *Hub) *conditionWriter {
	return &conditionWriter{
		hub:  h,
		want: make(map[conditionKey]syncCondition),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[conditionKey](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[conditionKey]{Name: "edgehub_conditions", Clock: h.clock}),
	}
}

// unsendable records that the object ref cannot be sent for err.
func (w *conditionWriter) unsendable(ref edgeproto.ObjectRef, err error) {
	w.wants(ref, unsendableCondition(err))
}

// sent records that obj was sent: an object whose condition says it could
// not be has it set True.
func (w *conditionWriter) sent(k *kind, ref edgeproto.ObjectRef, obj metav1.Object) {
	if st, _ := k.conditions.status(obj, ConditionEdgeSynced); st == corev1.ConditionFalse {
		w.wants(ref, sentCondition)
	}
}

func (w *conditionWriter) wants(ref edgeproto.ObjectRef, c syncCondition) {
	key := conditionKey{ref: ref, typ: c.typ}
	w.mu.Lock()
	w.want[key] = c
	w.peak = max(w.peak, len(w.want))
	w.mu.Unlock()
	w.queue.Add(key)
}

// run writes conditions until ctx is done.
func (w *conditionWriter) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	for {
		key, quit := w.queue.Get()
		if quit {
			return
		}
		if err := w.write(ctx, key); err != nil {
			klog.FromContext(ctx).V(2).Info("Cannot write an object's condition yet; retrying", "object", key.ref, "condition", key.typ, "err", err)
			w.queue.AddRateLimited(key)
		} else {
			w.queue.Forget(key)
		}
		w.queue.Done(key)
	}
}

// write sets the condition wanted for key on the object as the cache holds
// it, and records its event. A conflict is retried once the cache has the
// newer version; an object that is gone needs nothing.
func (w *conditionWriter) write(ctx context.Context, key conditionKey) error {
	ref := key.ref
	w.mu.Lock()
	c, ok := w.want[key]
	w.mu.Unlock()
	k := w.hub.byName[ref.Kind]
	if !ok || k == nil {
		return nil
	}
	cached, exists, err := k.Informer.GetIndexer().GetByKey(ref.Namespace + "/" + ref.Name)
	if err != nil || !exists {
		w.forget(ref, c)
		return err
	}
	obj := cached.(runtime.Object).DeepCopyObject().(metav1.Object)
	if !common.RunByNereid(obj) || !k.conditions.set(obj, c, metav1.NewTime(w.hub.clock.Now())) {
		w.forget(ref, c)
		return nil
	}
	if err := k.conditions.update(ctx, obj); err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(ref, c)
			return nil
		}
		return err
	}
	w.forget(ref, c)
	klog.FromContext(ctx).V(2).Info("Set a condition", "object", ref, "condition", c.typ, "status", c.status(), "reason", c.reason)
	if c.eventType != "" && w.hub.recorder != nil {
		w.hub.recorder.Event(obj.(runtime.Object), c.eventType, c.reason, c.message)
	}
	return nil
}

// forget drops what was wanted for ref, unless a session wanted something
// else meanwhile.
func (w *conditionWriter) forget(ref edgeproto.ObjectRef, c syncCondition) {
	key := conditionKey{ref: ref, typ: c.typ}
	w.mu.Lock()
	if w.want[key] == c {
		w.drop(key)
	}
	w.mu.Unlock()
}

// settled says that ref's condition typ is as it should be: a condition
// wanted for it and not written yet no longer holds (its node came back
// before the write's turn), and is dropped rather than written late, with
// its event, and then set right again.
func (w *conditionWriter) settled(ref edgeproto.ObjectRef, typ string) {
	key := conditionKey{ref: ref, typ: typ}
	w.mu.Lock()
	if _, ok := w.want[key]; ok {
		w.drop(key)
	}
	w.mu.Unlock()
}

// drop deletes key's want; w.mu is held.
func (w *conditionWriter) drop(key conditionKey) {
	delete(w.want, key)
	if len(w.want) == 0 && w.peak > shrinkPast {
		w.want, w.peak = make(map[conditionKey]syncCondition), 0
	}
}
