package gang

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

// Config is what the GlobalManager gives the gang Manager.
type Config struct {
	// Mode is --gang-scheduler.
	Mode Mode
	// Kube, Dynamic and Discovery reach the API server.
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// Namespace limits the caches ("" for all), as the GlobalManager's.
	Namespace string
	// Rediscover is how often at most the API server is asked again, when
	// a job asks for a gang scheduler it did not serve (default 30 s).
	Rediscover time.Duration

	// clock times the rediscovery and the reads of pinned nodes: the real
	// clock unless a test sets a fake one.
	clock clock.PassiveClock
}

// Manager plans the gangs of every controller's jobs. It caches the group
// objects of the modes the API server serves (only Nereid's, by the
// owner-uid label) and wakes their owners when one changes.
type Manager struct {
	// def is the cluster's mode: --gang-scheduler, auto resolved.
	def       Mode
	flag      Mode
	kube      kubernetes.Interface
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
	period    time.Duration
	clock     clock.PassiveClock

	kubeFactory    kubeinformers.SharedInformerFactory
	dynamicFactory dynamicinformer.DynamicSharedInformerFactory

	// nodes reads the nodes pods are pinned to, to say why one cannot be
	// placed.
	nodes *placement.Nodes

	mu       sync.Mutex
	served   Served
	asked    time.Time
	active   map[Mode]bool
	handlers []handler
	ctx      context.Context // set by Start
}

type handler struct {
	kind    schema.GroupVersionKind
	enqueue func(key string)
}

// NewManager asks the API server which gang APIs it serves and resolves
// --gang-scheduler. A mode named explicitly that is not served is an error:
// jobs would wait forever for a scheduler that is not there.
func NewManager(ctx context.Context, cfg Config) (*Manager, error) {
	served, err := Discover(cfg.Discovery)
	if err != nil {
		return nil, err
	}
	def := cfg.Mode
	switch {
	case def == Auto:
		def = served.Auto()
	case !served[def]:
		return nil, fmt.Errorf("--gang-scheduler=%s: the API server does not serve %s; install that scheduler or choose another (auto picks what is served)", def, API(def))
	}
	period := cfg.Rediscover
	if period == 0 {
		period = 30 * time.Second
	}
	clk := cfg.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = common.LabelOwnerUID }
	m := &Manager{
		def: def, flag: cfg.Mode, kube: cfg.Kube, dynamic: cfg.Dynamic, discovery: cfg.Discovery, period: period, clock: clk,
		served: served, asked: clk.Now(), active: map[Mode]bool{},
		kubeFactory: kubeinformers.NewSharedInformerFactoryWithOptions(cfg.Kube, 0,
			kubeinformers.WithNamespace(cfg.Namespace), kubeinformers.WithTweakListOptions(tweak),
			kubeinformers.WithTransform(common.DropManagedFields)),
		dynamicFactory: dynamicinformer.NewFilteredDynamicSharedInformerFactory(cfg.Dynamic, 0, cfg.Namespace, tweak),
		nodes:          placement.NewNodes(cfg.Kube, clk),
	}
	m.activateServed()
	klog.FromContext(ctx).Info("Gang scheduling", "flag", cfg.Mode, "mode", def,
		"kubernetes", served[Kubernetes], "volcano", served[Volcano], "coscheduling", served[Coscheduling])
	return m, nil
}

// Mode is the cluster's mode: --gang-scheduler with auto resolved.
func (m *Manager) Mode() Mode { return m.def }

