// Package dijob is the DIJob controller: DI-engine's distributed
// reinforcement-learning jobs, each task a set of pod replicas that find one
// another by DNS through the job's headless Service; phases from their pods,
// restarts after a failed pod up to the job's backoff limit, and scaling that
// adds or removes exactly the replicas asked for. A job written as
// v1alpha1 (DI-orchestrator v0.2's, coordinator-driven) it runs as
// DI-orchestrator v0.2 did instead (syncV1).
//
// The rest of the DIJob feature is in this folder too: the allocator that
// places a job's replicas (allocator) and DI-orchestrator's replicas HTTP API
// that scales a job's tasks (replicasapi).
package dijob

import (
	"context"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	diclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	dilisters "github.com/nereid-ml/nereid/pkg/client/listers/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Name is the controller's name in logs, metrics and the queue.
const Name = "dijob"

// jobKind is the kind of the jobs this controller owns children for.
var jobKind = div2.DIJobKind

// Config is what the GlobalManager's flags set for every DIJob.
type Config struct {
	// ServerURL is the replicas HTTP API, as workers reach it (DI_SERVER_URL).
	ServerURL string
	// V1ServerURL is the v1 replicas server, host:port, as a v1alpha1
	// job's coordinator and aggregators reach it (KUBERNETES_SERVER_URL),
	// set by the GlobalManager's flag --di-v1-server-url; empty sets none.
	V1ServerURL string
	// ServerTokenAudience, when set, is the audience of a token of the
	// pod's ServiceAccount projected into every pod for the replicas API
	// (DI_SERVER_TOKEN_FILE).
	ServerTokenAudience string
	// ServerCA, when set, is the CA (PEM) of the replicas API's certificate,
	// put into every pod (DI_SERVER_CA_FILE).
	ServerCA []byte
	// ClusterDomain is the cluster's DNS domain, the tail of every replica's
	// name in DI_NODES.
	ClusterDomain string
	// Allocation places replicas with an allocator policy; nil leaves them
	// to the Kubernetes scheduler.
	Allocation *Allocation
	// Links says whether an edge node's link is down; nil holds no pod and
	// sets no EdgeLinked condition.
	Links LinkChecker
	// LinkLeases, when set, is the cache of the link Leases Links reads: a
	// link that goes down or comes back re-syncs the jobs with pods on its
	// node, so their EdgeLinked condition follows within seconds.
	// StartLinkLeases starts it (nil: it is started elsewhere): the
	// controller does when it first syncs a DIJob, so that a GlobalManager
	// that runs none does not decode every Lease renewal of the fleet.
	LinkLeases      cache.SharedIndexInformer
	StartLinkLeases func()
	// EdgeLinkGrace is how long a replica on an edge node whose link is
	// down is held as running, and how long its pod tolerates the node's
	// unreachable and not-ready taints before eviction.
	EdgeLinkGrace time.Duration
}

// Controller reconciles DIJobs.
type Controller struct {
	client diclient.Interface
	jobs   dilisters.DIJobLister
	synced []cache.InformerSynced
	syncer *common.Syncer[*div2.DIJob]
	// linkLeases is Config.LinkLeases, started by the first DIJob synced;
	// nil without.
	linkLeases *lazyCaches

	queue   workqueue.TypedRateLimitingInterface[string]
	metrics *common.Metrics
	deps    kinds.Deps
	config  Config

	// Test seams.
	children *common.Children
	clock    clock.PassiveClock // Deps.Clock
	placer   *placer
}

// NewController wires the controller to its informers; it starts nothing.
// What every kind shares comes from d: its Gangs hand each job's replicas to
// the cluster's gang scheduler, its Admission admits them whole against the
// namespace's ResourceQuotas.
func NewController(d kinds.Deps, config Config) (*Controller, error) {
	kubeClient, client, recorder, metrics := d.Kube, d.Client, d.Recorder, d.Metrics
	jobInformer := d.Informers.Diengine().V2alpha1().DIJobs()
	podInformer, serviceInformer := d.KubeInformers.Core().V1().Pods(), d.KubeInformers.Core().V1().Services()
	if config.ClusterDomain == "" {
		config.ClusterDomain = "cluster.local"
	}
	if config.EdgeLinkGrace <= 0 {
		config.EdgeLinkGrace = DefaultEdgeLinkGrace
	}
	exp := common.NewExpectations()
	c := &Controller{
		client:   client,
		jobs:     jobInformer.Lister(),
		queue:    common.NewQueue(Name),
		metrics:  metrics,
		deps:     d,
		config:   config,
		children: &common.Children{Client: kubeClient, Recorder: recorder, Expectations: exp, Metrics: metrics, Controller: Name},
		clock:    d.ClockOrReal(),
	}
	children, err := common.IndexChildren(podInformer.Informer(), serviceInformer.Informer())
	if err != nil {
		return nil, err
	}
	c.syncer = &common.Syncer[*div2.DIJob]{
		LogName: "dijob",
		Get: func(ns, name string) (*div2.DIJob, error) {
			return c.jobs.DIJobs(ns).Get(name)
		},
		Client: func(ns string) common.StatusClient[*div2.DIJob] {
			return c.client.DiengineV2alpha1().DIJobs(ns)
		},
		Status:       func(job *div2.DIJob) any { return &job.Status },
		Recorder:     recorder,
		Expectations: exp,
		Forget: func(key string) {
			c.placer.forget(key)
			d.Admission.Forget(jobKind, key)
		},
		Pods:     children[0],
		Services: children[1],
		Children: c.children,
		Clock:    c.clock,
		After:    c.queue.AddAfter,
	}
	c.syncer.Lifecycle = c.lifecycle()
	c.placer = newPlacer(config.Allocation, config.EdgeLinkGrace, c.clock)
	batched := common.Batched(c.queue, d.ChildEventBatchPeriod)
	if c.synced, err = common.AddHandlers(
		common.Handler{Informer: jobInformer.Informer(), Handler: common.OwnerHandler(c.queue.Add)},
		common.Handler{Informer: podInformer.Informer(), Handler: common.PodHandler(jobKind, exp, batched)},
		common.Handler{Informer: serviceInformer.Informer(), Handler: common.ChildHandler(jobKind, batched)},
	); err != nil {
		return nil, err
	}
	c.synced = append(c.synced, d.Gangs.Watch(jobKind, batched), d.Admission.Watch(jobKind, c.queue.Add))
	if config.LinkLeases != nil {
		synced, err := c.watchLinks(config.LinkLeases, podInformer.Informer())
		if err != nil {
			return nil, err
		}
		c.linkLeases = newLazyCaches("the cache of the edge nodes' link Leases, which say whether a replica's node is linked",
			config.StartLinkLeases, synced)
	}
	return c, nil
}

// Run processes jobs with workers goroutines until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if c.placer != nil && c.placer.Period > 0 {
		go func() {
			if cache.WaitForCacheSync(ctx.Done(), c.synced...) {
				c.optimizeLoop(ctx)
			}
		}()
	}
	return common.Run(ctx, Name, c.queue, workers, c.sync, c.metrics, c.synced...)
}
