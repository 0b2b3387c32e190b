// Package model keeps a Model that jobs name from vanishing under them.
//
// Decision: a finalizer that waits, as Kubernetes protects a PersistentVolumeClaim
// a pod uses. Every Model carries the finalizer nereid.io/model-protection. A
// Model deleted while a FederatedLearningJob, JointInferenceService or
// IncrementalLearningJob of its namespace names it stays (Terminating), with
// the status condition DeletionBlocked naming the jobs (the first ten by kind
// and name, and how many more) and a Warning event when it starts to wait, or
// waits for another reason;
// the finalizer is removed, and the Model goes, once no job names it, by the
// caches and then by a live list of the API server (a job created just
// before the delete may not be in the caches yet; while the list fails the
// condition says so, reason CannotVerify). The live lists are made per
// namespace, not per Model: the Models of a namespace that wait for one when
// it starts share it, so deleting a thousand unused Models lists the
// namespace's jobs a few times, not three thousand. A job created between that list
// and the finalizer's removal can still be missed: closing that takes an
// admission check, as Kubernetes has for PersistentVolumeClaims. The jobs
// keep working meanwhile: their workers still get the Model's URL. A job
// created while the Model is Terminating starts as any other and holds it
// too (refusing to start it would hold the Model just the same, as a job
// that names it, and leave both waiting on the user).
//
// A Model's status metrics and updateTime are written by the learning-cycle
// controllers when a round deploys a new model into it (see package learningcycle).
package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	sednalisters "github.com/nereid-ml/nereid/pkg/client/listers/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Name is the controller's name in logs, metrics and events.
const Name = "model-protection"

// Finalizer holds a Model while jobs name it.
const Finalizer = "nereid.io/model-protection"

// ConditionDeletionBlocked says a deleted Model waits for the jobs that name it.
const ConditionDeletionBlocked = "DeletionBlocked"

// Controller adds and removes the protection finalizer.
type Controller struct {
	client   sednaclient.Interface
	models   sednalisters.ModelLister
	users    []userIndex
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string] // Models, by namespace/name
	verify   workqueue.TypedRateLimitingInterface[string] // namespaces with Models in pending
	recorder record.EventRecorder
	metrics  *common.Metrics
	clock    clock.PassiveClock // Deps.Clock
	recheck  time.Duration      // liveRecheck, but in tests

	mu      sync.Mutex
	pending map[string]map[string]bool // namespace → deleted Models no cache names a job of, waiting for a live list
}

// userIndex is one job kind's informer index by Model, and its live list.
type userIndex struct {
	kind    string
	indexer cache.Indexer
	list    pageLister
}

// pageLister lists a page of a kind's jobs in a namespace from the API
// server, and the token of the next page (kinds.Kind's ListNamingModels).
type pageLister func(ctx context.Context, namespace string, opts metav1.ListOptions) ([]metav1.Object, string, error)

// NewController watches Models and the jobs of every kind of d.Kinds that
// names them.
func NewController(_ context.Context, d kinds.Deps) (*Controller, error) {
	client, recorder, metrics := d.Client, d.Recorder, d.Metrics
	models := d.Informers.Sedna().V1alpha1().Models()
	c := &Controller{
		client:   client,
		models:   models.Lister(),
		queue:    common.NewQueue(Name),
		verify:   common.NewQueue(Name + "-live-list"),
		recorder: recorder,
		metrics:  metrics,
		clock:    d.ClockOrReal(),
		recheck:  liveRecheck,
		pending:  map[string]map[string]bool{},
	}
	handlers := []common.Handler{{Informer: models.Informer(), Handler: common.OwnerHandler(c.queue.Add)}}
	for _, k := range d.Kinds {
		if k.ListNamingModels == nil {
			continue
		}
		inf := k.Informer(d.Informers)
		if err := common.IndexByModel(inf); err != nil {
			return nil, fmt.Errorf("%s: %w", k.GVK.Kind, err)
		}
		list := k.ListNamingModels
		c.users = append(c.users, userIndex{kind: k.GVK.Kind, indexer: inf.GetIndexer(),
			list: func(ctx context.Context, ns string, opts metav1.ListOptions) ([]metav1.Object, string, error) {
				return list(ctx, client, ns, opts)
			}})
		handlers = append(handlers, common.Handler{Informer: inf, Handler: c.jobHandler()})
	}
	sort.Slice(c.users, func(i, j int) bool { return c.users[i].kind < c.users[j].kind })
	var err error
	if c.synced, err = common.AddHandlers(handlers...); err != nil {
		return nil, err
	}
	return c, nil
}

// Run processes Models with workers goroutines, and the namespaces whose
// Models wait for a live list with one, until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	lists := make(chan error, 1)
	// Two at a time, each bounded: a namespace of many jobs, or a list that
	// hangs, must not hold up the Models of every other namespace. The
	// queue never gives one namespace to two workers at once.
	go func() { lists <- common.Run(ctx, Name+"-live-list", c.verify, 2, c.listLive, c.metrics, c.synced...) }()
	err := common.Run(ctx, Name, c.queue, workers, c.sync, c.metrics, c.synced...)
	c.verify.ShutDown()
	return errors.Join(err, <-lists)
}

