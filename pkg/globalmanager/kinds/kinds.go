// Package kinds is the GlobalManager's one table of the kinds it serves.
//
// Each kind's package registers, once, in its init function, what the rest
// of the GlobalManager needs of it (a Kind): its informer, its controller
// and that controller's flags, how it travels to edge nodes, whether the
// children Sedna's GlobalManager left for it are adopted, whether it names
// Models, and whether the API server must serve it. The GlobalManager's
// command, the edge hub, the Model controller and the preflight iterate the
// table; none of them names a kind. Adding a kind is a new package and one
// line in package all, which imports every kind's package, as Kueue's job
// integrations register themselves.
package kinds

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

// Kind is what the GlobalManager needs of one kind it serves.
type Kind struct {
	// GVK is the kind's API group, version and kind; Resource its plural.
	GVK      schema.GroupVersionKind
	Resource string
	// Informer is the kind's shared informer in the GlobalManager's factory.
	Informer func(nereidinformers.SharedInformerFactory) cache.SharedIndexInformer
	// Optional kinds run only where the API server serves them; the others
	// are Nereid's own CRDs, which must be installed. (DIJob: a cluster
	// switched from Sedna in place may have only sedna.io's CRDs.)
	Optional bool
	// Controller runs the kind's objects; nil for a kind that only travels
	// (Dataset: its status is the edge nodes' reports).
	Controller *Controller
	// Edge is set for the kinds the edge hub sends to edge nodes.
	Edge *Edge
	// AdoptsSednaChildren: with --adopt-sedna-workers, the children Sedna's
	// GlobalManager left for objects of this kind are adopted and replaced.
	AdoptsSednaChildren bool
	// ModelNames and DatasetNames are the Models and the Datasets one of the
	// kind's objects names (in its namespace); nil for a kind that names
	// none. The Model and Dataset protections index the kind's informer by
	// them (common.IndexByModel, common.IndexByDataset), as the kind's own
	// controller does: both must mean the same names.
	ModelNames, DatasetNames func(obj any) []string
	// ListPage lists a page of the kind's objects in a namespace from the
	// API server, and the token of the next page, for the protections to
	// be sure no object names a Model or Dataset their caches do not show;
	// set when ModelNames or DatasetNames is.
	ListPage func(ctx context.Context, client nereidclient.Interface, namespace string, opts metav1.ListOptions) ([]metav1.Object, string, error)
	// Progress reads, from one of the kind's objects in the informer's
	// cache, what the per-job gauges export of it (package jobmetrics); nil
	// for a kind that is no job (Dataset, Model).
	Progress func(obj any) Progress
}

// Progress is what a job's status says of how far it is, as the per-job
// gauges export it. Each field is empty where the kind's status does not
// record it.
type Progress struct {
	// Phase is the job's status.phase (federated learning jobs, DIJobs).
	Phase string
	// Stage and State are a learning cycle's current stage and its state.
	Stage, State string
	// Round is a learning cycle's round, or a federated learning job's
	// (its fastest node's); HasRound says the kind has one.
	Round    int32
	HasRound bool
	// Metrics are the latest metric values the status records, as reported
	// (values that are no number are not exported).
	Metrics []sednav1.Metric
}

// Controller is a kind's controller: how it is built, its flags, and how
// many objects it syncs at once.
type Controller struct {
	// Workers is how many objects are synced in parallel by default; the
	// flag --<kind>-workers (the kind in lower case) sets it.
	Workers int
	// AddFlags adds the controller's own flags; Validate checks them after
	// parsing. Either may be nil.
	AddFlags func(fs *flag.FlagSet)
	Validate func() error
	// New builds the controller from the GlobalManager's dependencies; it
	// starts nothing.
	New func(ctx context.Context, d Deps) (Runner, error)

	// workers is the value of --<kind>-workers.
	workers int
}

// Runner is a built controller. Run syncs with workers goroutines until ctx
// is done. A Runner may also be what the edge hub hands the kind's worker
// reports to (reports.ReportApplier, in edgehub/reports), and may serve more than its queue
// (DIJob's replicas API) until ctx is done.
type Runner interface {
	Run(ctx context.Context, workers int) error
}

