// Package manager runs the GlobalManager's parts, once it leads: the
// informers, one controller per kind of the table (package kinds), the
// gang and quota managers they share, and the edge hub. One part failing
// stops the others, and Start returns why.
package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/jobmetrics"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	"github.com/nereid-ml/nereid/pkg/globalmanager/owner"
)

// Clients are the API clients the GlobalManager acts with.
type Clients struct {
	Kube    kubernetes.Interface
	Nereid  nereidclient.Interface
	Dynamic dynamic.Interface
}

// Config is what the GlobalManager's flags set for all of it.
type Config struct {
	// Namespace limits the GlobalManager to one namespace; "" is every one.
	Namespace string
	// Worker, ChildEventBatchPeriod, EdgeNamespace and Owner go to every
	// kind (kinds.Deps).
	Worker                kinds.Worker
	ChildEventBatchPeriod time.Duration
	EdgeNamespace         string
	Owner                 owner.Owner
	// GangScheduler is where multi-pod jobs go to be placed together.
	GangScheduler gang.Mode
	// QuotaBackfill is how often a job that does not fit its namespace's
	// quotas lets later ones go ahead (admission).
	QuotaBackfill int
	// AdoptSednaWorkers adopts, before the caches fill, the children Sedna's
	// GlobalManager left, so the controllers replace them.
	AdoptSednaWorkers bool
	// MetricsMaxJobs is how many jobs the per-job gauges export at most
	// (jobmetrics).
	MetricsMaxJobs int
	// Hub configures the edge hub; an empty Hub.Address runs none.
	Hub edgehub.Config
}

// Start builds the informers and the controllers of the kinds of table the
// API server serves, and runs them until ctx is done or one of them fails.
// ready says "" once the controllers act (caches synced, the edge hub
// listening), else why not; "stopped" once Start returns.
func Start(ctx context.Context, cfg Config, c Clients, table []*kinds.Kind, metrics *common.Metrics, reg prometheus.Registerer, ready *atomic.Value) error {
	// One part failing (the hub's port taken, say) stops the others, the
	// informers included: a GlobalManager half running would hold the lease
	// and do half the job.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logger := klog.FromContext(ctx)
	// Only Nereid's children are cached: every one carries the owner-uid label.
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(c.Kube, 0,
		kubeinformers.WithNamespace(cfg.Namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = common.LabelOwnerUID }),
		kubeinformers.WithTransform(common.SlimChildren))
	factory := nereidinformers.NewSharedInformerFactoryWithOptions(c.Nereid, 0, nereidinformers.WithNamespace(cfg.Namespace),
		nereidinformers.WithTransform(common.DropManagedFields))
	recorder := common.NewEventRecorder(ctx, c.Kube)

	// Multi-pod jobs go to the gang scheduler the cluster serves.
	gangs, err := gang.NewManager(ctx, gang.Config{
		Mode: cfg.GangScheduler, Kube: c.Kube, Dynamic: c.Dynamic, Discovery: c.Kube.Discovery(), Namespace: cfg.Namespace,
	})
	if err != nil {
		return err
	}
	// Jobs are made whole or not at all under the namespace's quotas.
	admitter := admission.NewManager(admission.Config{Kube: c.Kube, Namespace: cfg.Namespace, BackfillLimit: cfg.QuotaBackfill})

	served, unserved, err := kinds.Served(c.Kube.Discovery(), table)
	if err != nil {
		return err
	}
	for _, k := range unserved {
		logger.Info("The API server does not serve this kind: no controller for it; install its CRD and restart to run it", "kind", k.GVK.Kind, "group", k.GVK.GroupVersion().String())
	}
	d := kinds.Deps{
		Kube: c.Kube, Client: c.Nereid, KubeInformers: kubeFactory, Informers: factory, Recorder: recorder, Metrics: metrics,
		Gangs: gangs, Admission: admitter, Worker: cfg.Worker, ChildEventBatchPeriod: cfg.ChildEventBatchPeriod,
		EdgeNamespace: cfg.EdgeNamespace, Owner: cfg.Owner, Kinds: served, Registerer: reg,
	}
	runners, err := build(ctx, served, d)
	if err != nil {
		return err
	}
	if reg != nil {
		// Read from the caches at each scrape, and only while this replica
		// leads: a standby's gauges would be of caches it does not fill.
		jobs := jobmetrics.New(jobmetrics.Sources(served, func(k *kinds.Kind) func() []any {
			return k.Informer(factory).GetStore().List
		}), cmp.Or(cfg.MetricsMaxJobs, jobmetrics.DefaultMaxJobs))
		if err := reg.Register(jobs); err != nil {
			return fmt.Errorf("registering the per-job gauges: %w", err)
		}
		defer reg.Unregister(jobs)
	}

	// The edge hub adds indexes to the informers, so it is built before they start.
	var hub *edgehub.Hub
	if cfg.Hub.Address != "" {
		appliers, err := appliersOf(served, runners, d)
		if err != nil {
			return err
		}
		hub, err = edgehub.New(ctx, edgehub.Deps{Kube: c.Kube, Client: c.Nereid, Informers: factory, Kinds: served, Workers: edgehub.WorkerCachesOf(kubeFactory),
			Appliers: appliers, Recorder: recorder, Registerer: reg, Config: cfg.Hub})
		if err != nil {
			return fmt.Errorf("building the edge hub: %w", err)
		}
	}

	// With --adopt-sedna-workers, the children a Sedna GlobalManager left get
	// Nereid's labels before the caches fill, so the controllers see them and
	// replace them rather than make a second set of workers beside them.
	if cfg.AdoptSednaWorkers {
		if err := adoptSednaChildren(ctx, c.Kube, cfg.Namespace, served); err != nil {
			return err
		}
	}

	kubeFactory.Start(ctx.Done())
	factory.Start(ctx.Done())
	gangs.Start(ctx)
	defer gangs.Shutdown()
	admitter.Start(ctx)
	defer kubeFactory.Shutdown()
	defer factory.Shutdown()
	go markReady(ctx, ready, hub, kubeFactory, factory)

	var runs []func() error
	for _, k := range served {
		if r := runners[k]; r != nil {
			runs = append(runs, func() error { return r.Run(ctx, k.WorkersOf()) })
		}
	}
	if hub != nil {
		runs = append(runs, func() error { return hub.Run(ctx) })
	}
	err = runAll(cancel, runs)
	ready.Store("stopped")
	return err
}