// Watch makes every change of a group object of ownerKind's owners enqueue
// the owner's key. Controllers call it before Start, and wait for what it
// returns before their first sync. A nil Manager watches nothing.
func (m *Manager) Watch(ownerKind schema.GroupVersionKind, enqueue func(key string)) cache.InformerSynced {
	if m == nil {
		return func() bool { return true }
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := handler{kind: ownerKind, enqueue: enqueue}
	m.handlers = append(m.handlers, h)
	for mode := range m.active {
		for _, inf := range m.informers(mode) {
			_, _ = inf.AddEventHandler(common.ChildHandler(h.kind, h.enqueue))
		}
	}
	return m.HasSynced
}

// Start starts the caches; ones a later discovery adds start then.
func (m *Manager) Start(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	m.kubeFactory.Start(ctx.Done())
	m.dynamicFactory.Start(ctx.Done())
}

// Shutdown waits for the caches to stop, after Start's ctx is done.
func (m *Manager) Shutdown() {
	m.kubeFactory.Shutdown()
	m.dynamicFactory.Shutdown()
}

// HasSynced says whether the caches of the served modes are filled.
func (m *Manager) HasSynced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for mode := range m.active {
		for _, inf := range m.informers(mode) {
			if !inf.HasSynced() {
				return false
			}
		}
	}
	return true
}

// activateServed sets up the caches of every mode m.served says is served.
// Called with mu held (or before the Manager is shared).
func (m *Manager) activateServed() {
	for _, mode := range schedulers {
		if m.served[mode] {
			m.activate(mode)
		}
	}
}

// activate sets up the caches of a served mode. Called with mu held (or
// before the Manager is shared).
func (m *Manager) activate(mode Mode) {
	if m.active[mode] {
		return
	}
	m.active[mode] = true
	for _, inf := range m.informers(mode) {
		for _, h := range m.handlers {
			_, _ = inf.AddEventHandler(common.ChildHandler(h.kind, h.enqueue))
		}
	}
	if m.ctx != nil {
		m.kubeFactory.Start(m.ctx.Done())
		m.dynamicFactory.Start(m.ctx.Done())
	}
}

// informers are the caches of a mode's objects (made on first call).
func (m *Manager) informers(mode Mode) []cache.SharedIndexInformer {
	switch mode {
	case Kubernetes:
		s := m.kubeFactory.Scheduling().V1beta1()
		return []cache.SharedIndexInformer{s.Workloads().Informer(), s.PodGroups().Informer()}
	case Volcano, Coscheduling:
		return []cache.SharedIndexInformer{m.dynamicFactory.ForResource(resources(mode)[0]).Informer()}
	}
	return nil
}

func (m *Manager) workloads() schedulinglisters.WorkloadLister {
	return m.kubeFactory.Scheduling().V1beta1().Workloads().Lister()
}

func (m *Manager) podGroups() schedulinglisters.PodGroupLister {
	return m.kubeFactory.Scheduling().V1beta1().PodGroups().Lister()
}

// errNotSynced is returned while a mode's cache is filling; the sync is retried.
var errNotSynced = errors.New("the cache of gang objects is not filled yet")

func (m *Manager) dynamicLister(gvr schema.GroupVersionResource) (cache.GenericLister, error) {
	inf := m.dynamicFactory.ForResource(gvr)
	if !inf.Informer().HasSynced() {
		return nil, errNotSynced
	}
	return inf.Lister(), nil
}

// serves says whether the API server serves mode, asking it again (at most
// once a period) when it did not: a scheduler installed after the
// GlobalManager started is found without a restart.
func (m *Manager) serves(mode Mode) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.served[mode] {
		return true
	}
	if m.clock.Since(m.asked) < m.period {
		return false
	}
	m.asked = m.clock.Now()
	served, err := Discover(m.discovery)
	if err != nil {
		return false
	}
	m.served = served
	// Every mode now served, not only the one asked for: the next job may
	// ask for another, and serves answers from m.served without activating.
	m.activateServed()
	return served[mode]
}

