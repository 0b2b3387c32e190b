package admission

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// DefaultBackfillLimit is how many jobs may pass a waiting job that does
// not fit, by default (--quota-backfill-limit).
const DefaultBackfillLimit = 3

// Config is what the GlobalManager gives the admission Manager.
type Config struct {
	// Kube reads the quotas (a live read at each decision) and caches
	// them and the priority classes.
	Kube kubernetes.Interface
	// Namespace limits the quota cache ("" for all), as the GlobalManager's.
	Namespace string
	// BackfillLimit is how many later jobs may be admitted past a job that
	// waits because it does not fit, before admission turns strict for it
	// (0: strict order always).
	BackfillLimit int
}

// Manager admits the jobs of every controller against the ResourceQuotas of
// their namespaces, one namespace at a time, in one order: a job is
// admitted only when every quota can hold all of it, after what was
// admitted and not yet created.
type Manager struct {
	kube     kubernetes.Interface
	backfill int
	// clock times the backoffs of refused jobs.
	clock clock.WithDelayedExecution

	quotas   corelisters.ResourceQuotaLister
	ranges   corelisters.LimitRangeLister
	classes  schedulinglisters.PriorityClassLister
	synced   []cache.InformerSynced
	start    func(stop <-chan struct{})
	handlers map[schema.GroupVersionKind]func(key string)

	mu         sync.Mutex
	namespaces map[string]*namespace
}

// namespace is the queue of one namespace; its lock is held across a
// decision, the live read of its quotas included, so decisions of one
// namespace never interleave.
type namespace struct {
	mu      sync.Mutex
	entries map[string]*entry // by kind and key
}

// entry is a job that asked to be admitted and has not created what it
// asked for.
type entry struct {
	kind     schema.GroupVersionKind
	key      string
	uid      types.UID
	name     string
	created  time.Time
	priority int32
	charge   Charge
	// sig identifies the charge: a job whose request changed asks anew.
	sig string
	// admitted says the room is held for it until it is Done.
	admitted bool
	// passed counts the jobs admitted past this one while it did not fit.
	passed int
	// why is what it waits for, when it waits; never says it would not
	// fit even the empty quotas.
	why   string
	never bool
	// refusals counts the API server's refusals of what it was admitted
	// for; it is not admitted again before notBefore.
	refusals  int
	notBefore time.Time
}

// NewManager builds the Manager and its caches: the namespace's quotas and
// the cluster's priority classes. Controllers Watch, then Start runs it.
func NewManager(cfg Config) *Manager {
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0, kubeinformers.WithNamespace(cfg.Namespace),
		kubeinformers.WithTransform(common.DropManagedFields))
	classFactory := kubeinformers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0, kubeinformers.WithTransform(common.DropManagedFields))
	quotas := factory.Core().V1().ResourceQuotas()
	ranges := factory.Core().V1().LimitRanges()
	classes := classFactory.Scheduling().V1().PriorityClasses()
	m := &Manager{
		kube: cfg.Kube, backfill: cfg.BackfillLimit, clock: clock.RealClock{},
		quotas: quotas.Lister(), ranges: ranges.Lister(), classes: classes.Lister(),
		synced:     []cache.InformerSynced{quotas.Informer().HasSynced, ranges.Informer().HasSynced, classes.Informer().HasSynced},
		handlers:   map[schema.GroupVersionKind]func(string){},
		namespaces: map[string]*namespace{},
	}
	// Room freed (a pod finished or deleted: the quota controller lowers
	// usage) or a quota raised wakes the first job waiting there; its
	// decision admits whoever fits, in order, and wakes them.
	wake := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if q, ok := obj.(*corev1.ResourceQuota); ok {
			m.wakeFirst(q.Namespace)
		}
	}
	_, _ = quotas.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: wake, UpdateFunc: func(_, obj any) { wake(obj) }, DeleteFunc: wake,
	})
	m.start = func(stop <-chan struct{}) {
		factory.Start(stop)
		classFactory.Start(stop)
	}
	return m
}

// Watch registers how jobs of kind are woken when they are admitted by
// another's decision or room is freed. Controllers call it before Start;
// the InformerSynced it returns is the Manager's caches'. A nil Manager
// watches nothing.
func (m *Manager) Watch(kind schema.GroupVersionKind, enqueue func(key string)) cache.InformerSynced {
	if m == nil {
		return func() bool { return true }
	}
	m.mu.Lock()
	m.handlers[kind] = enqueue
	m.mu.Unlock()
	return func() bool {
		for _, s := range m.synced {
			if !s() {
				return false
			}
		}
		return true
	}
}

// Start starts the caches; they stop with ctx.
func (m *Manager) Start(ctx context.Context) {
	if m != nil {
		m.start(ctx.Done())
	}
}