// Edge is how the edge hub sends a kind to edge nodes.
type Edge struct {
	// Order sends objects of lower order first: Datasets and Models before
	// the jobs that name them.
	Order int
	// SendStatus is set for the kinds whose status the LocalController
	// reads (the learning cycles: their stage and round); other kinds are
	// sent without status.
	SendStatus bool
	// Workers is set for the kinds whose worker pods report through the
	// LocalController; the hub sends each node the names of the object's
	// pods on it, and accepts reports only from those.
	Workers bool
	// WorkersNeedLocalController is set for the kinds every one of whose
	// workers needs a LocalController on its node, cloud nodes included
	// (a learning cycle's stage reports its end through it, and its deploy
	// is the LocalController's copy); other kinds' workers on a node
	// LocalControllers do not serve (a federated aggregator in the cloud)
	// report nothing and need none.
	WorkersNeedLocalController bool
	// OwnReports is set for the kinds whose LocalControllers report under
	// their own name (a learning cycle's round data ready, a model
	// deployed).
	OwnReports bool
	// UpdateStatus writes an object's status: the hub's EdgeSynced and
	// EdgeLinked conditions. The object's type has the method
	// MetaConditions() *[]metav1.Condition or
	// ConditionList() *[]sednav1.JobCondition.
	UpdateStatus func(ctx context.Context, client nereidclient.Interface, obj metav1.Object) error
	// Applier, when set, is what the hub hands the LocalControllers' own
	// reports about objects of this kind to (a Dataset's sample count).
	Applier func(d Deps) any
}

// Deps are what every kind's controller is built from.
type Deps struct {
	Kube   kubernetes.Interface
	Client nereidclient.Interface
	// KubeInformers caches the children of Nereid's objects (every one
	// carries the owner-uid label); Informers caches Nereid's kinds.
	KubeInformers kubeinformers.SharedInformerFactory
	Informers     nereidinformers.SharedInformerFactory
	Recorder      record.EventRecorder
	Metrics       *common.Metrics
	// Gangs hands multi-pod jobs to the cluster's gang scheduler; Admission
	// admits jobs whole under the namespace's ResourceQuotas.
	Gangs     *gang.Manager
	Admission *admission.Manager
	// Worker is what every worker is told of its LocalController and data.
	Worker Worker
	// ChildEventBatchPeriod is how long events of an object's children are
	// gathered into one sync.
	ChildEventBatchPeriod time.Duration
	// EdgeNamespace holds the GlobalManager's own objects (the edge links'
	// Leases, Secrets); Owner is what owns what it makes there.
	EdgeNamespace string
	Owner         func() *metav1.OwnerReference
	// Kinds are the kinds served, for a controller that watches others
	// (the Model protection watches those that name Models).
	Kinds []*Kind
	// Registerer takes the metrics a kind adds of its own.
	Registerer prometheus.Registerer
	// Clock is the controllers' time (conditions' transition times, the
	// time a report is applied at); nil is the real clock.
	Clock clock.PassiveClock
}

// ClockOrReal is d.Clock, the real clock when it is nil.
func (d Deps) ClockOrReal() clock.PassiveClock {
	if d.Clock == nil {
		return clock.RealClock{}
	}
	return d.Clock
}

// Worker is what every worker is told of its LocalController and its data.
type Worker struct {
	// LocalController is how workers reach their node's LocalController
	// (LC_SERVER).
	LocalController common.LCAddress
	// LogLevel is the workers' LOG_LEVEL.
	LogLevel string
	// DataPathPrefix is where node paths appear inside workers
	// (DATA_PATH_PREFIX).
	DataPathPrefix string
}

var (
	mu       sync.Mutex
	registry []*Kind
)

// Register adds k to the table; a kind registered twice is a programming
// error and panics.
func Register(k *Kind) {
	mu.Lock()
	defer mu.Unlock()
	for _, r := range registry {
		if r.GVK.GroupKind() == k.GVK.GroupKind() {
			panic(fmt.Sprintf("kinds: %s registered twice", k.GVK.GroupKind()))
		}
	}
	registry = append(registry, k)
}