// jobHandler enqueues the Models a job names when it comes or goes, and
// those it named and names when a change changes which: a job that stops
// naming a Model may release it. Other changes, status writes above all,
// change no Model's users and enqueue nothing: a Model that a thousand jobs
// name would otherwise be synced at the pace of all their status writes.
func (c *Controller) jobHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		for _, k := range common.ModelKeys(obj) {
			c.queue.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			if !sameModels(oldObj, newObj) {
				enqueue(oldObj)
				enqueue(newObj)
			}
		},
		DeleteFunc: enqueue,
	}
}

// sameModels reports whether two versions of a job name the same Models.
func sameModels(oldObj, newObj any) bool {
	a, b := common.ModelKeys(oldObj), common.ModelKeys(newObj)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// usersOf are the jobs naming the Model key, as "Kind namespace/name", sorted.
func (c *Controller) usersOf(key string) ([]string, error) {
	var users []string
	for _, u := range c.users {
		objs, err := u.indexer.ByIndex(common.ByModel, key)
		if err != nil {
			return nil, fmt.Errorf("listing %s naming %s: %w", u.kind, key, err)
		}
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok {
				users = append(users, u.kind+" "+m.GetNamespace()+"/"+m.GetName())
			}
		}
	}
	sort.Strings(users)
	return users, nil
}

// liveUsersOf are the jobs of namespace ns naming each of models, as
// usersOf, read from the API server: a job created just before a Model's
// deletion may not be in the caches yet, and releasing the Model on their
// word alone would let it go from under that job (Kubernetes'
// PersistentVolumeClaim protection asks the API server too).
func (c *Controller) liveUsersOf(ctx context.Context, ns string, models map[string]bool) (map[string][]string, error) {
	users := map[string][]string{}
	for _, u := range c.users {
		names, err := listNaming(ctx, models, ns, u.list)
		if err != nil {
			return nil, fmt.Errorf("listing %s in namespace %s: %w", u.kind, ns, err)
		}
		for m, jobs := range names {
			for _, n := range jobs {
				users[m] = append(users[m], u.kind+" "+ns+"/"+n)
			}
		}
	}
	for _, u := range users {
		sort.Strings(u)
	}
	return users, nil
}

// listPage is how many jobs a live list reads a request.
const listPage = 500