// Request is one job asking to create what it lacks.
type Request struct {
	// Kind and Key (its queue key) name the job; Owner is the job.
	Kind  schema.GroupVersionKind
	Key   string
	Owner common.Owner
	// PriorityClassName orders the job: its pods' priority class.
	PriorityClassName string
	// Charge is what it is about to create.
	Charge Charge
}

// Decision is what Admit says.
type Decision struct {
	// Admitted: create, then call Done.
	Admitted bool
	// Quotas says whether the namespace has any ResourceQuota; without
	// one every request is admitted and nothing is held.
	Quotas bool
	// Message says what the job waits for, or which quotas hold it.
	Message string
	// made says the job lacks nothing (Made).
	made bool
	// never says the job would not fit even the namespace's empty quotas:
	// it waits for a person to change the quota or the job.
	never bool
}

// admitted is what a job admitted in a namespace with quotas is told.
var admitted = Decision{Admitted: true, Quotas: true, Message: "admitted: every quota of the namespace holds the job"}

// Made is what a job that lacks nothing is told: its Admitted condition,
// when it has one, is True (a status write lost after its creation must not
// leave it waiting).
var Made = Decision{Admitted: true, Quotas: true, Message: "nothing of the job waits for quota", made: true}

// Admit decides whether req's job may create what it asks for now. A job
// admitted holds its room until Done; one that waits stays in its
// namespace's queue until it is admitted or Forgotten, and is woken (its
// controller's enqueue) when admitted by another's decision.
func (m *Manager) Admit(ctx context.Context, req Request) (Decision, error) {
	if m == nil {
		return Decision{Admitted: true}, nil
	}
	ns := req.Owner.GetNamespace()
	cached, err := m.quotas.ResourceQuotas(ns).List(labels.Everything())
	if err != nil {
		return Decision{}, err
	}
	if len(cached) == 0 {
		return m.admitWithoutQuota(ns, req), nil
	}
	req.Charge = m.defaulted(ns, req.Charge)
	q := m.namespace(ns)
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.upsert(req, m.priority(req.PriorityClassName))
	if e.admitted {
		return admitted, nil
	}
	// The cache may lag what the API server has charged (our own creates
	// included); the decision reads the quotas as they are.
	live, err := m.kube.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Decision{}, fmt.Errorf("reading the ResourceQuotas of namespace %s: %w", ns, err)
	}
	if len(live.Items) == 0 {
		delete(q.entries, entryKey(req.Kind, req.Key))
		return Decision{Admitted: true}, nil
	}
	for _, other := range q.decide(live.Items, m.backfill, m.clock.Now()) {
		if other != e {
			m.enqueue(other)
		}
	}
	if e.admitted {
		return admitted, nil
	}
	return Decision{Quotas: true, Message: e.why, never: e.never}, nil
}

