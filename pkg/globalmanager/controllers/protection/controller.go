// Package protection keeps a Model or Dataset that jobs name from vanishing
// under them.
//
// Decision: a finalizer that waits, as Kubernetes protects a PersistentVolumeClaim
// a pod uses. Every Model carries the finalizer nereid.io/model-protection,
// every Dataset nereid.io/dataset-protection. A Model (Dataset) deleted while
// a job of its namespace names it (the kinds of the table with ModelNames,
// DatasetNames) stays (Terminating), with
// the status condition DeletionBlocked naming the jobs (the first ten by kind
// and name, and how many more) and a Warning event when it starts to wait, or
// waits for another reason;
// the finalizer is removed, and the object goes, once no job names it, by the
// caches and then by a live list of the API server (a job created just
// before the delete may not be in the caches yet; while the list fails the
// condition says so, reason CannotVerify). The live lists are made per
// namespace, not per object: the objects of a namespace that wait for one when
// it starts share it, so deleting a thousand unused Models lists the
// namespace's jobs a few times, not three thousand. A job created between that list
// and the finalizer's removal can still be missed: closing that takes an
// admission check, as Kubernetes has for PersistentVolumeClaims. The jobs
// keep working meanwhile: their workers still get the Model's URL. A job
// created while the object is Terminating starts as any other and holds it
// too (refusing to start it would hold the object just the same, as a job
// that names it, and leave both waiting on the user).
//
// A Model's status metrics and updateTime are written by the learning-cycle
// controllers when a round deploys a new model into it (see package learningcycle).
package protection

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
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// ModelName and DatasetName are the controllers' names in logs, metrics and
// events.
const (
	ModelName   = "model-protection"
	DatasetName = "dataset-protection"
)

// ModelFinalizer holds a Model while jobs name it; DatasetFinalizer a Dataset.
const (
	ModelFinalizer   = "nereid.io/model-protection"
	DatasetFinalizer = "nereid.io/dataset-protection"
)

// ConditionDeletionBlocked says a deleted Model or Dataset waits for the jobs
// that name it.
const ConditionDeletionBlocked = "DeletionBlocked"

// protected is a Model or a Dataset, as the informer's cache holds it.
type protected interface {
	metav1.Object
	runtime.Object
	MetaConditions() *[]metav1.Condition
}

// target is what the controller protects: Models or Datasets.
type target struct {
	name      string // the controller's
	noun      string // "model", in messages
	finalizer string
	index     string                                     // common.ByModel or common.ByDataset
	names     func(k *kinds.Kind) func(obj any) []string // what a kind's object names of the target
	addIndex  func(cache.SharedIndexInformer, func(obj any) []string) error
	informer  func(nereidinformers.SharedInformerFactory) cache.SharedIndexInformer
	update    func(ctx context.Context, c sednaclient.Interface, obj protected, status bool) (protected, error)
	// whenNamed protects an object only once a job names it: a fleet
	// has a Dataset a node, tens of thousands of them, most named by no
	// job, and a finalizer written on each would be as many updates and
	// as many objects sent to their nodes again. The job handler enqueues
	// what a new job names, so it is protected as the job is made.
	whenNamed bool
}

var models = target{
	name: ModelName, noun: "model", finalizer: ModelFinalizer, index: common.ByModel,
	names: func(k *kinds.Kind) func(obj any) []string { return k.ModelNames },
	addIndex: func(inf cache.SharedIndexInformer, _ func(obj any) []string) error {
		return common.IndexByModel(inf)
	},
	informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Sedna().V1alpha1().Models().Informer()
	},
	update: func(ctx context.Context, c sednaclient.Interface, obj protected, status bool) (protected, error) {
		m := obj.(*sednav1.Model)
		if status {
			return c.SednaV1alpha1().Models(m.Namespace).UpdateStatus(ctx, m, metav1.UpdateOptions{})
		}
		return c.SednaV1alpha1().Models(m.Namespace).Update(ctx, m, metav1.UpdateOptions{})
	},
}