// Plan is the gang of owner, a job of ownerKind, in this sync. minOK says
// whether the kind lets the job's annotation set a smaller minimum.
func (m *Manager) Plan(owner common.Owner, ownerKind schema.GroupVersionKind, minOK bool) *Plan {
	if m == nil {
		// A controller built without gangs (unit tests).
		return &Plan{Mode: None, Name: GroupName(owner, ownerKind), owner: owner, ownerKind: ownerKind, why: "gang scheduling is not set up", noneReason: ReasonGangSchedulingOff}
	}
	p := &Plan{m: m, owner: owner, ownerKind: ownerKind, Name: GroupName(owner, ownerKind), Mode: m.def}
	ann := owner.GetAnnotations()
	if _, set := owner.GetLabels()[LabelKueueQueue]; set {
		p.queue = owner.GetLabels()[LabelKueueQueue]
	}
	problem := func(reason, format string, args ...any) *Plan {
		p.Mode = None
		p.Problem = &Status{Reason: reason, Message: fmt.Sprintf(format, args...)}
		return p
	}
	// An annotation auto is the cluster's mode: as without the annotation,
	// and said so (not as if the annotation were none).
	if s, set := ann[AnnotationScheduler]; set && s != string(Auto) {
		mode, err := ParseMode(s)
		if err != nil {
			return problem(ReasonInvalidGangAnnotation, "annotation %s: %v; the job's pods wait for an edit", AnnotationScheduler, err)
		}
		if mode != None && !m.serves(mode) {
			return problem(ReasonGangSchedulerUnavailable, "annotation %s asks for %s, but the API server does not serve %s; the job's pods wait until it does (or the annotation changes)",
				AnnotationScheduler, mode, API(mode))
		}
		p.Mode = mode
		if mode == None {
			p.why, p.noneReason = fmt.Sprintf("annotation %s=none: pods are placed one by one", AnnotationScheduler), ReasonGangSchedulingOff
		}
	} else if p.Mode == None {
		if m.flag == None {
			p.why, p.noneReason = "--gang-scheduler=none: pods are placed one by one", ReasonGangSchedulingOff
		} else {
			p.why, p.noneReason = "the cluster serves no gang scheduling API ("+API(Kubernetes)+", Volcano's or coscheduling's PodGroups): pods are placed one by one", ReasonNoGangScheduler
		}
	}
	if s, set := ann[AnnotationMinMember]; set && minOK {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 1 {
			return problem(ReasonInvalidGangAnnotation, "annotation %s: %q is not a whole number of at least 1; the job's pods wait for an edit", AnnotationMinMember, s)
		}
		p.min = int32(n)
	}
	if s, set := ann[AnnotationScheduleTimeout]; set {
		if n, err := strconv.ParseInt(s, 10, 32); err != nil || n < 1 {
			return problem(ReasonInvalidGangAnnotation, "annotation %s: %q is not a whole number of seconds of at least 1; the job's pods wait for an edit", AnnotationScheduleTimeout, s)
		}
	}
	return p
}

// groupSays is what the scheduler wrote on a group object of mode while it
// waits: the PodGroup's condition saying why it is not scheduled.
func (m *Manager) groupSays(mode Mode, namespace, name string) string {
	switch mode {
	case Kubernetes:
		pg, err := m.podGroups().PodGroups(namespace).Get(name)
		if err != nil {
			return ""
		}
		for _, c := range pg.Status.Conditions {
			if c.Type == schedulingv1beta1.PodGroupInitiallyScheduled && c.Status == metav1.ConditionFalse && c.Message != "" {
				return c.Message
			}
		}
	case Volcano:
		lister, err := m.dynamicLister(volcanoPodGroupsResource)
		if err != nil {
			return ""
		}
		obj, err := lister.ByNamespace(namespace).Get(name)
		u, ok := obj.(*unstructured.Unstructured)
		if err != nil || !ok {
			return ""
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Unschedulable" && cm["status"] == "True" {
				if msg, _ := cm["message"].(string); msg != "" {
					return msg
				}
			}
		}
	}
	return ""
}

// context is Start's context, or a background one before Start.
func (m *Manager) context() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx != nil {
		return m.ctx
	}
	return context.Background()
}