// admitWithoutQuota admits req's job in namespace ns, which the cache says
// has no quota: nothing is queued and no room held (a quota made meanwhile
// is met by the API server, which refuses what does not fit; the
// controllers then remove what they made of the job). Only a job admitted
// before the quota went, asking the same, is told it was admitted.
func (m *Manager) admitWithoutQuota(ns string, req Request) Decision {
	q := m.lookup(ns)
	if q == nil {
		return Decision{Admitted: true}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	k := entryKey(req.Kind, req.Key)
	if e := q.entries[k]; e != nil && e.admitted && e.uid == req.Owner.GetUID() && e.sig == signature(m.defaulted(ns, req.Charge)) {
		return admitted
	}
	delete(q.entries, k)
	return Decision{Admitted: true}
}

// defaulted is c with its pods as the API server will charge them: with
// the defaults of the LimitRanges of namespace ns.
func (m *Manager) defaulted(ns string, c Charge) Charge {
	if ranges, err := m.ranges.LimitRanges(ns).List(labels.Everything()); err == nil && len(ranges) > 0 {
		c.Pods = withLimitRangeDefaults(c.Pods, ranges)
	}
	return c
}

// Done says the job of kind and key created what it was admitted for (or
// gave up): its room is no longer held, the quotas count what it made. A
// job whose creation was refused (Undo) stays in the queue. A decision made
// while this job's pods were charged and its room still held counted them
// twice: the first job waiting decides again.
func (m *Manager) Done(kind schema.GroupVersionKind, key string) {
	m.remove(kind, key, func(e *entry) bool { return e.admitted })
}

// refused puts the job of kind and key back in its queue, not admitted,
// with its backoff doubled; it is woken when the backoff ends.
func (m *Manager) refused(kind schema.GroupVersionKind, key string) time.Duration {
	if m == nil {
		return 0
	}
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	q := m.lookup(ns)
	if q == nil {
		return 0
	}
	q.mu.Lock()
	e := q.entries[entryKey(kind, key)]
	if e == nil {
		q.mu.Unlock()
		return 0
	}
	e.admitted = false
	e.refusals++
	wait := min(refusalBackoff<<(e.refusals-1), maxRefusalBackoff)
	e.notBefore = m.clock.Now().Add(wait)
	q.mu.Unlock()
	m.clock.AfterFunc(wait, func() { m.enqueue(e) })
	return wait
}

// The backoff of a job the API server refused after admission.
const (
	refusalBackoff    = 5 * time.Second
	maxRefusalBackoff = 5 * time.Minute
)

// Forget drops the job of kind and key from its namespace's queue (it is
// gone or finished) and wakes the first one waiting there: the room it
// held, or its place at the head, is free.
func (m *Manager) Forget(kind schema.GroupVersionKind, key string) {
	m.remove(kind, key, func(*entry) bool { return true })
}

// remove drops the job of kind and key from its queue when it is there and
// which says so, then wakes the first job waiting in its namespace.
func (m *Manager) remove(kind schema.GroupVersionKind, key string, which func(*entry) bool) {
	if m == nil {
		return
	}
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	q := m.lookup(ns)
	if q == nil {
		return
	}
	q.mu.Lock()
	e := q.entries[entryKey(kind, key)]
	removed := e != nil && which(e)
	if removed {
		delete(q.entries, entryKey(kind, key))
	}
	q.mu.Unlock()
	if removed {
		m.wakeFirst(ns)
	}
}

// Waiting says how many jobs of the namespace wait (for tests and metrics).
func (m *Manager) Waiting(ns string) int {
	q := m.lookup(ns)
	if q == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, e := range q.entries {
		if !e.admitted {
			n++
		}
	}
	return n
}

// lookup is the queue of ns, nil when none was ever made.
func (m *Manager) lookup(ns string) *namespace {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.namespaces[ns]
}

// namespace is the queue of ns, made when there is none.
func (m *Manager) namespace(ns string) *namespace {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.namespaces[ns]
	if q == nil {
		q = &namespace{entries: map[string]*entry{}}
		m.namespaces[ns] = q
	}
	return q
}

// wakeFirst wakes the first job waiting in ns, whose decision then
// admits, in order, all that fit.
func (m *Manager) wakeFirst(ns string) {
	q := m.lookup(ns)
	if q == nil {
		return
	}
	q.mu.Lock()
	order := q.ordered()
	q.mu.Unlock()
	for _, e := range order {
		if !e.admitted {
			m.enqueue(e)
			return
		}
	}
}

func (m *Manager) enqueue(e *entry) {
	m.mu.Lock()
	h := m.handlers[e.kind]
	m.mu.Unlock()
	if h != nil {
		h(e.key)
	}
}

// priority is the value of a pod priority class: the cluster's global
// default for none, 0 when there is none or the class is unknown (the API
// server refuses such pods anyway).
func (m *Manager) priority(class string) int32 {
	if class != "" {
		if pc, err := m.classes.Get(class); err == nil {
			return pc.Value
		}
		return 0
	}
	all, _ := m.classes.List(labels.Everything())
	for _, pc := range all {
		if pc.GlobalDefault {
			return pc.Value
		}
	}
	return 0
}

func entryKey(kind schema.GroupVersionKind, key string) string {
	return kind.Kind + "/" + key
}

// upsert adds req's job to the queue, or updates it; a job whose charge
// changed loses the room it held.
func (q *namespace) upsert(req Request, priority int32) *entry {
	k := entryKey(req.Kind, req.Key)
	sig := signature(req.Charge)
	e := q.entries[k]
	if e == nil || e.uid != req.Owner.GetUID() {
		e = &entry{kind: req.Kind, key: req.Key, uid: req.Owner.GetUID(), name: req.Owner.GetName(),
			created: req.Owner.GetCreationTimestamp().Time}
		q.entries[k] = e
	}
	if e.sig != sig {
		e.admitted = false
	}
	e.priority, e.charge, e.sig = priority, req.Charge, sig
	return e
}

// ordered is the queue in admission order: higher priority first, then the
// older job, then by kind and key.
func (q *namespace) ordered() []*entry {
	out := make([]*entry, 0, len(q.entries))
	for _, e := range q.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		if !a.created.Equal(b.created) {
			return a.created.Before(b.created)
		}
		return entryKey(a.kind, a.key) < entryKey(b.kind, b.key)
	})
	return out
}