// listNaming lists a kind's jobs in ns with list, a page at a time, and
// returns the names of those that name each of models, by Model; only one
// page is held at a time.
func listNaming(ctx context.Context, models map[string]bool, ns string, list pageLister) (map[string][]string, error) {
	names := map[string][]string{}
	opts := metav1.ListOptions{Limit: listPage}
	for {
		items, next, err := list(ctx, ns, opts)
		if err != nil {
			return nil, err
		}
		for _, j := range items {
			for _, m := range common.ModelNames(j) {
				if models[m] {
					names[m] = append(names[m], j.GetName())
				}
			}
		}
		if opts.Continue = next; opts.Continue == "" {
			return names, nil
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.models.Models(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading model %s: %w", key, err)
	}
	has := slices.Contains(cached.Finalizers, Finalizer)
	models := c.client.SednaV1alpha1().Models(ns)
	logger := klog.FromContext(ctx).WithValues("model", klog.KObj(cached))
	switch {
	case cached.DeletionTimestamp == nil && !has:
		m := cached.DeepCopy()
		m.Finalizers = append(m.Finalizers, Finalizer)
		if _, err := models.Update(ctx, m, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("adding finalizer to model %s: %w", key, err)
		}
		logger.V(4).Info("Model protected")
	case cached.DeletionTimestamp != nil && has:
		// Who names the Model matters only once it is deleted. The
		// caches say; when they say no one, a live list confirms it.
		users, err := c.usersOf(key)
		if err != nil {
			return err
		}
		if len(users) == 0 {
			c.awaitList(ns, name)
			return nil
		}
		return c.setBlocked(ctx, cached, "InUse", blockedMessage(users))
	}
	return nil
}

// awaitList has the deleted Model ns/name, which no cache names a job of,
// wait for the next live list of its namespace's jobs. That list starts
// after this call, so after the Model's deletion: a job created before it is
// in the list.
func (c *Controller) awaitList(ns, name string) {
	c.keepAwaiting(ns, name)
	c.verify.Add(ns)
}

// keepAwaiting adds names to the Models of namespace ns that wait for a live
// list, without queueing ns: a list that failed is tried again with backoff.
func (c *Controller) keepAwaiting(ns string, names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[ns] == nil {
		c.pending[ns] = map[string]bool{}
	}
	for _, name := range names {
		c.pending[ns][name] = true
	}
}

// takeAwaiting returns the Models of namespace ns that wait for a live list,
// and forgets them: those that come while the list runs wait for the next.
func (c *Controller) takeAwaiting(ns string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := c.pending[ns]
	delete(c.pending, ns)
	return names
}

// listLive lists the jobs of namespace ns once, from the API server, for
// every deleted Model of ns that waits for it, and releases those no job
// names. A Model that jobs the caches have not shown name says so and is
// looked at again after c.recheck. While the list fails, the Models wait
// (the queue tries again) and their DeletionBlocked condition says why.
func (c *Controller) listLive(ctx context.Context, ns string) error {
	names := c.takeAwaiting(ns)
	if len(names) == 0 {
		return nil
	}
	listCtx, cancel := context.WithTimeout(ctx, liveListTimeout)
	users, err := c.liveUsersOf(listCtx, ns, names)
	cancel()
	if err != nil {
		for _, name := range slices.Sorted(maps.Keys(names)) {
			if m := c.deletedProtected(ns, name); m != nil {
				c.keepAwaiting(ns, name)
				// kubectl describe says why the Model stays.
				_ = c.setBlocked(ctx, m, "CannotVerify", "deletion waits until the jobs that may name this model can be listed: "+err.Error())
			}
		}
		return err
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(names)) {
		m := c.deletedProtected(ns, name)
		if m == nil {
			continue
		}
		key := ns + "/" + name
		if cached, err := c.usersOf(key); err != nil || len(cached) > 0 {
			c.queue.Add(key) // the caches have caught up: the Model's sync says who holds it
			continue
		}
		if live := users[name]; len(live) > 0 {
			// Named by jobs the caches have yet to show: their add or
			// delete brings the Model back, and so does this, should one
			// come and go unseen (a watch gap ending in a relist).
			c.queue.AddAfter(key, c.recheck)
			if err := c.setBlocked(ctx, m, "InUse", blockedMessage(live)); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := c.release(ctx, m); err != nil {
			errs = append(errs, err)
			c.queue.AddRateLimited(key)
		}
	}
	return errors.Join(errs...)
}

// deletedProtected is the cached Model ns/name if it is deleted and still
// carries the finalizer, or nil.
func (c *Controller) deletedProtected(ns, name string) *sednav1.Model {
	m, err := c.models.Models(ns).Get(name)
	if err != nil || m.DeletionTimestamp == nil || !slices.Contains(m.Finalizers, Finalizer) {
		return nil
	}
	return m
}

// release removes the finalizer from the cached Model m: no job names it.
func (c *Controller) release(ctx context.Context, cached *sednav1.Model) error {
	m := cached.DeepCopy()
	m.Finalizers = slices.DeleteFunc(m.Finalizers, func(f string) bool { return f == Finalizer })
	if _, err := c.client.SednaV1alpha1().Models(m.Namespace).Update(ctx, m, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("removing finalizer from model %s/%s: %w", m.Namespace, m.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Model released: no job names it", "model", klog.KObj(m))
	return nil
}

// liveListTimeout bounds a namespace's live list, every page of the three
// kinds; past it the Models wait and it is tried again.
const liveListTimeout = 2 * time.Minute

// liveRecheck is when a Model that only the API server's jobs hold is
// looked at again, whatever else happens.
const liveRecheck = 5 * time.Minute

// setBlocked says in the Model's DeletionBlocked condition why its deletion
// waits, unless it already says so, and in a Warning event when the reason is
// new: a Model that many jobs hold has its condition's count of them rewritten
// as they go, one by one, but not an event each time.
func (c *Controller) setBlocked(ctx context.Context, cached *sednav1.Model, reason, msg string) error {
	m := cached.DeepCopy()
	msg = common.ClipConditionMessage(msg)
	old := apimeta.FindStatusCondition(m.Status.Conditions, ConditionDeletionBlocked)
	newReason := old == nil || old.Status != metav1.ConditionTrue || old.Reason != reason
	if !apimeta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{
		Type: ConditionDeletionBlocked, Status: metav1.ConditionTrue, Reason: reason, Message: msg,
		ObservedGeneration: m.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now()),
	}) {
		return nil
	}
	updated, err := c.client.SednaV1alpha1().Models(m.Namespace).UpdateStatus(ctx, m, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("writing status of model %s/%s: %w", m.Namespace, m.Name, err)
	}
	if newReason {
		c.recorder.Event(updated, corev1.EventTypeWarning, ConditionDeletionBlocked, msg)
	}
	return nil
}

// maxUsersNamed bounds the jobs a DeletionBlocked message names; the rest
// are counted. A condition's message is at most 32,768 bytes (the status
// write of a longer one is refused), and a list of hundreds of jobs is no
// help in kubectl describe.
const maxUsersNamed = 10

// blockedMessage says which jobs (sorted) hold a deleted Model.
func blockedMessage(users []string) string {
	named := users[:min(len(users), maxUsersNamed)]
	msg := "deletion waits until no job names this model; named by " + strings.Join(named, ", ")
	if more := len(users) - len(named); more > 0 {
		msg += fmt.Sprintf(" and %d more (%d jobs)", more, len(users))
	}
	return msg
}
