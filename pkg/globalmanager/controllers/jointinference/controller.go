// Package jointinference is the JointInferenceService controller: an edge
// worker Deployment serving the small model, a cloud worker Deployment serving
// the big one behind a Service the edge worker calls, an autoscaler for each
// worker that asks for one, status from the Deployments' real state, and a
// Scheduled condition that names a worker pod that cannot be placed.
package jointinference

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednalisters "github.com/nereid-ml/nereid/pkg/client/listers/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Name is the controller's name in logs, metrics and the queue.
const Name = "jointinferenceservice"

// serviceKind is the kind of the services this controller owns children for.
var serviceKind = sednav1.JointInferenceServiceKind

// Defaults of Config, as Sedna's.
const (
	// DefaultCloudPort is the cloud worker's port (BIG_MODEL_BIND_PORT).
	DefaultCloudPort int32 = 5000
	// DefaultLCPeriod is how often, in seconds, edge workers report (LC_PERIOD).
	DefaultLCPeriod int32 = 30
)

// Config is what is set for every joint inference service, beside what
// every kind shares (kinds.Deps).
type Config struct {
	// CloudPort is the port the cloud worker listens on and its Service
	// serves (BIG_MODEL_BIND_PORT, BIG_MODEL_PORT); 0 means DefaultCloudPort.
	CloudPort int32
	// LCPeriod is how often, in seconds, edge workers report to their
	// LocalController (LC_PERIOD); 0 means DefaultLCPeriod.
	LCPeriod int32
}

// Controller reconciles JointInferenceServices.
type Controller struct {
	jiIndexer cache.Indexer
	models    sednalisters.ModelLister
	synced    []cache.InformerSynced
	syncer    *common.Syncer[*sednav1.JointInferenceService]
	reports   *edgestatus.EdgeReports[*sednav1.JointInferenceService]
	// workers finds a service's worker pods (placement.go).
	workers workerPods

	queue   workqueue.TypedRateLimitingInterface[string]
	metrics *common.Metrics
	deps    kinds.Deps
	config  Config

	// Test seams.
	children *common.Children
	clock    clock.PassiveClock
}

// NewController wires the controller to its informers; it starts nothing.
// A Deps' Admission admits a service's Deployments (their pods and their
// count) against the namespace's ResourceQuotas before they are made.
func NewController(_ context.Context, d kinds.Deps, config Config) (*Controller, error) {
	kubeClient, sednaClient, recorder, metrics := d.Kube, d.Client, d.Recorder, d.Metrics
	jiInformer, modelInformer := d.Informers.Sedna().V1alpha1().JointInferenceServices(), d.Informers.Sedna().V1alpha1().Models()
	deploymentInformer, serviceInformer := d.KubeInformers.Apps().V1().Deployments(), d.KubeInformers.Core().V1().Services()
	hpaInformer := d.KubeInformers.Autoscaling().V2().HorizontalPodAutoscalers()
	if config.CloudPort == 0 {
		config.CloudPort = DefaultCloudPort
	}
	if config.LCPeriod == 0 {
		config.LCPeriod = DefaultLCPeriod
	}
	if config.CloudPort < 1 || config.CloudPort > 65535 {
		return nil, fmt.Errorf("cloud worker port %d is not a port", config.CloudPort)
	}
	if config.LCPeriod < 0 {
		return nil, fmt.Errorf("report period %ds is negative", config.LCPeriod)
	}
	c := &Controller{
		jiIndexer: jiInformer.Informer().GetIndexer(),
		models:    modelInformer.Lister(),
		queue:     common.NewQueue(Name),
		metrics:   metrics,
		deps:      d,
		config:    config,
		// Deployments, Services and autoscalers have deterministic names, so
		// they need no expectations: a repeated create meets AlreadyExists.
		children: &common.Children{Client: kubeClient, Recorder: recorder, Metrics: metrics, Controller: Name},
		clock:    d.ClockOrReal(),
	}
	children, err := common.IndexChildren(serviceInformer.Informer(), deploymentInformer.Informer(), hpaInformer.Informer())
	if err != nil {
		return nil, err
	}
	jis := jiInformer.Lister()
	c.syncer = &common.Syncer[*sednav1.JointInferenceService]{
		LogName: "jointinferenceservice",
		Get: func(ns, name string) (*sednav1.JointInferenceService, error) {
			return jis.JointInferenceServices(ns).Get(name)
		},
		Client: func(ns string) common.StatusClient[*sednav1.JointInferenceService] {
			return sednaClient.SednaV1alpha1().JointInferenceServices(ns)
		},
		Status:      func(ji *sednav1.JointInferenceService) any { return &ji.Status },
		Recorder:    recorder,
		Services:    children[0],
		Deployments: children[1],
		HPAs:        children[2],
		Forget:      func(key string) { d.Admission.Forget(serviceKind, key) },
		Lifecycle:   lifecycle(),
		Children:    c.children,
		Clock:       c.clock,
		After:       c.queue.AddAfter,
	}
	c.reports = edgestatus.For(c.syncer, Name,
		func(ji *sednav1.JointInferenceService) *[]sednav1.EdgeNodeStatus { return &ji.Status.EdgeNodes },
		c.clock, metrics)
	if err := common.IndexByModel(jiInformer.Informer()); err != nil {
		return nil, err
	}
	pods, err := c.workers.watch(d, jiInformer.Informer(), children[1], common.Batched(c.queue, d.ChildEventBatchPeriod))
	if err != nil {
		return nil, err
	}
	if c.synced, err = common.AddHandlers(append(pods,
		common.Handler{Informer: jiInformer.Informer(), Handler: common.OwnerHandler(c.queue.Add)},
		common.Handler{Informer: deploymentInformer.Informer(), Handler: common.ChildHandler(serviceKind, c.queue.Add)},
		common.Handler{Informer: serviceInformer.Informer(), Handler: common.ChildHandler(serviceKind, c.queue.Add)},
		common.Handler{Informer: hpaInformer.Informer(), Handler: common.ChildHandler(serviceKind, c.queue.Add)},
		common.Handler{Informer: modelInformer.Informer(), Handler: common.ReferenceHandler(c.jiIndexer, common.ByModel, c.queue.Add)},
	)...); err != nil {
		return nil, err
	}
	c.synced = append(c.synced, d.Admission.Watch(serviceKind, c.queue.Add))
	return c, nil
}

// Run processes services with workers goroutines until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	return common.Run(ctx, Name, c.queue, workers, c.sync, c.metrics, c.synced...)
}