// decide admits, in order, the waiting jobs that fit quotas after the room
// held by those already admitted, and returns those it admitted now. A job
// that does not fit lets later ones pass while it has been passed fewer than
// backfill times; then it holds the ones behind it until it fits. A job that
// could not fit even in empty quotas holds no one.
func (q *namespace) decide(quotas []corev1.ResourceQuota, backfill int, now time.Time) []*entry {
	order := q.ordered()
	free := make([]corev1.ResourceList, len(quotas))
	for i := range quotas {
		free[i] = freeIn(&quotas[i])
	}
	for _, e := range order {
		if e.admitted {
			take(free, quotas, e.charge)
		}
	}
	var admitted, blocking []*entry
	for _, e := range order {
		if e.admitted {
			continue
		}
		if now.Before(e.notBefore) {
			e.why = fmt.Sprintf("the API server refused a pod of it for quota after it was admitted (%d refusals so far); it asks again at %s",
				e.refusals, e.notBefore.UTC().Format(time.RFC3339))
			continue
		}
		e.never = false
		if why, never := doesNotFit(quotas, free, e.charge); why != "" {
			e.why, e.never = why, never
			if !never {
				blocking = append(blocking, e)
			}
			continue
		}
		if i := slices.IndexFunc(blocking, func(b *entry) bool { return b.passed >= backfill }); i >= 0 {
			b := blocking[i]
			e.why = fmt.Sprintf("waits behind %s %s, which does not fit and was passed %d times (the backfill limit): %s",
				common.LowerKind(b.kind), b.name, b.passed, b.why)
			continue
		}
		take(free, quotas, e.charge)
		e.admitted, e.why = true, ""
		for _, b := range blocking {
			b.passed++
		}
		admitted = append(admitted, e)
	}
	return admitted
}

// freeIn is what quota q has left: hard less used, per resource; a
// resource the quota controller has not counted yet has nothing left.
func freeIn(q *corev1.ResourceQuota) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, hard := range q.Spec.Hard {
		used, counted := q.Status.Used[name]
		if !counted {
			out[name] = resource.Quantity{}
			continue
		}
		left := hard.DeepCopy()
		left.Sub(used)
		out[name] = left
	}
	return out
}

func take(free []corev1.ResourceList, quotas []corev1.ResourceQuota, c Charge) {
	for i := range quotas {
		for name, v := range c.against(&quotas[i]) {
			left := free[i][name]
			left.Sub(v)
			free[i][name] = left
		}
	}
}

// doesNotFit says why c does not fit the quotas' free room, "" when it
// does; never says it would not fit even in the empty quotas.
func doesNotFit(quotas []corev1.ResourceQuota, free []corev1.ResourceList, c Charge) (why string, never bool) {
	idx := make([]int, len(quotas))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return quotas[idx[a]].Name < quotas[idx[b]].Name })
	for _, i := range idx {
		q := &quotas[i]
		need := c.against(q)
		names := make([]string, 0, len(need))
		for name := range need {
			names = append(names, string(name))
		}
		sort.Strings(names)
		for _, n := range names {
			name := corev1.ResourceName(n)
			v, hard := need[name], q.Spec.Hard[name]
			if v.IsZero() {
				continue
			}
			if _, counted := q.Status.Used[name]; !counted {
				return fmt.Sprintf("needs %s=%s; quota %s has not counted its usage yet", name, v.String(), q.Name), false
			}
			if v.Cmp(hard) > 0 {
				return fmt.Sprintf("needs %s=%s, more than the %s quota %s allows in all", name, v.String(), hard.String(), q.Name), true
			}
			left := free[i][name]
			if v.Cmp(left) > 0 {
				shown := left.DeepCopy()
				if shown.Sign() < 0 {
					shown = resource.Quantity{}
				}
				return fmt.Sprintf("needs %s=%s, %s free of %s in quota %s", name, v.String(), shown.String(), hard.String(), q.Name), false
			}
		}
	}
	return "", false
}

// signature identifies what a charge asks for: each pod's usage and what
// selects it in a quota, and the objects.
func signature(c Charge) string {
	pods := make([]string, 0, len(c.Pods))
	for _, p := range c.Pods {
		usage := podUsage(p)
		fields := make([]string, 0, len(usage)+2)
		for name, v := range usage {
			fields = append(fields, string(name)+"="+v.String())
		}
		fields = append(fields, "priorityClass="+p.Spec.PriorityClassName, fmt.Sprint("terminating=", scopeMatches(
			corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopeTerminating}, p)),
			fmt.Sprint("crossNamespace=", crossNamespaceAffinity(p)))
		sort.Strings(fields)
		pods = append(pods, strings.Join(fields, ","))
	}
	sort.Strings(pods)
	objects := make([]string, 0, len(c.Objects))
	for _, o := range c.Objects {
		objects = append(objects, fmt.Sprint(o))
	}
	sort.Strings(objects)
	return strings.Join(pods, ";") + "|" + strings.Join(objects, ";")
}