// All is the table: every kind registered, by group and kind.
func All() []*Kind {
	mu.Lock()
	defer mu.Unlock()
	out := slices.Clone(registry)
	slices.SortFunc(out, func(a, b *Kind) int {
		return strings.Compare(a.GVK.Group+"/"+a.GVK.Kind, b.GVK.Group+"/"+b.GVK.Kind)
	})
	return out
}

// WorkersFlag is the flag that sets how many objects of k are synced at once.
func (k *Kind) WorkersFlag() string { return strings.ToLower(k.GVK.Kind) + "-workers" }

// AddFlags adds the flags of every kind of table that has a controller.
func AddFlags(fs *flag.FlagSet, table []*Kind) {
	for _, k := range table {
		c := k.Controller
		if c == nil {
			continue
		}
		fs.IntVar(&c.workers, k.WorkersFlag(), c.Workers, fmt.Sprintf("%ss synced in parallel.", k.GVK.Kind))
		if c.AddFlags != nil {
			c.AddFlags(fs)
		}
	}
}

// Validate checks the flags of every kind of table.
func Validate(table []*Kind) []error {
	var errs []error
	for _, k := range table {
		c := k.Controller
		if c == nil {
			continue
		}
		if c.workers < 1 {
			errs = append(errs, fmt.Errorf("--%s %d: want at least 1", k.WorkersFlag(), c.workers))
		}
		if c.Validate != nil {
			if err := c.Validate(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// WorkersOf is how many objects of k are synced at once: its flag's value,
// or its default when the flags were never added (a test).
func (k *Kind) WorkersOf() int {
	if k.Controller.workers > 0 {
		return k.Controller.workers
	}
	return k.Controller.Workers
}

// Served splits table into the kinds to run and the optional ones the API
// server does not serve (their CRD not installed).
func Served(disco discovery.DiscoveryInterface, table []*Kind) (run, unserved []*Kind, err error) {
	resources := map[schema.GroupVersion]map[string]bool{}
	for _, k := range table {
		if !k.Optional {
			run = append(run, k)
			continue
		}
		gv := k.GVK.GroupVersion()
		if _, ok := resources[gv]; !ok {
			list, err := disco.ServerResourcesForGroupVersion(gv.String())
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, nil, fmt.Errorf("discovering %s: %w", gv, err)
			}
			resources[gv] = map[string]bool{}
			if list != nil {
				for _, r := range list.APIResources {
					resources[gv][r.Name] = true
				}
			}
		}
		if resources[gv][k.Resource] {
			run = append(run, k)
		} else {
			unserved = append(unserved, k)
		}
	}
	return run, unserved, nil
}

// Objects are pointers to each of items, as metav1.Objects.
func Objects[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

// StatusWriter is a kind's typed client in one namespace, as it writes
// status.
type StatusWriter[T any] interface {
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// WriteStatusWith is an Edge.UpdateStatus that writes through the kind's
// typed client, client.
func WriteStatusWith[T metav1.Object](client func(c nereidclient.Interface, namespace string) StatusWriter[T]) func(context.Context, nereidclient.Interface, metav1.Object) error {
	return func(ctx context.Context, c nereidclient.Interface, obj metav1.Object) error {
		_, err := client(c, obj.GetNamespace()).UpdateStatus(ctx, obj.(T), metav1.UpdateOptions{})
		return err
	}
}

// ListPagesWith is a ListPage that lists through the kind's typed
// list call, list, and reads each page's objects with items.
func ListPagesWith[L interface{ GetContinue() string }](list func(c nereidclient.Interface, namespace string) func(context.Context, metav1.ListOptions) (L, error),
	items func(L) []metav1.Object) func(context.Context, nereidclient.Interface, string, metav1.ListOptions) ([]metav1.Object, string, error) {
	return func(ctx context.Context, c nereidclient.Interface, namespace string, opts metav1.ListOptions) ([]metav1.Object, string, error) {
		l, err := list(c, namespace)(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return items(l), l.GetContinue(), nil
	}
}