// caches waiting to fill.
type caches interface {
	WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool
}

// markReady says in ready what the GlobalManager waits for until its
// caches are filled and its edge hub (when it runs one) listens, then "".
func markReady(ctx context.Context, ready *atomic.Value, hub *edgehub.Hub, factories ...caches) {
	ready.Store("waiting for caches to sync")
	for _, f := range factories {
		f.WaitForCacheSync(ctx.Done())
	}
	if hub != nil {
		ready.Store("waiting for the edge hub to listen")
		select {
		case <-hub.Listening():
		case <-ctx.Done():
		}
	}
	if ctx.Err() == nil {
		ready.Store("")
	}
}

// runAll runs each of runs in its own goroutine until all have returned;
// the first to fail cancels the others' context.
func runAll(cancel context.CancelFunc, runs []func() error) error {
	errs := make(chan error, len(runs))
	for _, r := range runs {
		go func() {
			err := r()
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var all []error
	for range runs {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// build builds the controller of every kind of table that has one.
func build(ctx context.Context, table []*kinds.Kind, d kinds.Deps) (map[*kinds.Kind]kinds.Runner, error) {
	runners := map[*kinds.Kind]kinds.Runner{}
	for _, k := range table {
		if k.Controller == nil {
			continue
		}
		r, err := k.Controller.New(ctx, d)
		if err != nil {
			return nil, fmt.Errorf("building the %s controller: %w", k.GVK.Kind, err)
		}
		runners[k] = r
	}
	return runners, nil
}

// appliersOf are what the edge hub hands reports to: the controllers of
// the kinds whose workers report, and the kinds' own appliers.
func appliersOf(table []*kinds.Kind, runners map[*kinds.Kind]kinds.Runner, d kinds.Deps) (reports.Appliers, error) {
	a := reports.Appliers{Workers: map[string]reports.ReportApplier{}}
	for _, k := range table {
		if k.Edge == nil {
			continue
		}
		if r, ok := runners[k].(reports.ReportApplier); ok && (k.Edge.Workers || k.Edge.OwnReports) {
			a.Workers[k.GVK.Kind] = r
		}
		if k.Edge.Applier == nil {
			continue
		}
		switch applier := k.Edge.Applier(d).(type) {
		case reports.DatasetApplier:
			a.Datasets = applier
		default:
			return a, fmt.Errorf("the edge applier of %s is a %T, which the edge hub cannot hand reports to", k.GVK.Kind, applier)
		}
	}
	return a, nil
}

// adoptSednaChildren labels the children Sedna's GlobalManager left for the
// kinds of table that adopt them, retrying while ctx lasts.
func adoptSednaChildren(ctx context.Context, kube kubernetes.Interface, namespace string, table []*kinds.Kind) error {
	var gvks []schema.GroupVersionKind
	for _, k := range table {
		if k.AdoptsSednaChildren {
			gvks = append(gvks, k.GVK)
		}
	}
	err := retry.OnError(retry.DefaultBackoff, func(error) bool { return ctx.Err() == nil }, func() error {
		n, failed, err := common.AdoptSednaChildren(ctx, kube, namespace, gvks)
		if n > 0 || failed > 0 {
			klog.FromContext(ctx).Info("Adopted the children of Sedna's GlobalManager; the controllers replace them", "count", n, "failed", failed)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("adopting the children of Sedna's GlobalManager: %w", err)
	}
	return nil
}