var datasets = target{
	name: DatasetName, noun: "dataset", finalizer: DatasetFinalizer, index: common.ByDataset,
	names:    func(k *kinds.Kind) func(obj any) []string { return k.DatasetNames },
	addIndex: common.IndexByDataset,
	informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Sedna().V1alpha1().Datasets().Informer()
	},
	update: func(ctx context.Context, c sednaclient.Interface, obj protected, status bool) (protected, error) {
		d := obj.(*sednav1.Dataset)
		if status {
			return c.SednaV1alpha1().Datasets(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
		return c.SednaV1alpha1().Datasets(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	},
	whenNamed: true,
}

// Controller adds and removes the protection finalizer of one target.
type Controller struct {
	target
	client   sednaclient.Interface
	objects  cache.Indexer // the protected kind's cache
	users    []userIndex
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string] // protected objects, by namespace/name
	verify   workqueue.TypedRateLimitingInterface[string] // namespaces with objects in pending
	recorder record.EventRecorder
	metrics  *common.Metrics
	clock    clock.PassiveClock // Deps.Clock
	recheck  time.Duration      // liveRecheck, but in tests

	mu      sync.Mutex
	pending map[string]map[string]bool // namespace → deleted objects no cache names a job of, waiting for a live list
}

// userIndex is one job kind's informer index by the target, its live list,
// and what one of its objects names.
type userIndex struct {
	kind    string
	indexer cache.Indexer
	list    pageLister
	names   func(obj any) []string
}

// pageLister lists a page of a kind's jobs in a namespace from the API
// server, and the token of the next page (kinds.Kind's ListPage).
type pageLister func(ctx context.Context, namespace string, opts metav1.ListOptions) ([]metav1.Object, string, error)

// NewController watches Models and the jobs of every kind of d.Kinds that
// names them.
func NewController(ctx context.Context, d kinds.Deps) (*Controller, error) {
	return newController(ctx, d, models)
}

// NewDatasetController watches Datasets and the jobs of every kind of
// d.Kinds that names them.
func NewDatasetController(ctx context.Context, d kinds.Deps) (*Controller, error) {
	return newController(ctx, d, datasets)
}

func newController(_ context.Context, d kinds.Deps, t target) (*Controller, error) {
	client, recorder, metrics := d.Client, d.Recorder, d.Metrics
	objects := t.informer(d.Informers)
	c := &Controller{
		target:   t,
		client:   client,
		objects:  objects.GetIndexer(),
		queue:    common.NewQueue(t.name),
		verify:   common.NewQueue(t.name + "-live-list"),
		recorder: recorder,
		metrics:  metrics,
		clock:    d.ClockOrReal(),
		recheck:  liveRecheck,
		pending:  map[string]map[string]bool{},
	}
	handlers := []common.Handler{{Informer: objects, Handler: common.OwnerHandler(c.queue.Add)}}
	for _, k := range d.Kinds {
		names := t.names(k)
		if names == nil || k.ListPage == nil {
			continue
		}
		inf := k.Informer(d.Informers)
		if err := t.addIndex(inf, names); err != nil {
			return nil, fmt.Errorf("%s: %w", k.GVK.Kind, err)
		}
		list := k.ListPage
		c.users = append(c.users, userIndex{kind: k.GVK.Kind, indexer: inf.GetIndexer(), names: names,
			list: func(ctx context.Context, ns string, opts metav1.ListOptions) ([]metav1.Object, string, error) {
				return list(ctx, client, ns, opts)
			}})
		handlers = append(handlers, common.Handler{Informer: inf, Handler: c.jobHandler(names)})
	}
	sort.Slice(c.users, func(i, j int) bool { return c.users[i].kind < c.users[j].kind })
	var err error
	if c.synced, err = common.AddHandlers(handlers...); err != nil {
		return nil, err
	}
	return c, nil
}

// Run processes the protected objects with workers goroutines, and the
// namespaces whose objects wait for a live list with one, until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	lists := make(chan error, 1)
	// Two at a time, each bounded: a namespace of many jobs, or a list that
	// hangs, must not hold up the objects of every other namespace. The
	// queue never gives one namespace to two workers at once.
	go func() { lists <- common.Run(ctx, c.name+"-live-list", c.verify, 2, c.listLive, c.metrics, c.synced...) }()
	err := common.Run(ctx, c.name, c.queue, workers, c.sync, c.metrics, c.synced...)
	c.verify.ShutDown()
	return errors.Join(err, <-lists)
}

// jobHandler enqueues the objects a job names (names says which) when it
// comes or goes, and those it named and names when a change changes which:
// a job that stops naming one may release it. Other changes, status writes
// above all, change no object's users and enqueue nothing: a Model that a
// thousand jobs name would otherwise be synced at the pace of all their
// status writes.
func (c *Controller) jobHandler(names func(obj any) []string) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		for _, k := range keysOf(obj, names) {
			c.queue.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			a, b := keysOf(oldObj, names), keysOf(newObj, names)
			slices.Sort(a)
			slices.Sort(b)
			if !slices.Equal(a, b) {
				enqueue(oldObj)
				enqueue(newObj)
			}
		},
		DeleteFunc: enqueue,
	}
}

// keysOf are the namespace/name of each object job names, by names.
func keysOf(job any, names func(obj any) []string) []string {
	o, ok := job.(metav1.Object)
	if !ok {
		return nil
	}
	var keys []string
	for _, n := range names(job) {
		if k := o.GetNamespace() + "/" + n; n != "" && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// usersOf are the jobs naming the Model key, as "Kind namespace/name", sorted.
func (c *Controller) usersOf(key string) ([]string, error) {
	var users []string
	for _, u := range c.users {
		objs, err := u.indexer.ByIndex(c.index, key)
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

// liveUsersOf are the jobs of namespace ns naming each of objs, as
// usersOf, read from the API server: a job created just before a Model's
// deletion may not be in the caches yet, and releasing the object on their
// word alone would let it go from under that job (Kubernetes'
// PersistentVolumeClaim protection asks the API server too).
func (c *Controller) liveUsersOf(ctx context.Context, ns string, objs map[string]bool) (map[string][]string, error) {
	users := map[string][]string{}
	for _, u := range c.users {
		names, err := listNaming(ctx, objs, ns, u.list, u.names)
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
// returns the names of those that name (by names) each of objs, by object;
// only one page is held at a time.
func listNaming(ctx context.Context, objs map[string]bool, ns string, list pageLister, names func(obj any) []string) (map[string][]string, error) {
	named := map[string][]string{}
	opts := metav1.ListOptions{Limit: listPage}
	for {
		items, next, err := list(ctx, ns, opts)
		if err != nil {
			return nil, err
		}
		for _, j := range items {
			for _, m := range names(j) {
				if objs[m] && !slices.Contains(named[m], j.GetName()) {
					named[m] = append(named[m], j.GetName())
				}
			}
		}
		if opts.Continue = next; opts.Continue == "" {
			return named, nil
		}
	}
}

func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached := c.get(ns, name)
	if cached == nil {
		return nil
	}
	has := slices.Contains(cached.GetFinalizers(), c.finalizer)
	logger := klog.FromContext(ctx).WithValues(c.noun, klog.KObj(cached))
	switch {
	case cached.GetDeletionTimestamp() == nil && !has:
		if c.whenNamed {
			users, err := c.usersOf(key)
			if err != nil {
				return err
			}
			if len(users) == 0 {
				return nil
			}
		}
		m := cached.DeepCopyObject().(protected)
		m.SetFinalizers(append(m.GetFinalizers(), c.finalizer))
		if _, err := c.update(ctx, c.client, m, false); err != nil {
			return fmt.Errorf("adding finalizer to %s %s: %w", c.noun, key, err)
		}
		logger.V(4).Info("Protected")
	case cached.GetDeletionTimestamp() != nil && has:
		// Who names the object matters only once it is deleted. The
		// caches say; when they say no one, a live list confirms it.
		users, err := c.usersOf(key)
		if err != nil {
			return err
		}
		if len(users) == 0 {
			c.awaitList(ns, name)
			return nil
		}
		return c.setBlocked(ctx, cached, "InUse", blockedMessage(c.noun, users))
	}
	return nil
}

// get is the cached object ns/name, or nil.
func (c *Controller) get(ns, name string) protected {
	obj, ok, err := c.objects.GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return nil
	}
	p, _ := obj.(protected)
	return p
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
				_ = c.setBlocked(ctx, m, "CannotVerify", "deletion waits until the jobs that may name this "+c.noun+" can be listed: "+err.Error())
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
			if err := c.setBlocked(ctx, m, "InUse", blockedMessage(c.noun, live)); err != nil {
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

// deletedProtected is the cached object ns/name if it is deleted and still
// carries the finalizer, or nil.
func (c *Controller) deletedProtected(ns, name string) protected {
	m := c.get(ns, name)
	if m == nil || m.GetDeletionTimestamp() == nil || !slices.Contains(m.GetFinalizers(), c.finalizer) {
		return nil
	}
	return m
}

// release removes the finalizer from the cached Model m: no job names it.
func (c *Controller) release(ctx context.Context, cached protected) error {
	m := cached.DeepCopyObject().(protected)
	m.SetFinalizers(slices.DeleteFunc(m.GetFinalizers(), func(f string) bool { return f == c.finalizer }))
	if _, err := c.update(ctx, c.client, m, false); err != nil {
		return fmt.Errorf("removing finalizer from %s %s/%s: %w", c.noun, m.GetNamespace(), m.GetName(), err)
	}
	klog.FromContext(ctx).V(2).Info("Released: no job names it", c.noun, klog.KObj(m))
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
func (c *Controller) setBlocked(ctx context.Context, cached protected, reason, msg string) error {
	m := cached.DeepCopyObject().(protected)
	msg = common.ClipConditionMessage(msg)
	old := apimeta.FindStatusCondition(*m.MetaConditions(), ConditionDeletionBlocked)
	newReason := old == nil || old.Status != metav1.ConditionTrue || old.Reason != reason
	if !apimeta.SetStatusCondition(m.MetaConditions(), metav1.Condition{
		Type: ConditionDeletionBlocked, Status: metav1.ConditionTrue, Reason: reason, Message: msg,
		ObservedGeneration: m.GetGeneration(), LastTransitionTime: metav1.NewTime(c.clock.Now()),
	}) {
		return nil
	}
	updated, err := c.update(ctx, c.client, m, true)
	if err != nil {
		return fmt.Errorf("writing status of %s %s/%s: %w", c.noun, m.GetNamespace(), m.GetName(), err)
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

// blockedMessage says which jobs (sorted) hold a deleted object (noun: model).
func blockedMessage(noun string, users []string) string {
	named := users[:min(len(users), maxUsersNamed)]
	msg := "deletion waits until no job names this " + noun + "; named by " + strings.Join(named, ", ")
	if more := len(users) - len(named); more > 0 {
		msg += fmt.Sprintf(" and %d more (%d jobs)", more, len(users))
	}
	return msg
}
