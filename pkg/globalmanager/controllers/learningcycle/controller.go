package learningcycle

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednalisters "github.com/nereid-ml/nereid/pkg/client/listers/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Defaults of Config.
const (
	DefaultStageAttempts = 3
	DefaultHistoryLimit  = 10
	DefaultReportGrace   = 30 * time.Second
)

// Config is what the GlobalManager's flags set for every learning-cycle
// job, beside what every kind shares (kinds.Deps).
type Config struct {
	// StageAttempts is how many tries a stage gets before the job fails
	// (DefaultStageAttempts when 0).
	StageAttempts int32
	// HistoryLimit is how many finished rounds status.history keeps
	// (DefaultHistoryLimit when 0).
	HistoryLimit int
	// ReportGrace is how long a stage pod that ended without its worker's
	// report waits for it, while the job's edge link is up
	// (DefaultReportGrace when 0; see reportGraceLeft).
	ReportGrace time.Duration
}

// Controller reconciles the jobs of one learning-cycle kind: it runs the
// cycle's workers and moves the cycle on their pods' phases (Sync) and on the
// reports the edge forwards (ApplyReport). Kind holds the kind's decisions.
type Controller[J Job[J]] struct {
	name       string
	gvk        schema.GroupVersionKind
	resource   schema.GroupResource
	kind       Kind[J]
	jobIndexer cache.Indexer
	models     sednalisters.ModelLister
	datasets   sednalisters.DatasetLister
	synced     []cache.InformerSynced
	syncer     *common.Syncer[J]
	reports    *edgestatus.EdgeReports[J]

	queue   workqueue.TypedRateLimitingInterface[string]
	metrics *common.Metrics
	deps    kinds.Deps
	config  Config

	children *common.Children
	// clock is the controller's time: Deps.Clock.
	clock clock.PassiveClock
}

// New wires a controller of the jobs of kind gvk (named name in logs,
// metrics and the queue), whose informer is jobs, to its informers; it
// starts nothing. A Deps' Admission admits each stage's pod against the
// namespace's ResourceQuotas before it is made.
func New[J Job[J]](name string, gvk schema.GroupVersionKind, kind Kind[J], d kinds.Deps, jobs cache.SharedIndexInformer, config Config) (*Controller[J], error) {
	recorder, metrics := d.Recorder, d.Metrics
	models, datasets := d.Informers.Sedna().V1alpha1().Models(), d.Informers.Sedna().V1alpha1().Datasets()
	pods := d.KubeInformers.Core().V1().Pods()
	if config.StageAttempts <= 0 {
		config.StageAttempts = DefaultStageAttempts
	}
	if config.HistoryLimit <= 0 {
		config.HistoryLimit = DefaultHistoryLimit
	}
	if config.ReportGrace <= 0 {
		config.ReportGrace = DefaultReportGrace
	}
	exp := common.NewExpectations()
	c := &Controller[J]{
		name:       name,
		gvk:        gvk,
		resource:   sednav1.Resource(strings.ToLower(gvk.Kind) + "s"),
		kind:       kind,
		jobIndexer: jobs.GetIndexer(),
		models:     models.Lister(),
		datasets:   datasets.Lister(),
		queue:      common.NewQueue(name),
		metrics:    metrics,
		deps:       d,
		config:     config,
		children:   &common.Children{Client: d.Kube, Recorder: recorder, Expectations: exp, Metrics: metrics, Controller: name},
		clock:      d.ClockOrReal(),
	}
	children, err := common.IndexChildren(pods.Informer())
	if err != nil {
		return nil, err
	}
	c.syncer = &common.Syncer[J]{
		LogName: "job",
		Get:     c.get,
		Client:  kind.Client,
		// What a sync changes are the fields the cycle drives.
		Status:       func(job J) any { return kind.Fields(job) },
		Recorder:     recorder,
		Expectations: exp,
		Pods:         children[0],
		Forget:       func(key string) { d.Admission.Forget(gvk, key) },
		Lifecycle:    c.lifecycle(),
		Children:     c.children,
		Clock:        c.clock,
		After:        c.queue.AddAfter,
	}
	c.reports = edgestatus.For(c.syncer, name,
		func(job J) *[]sednav1.EdgeNodeStatus { return &kind.Fields(job).Cycle.EdgeNodes },
		c.clock, metrics)
	if err := common.IndexByModel(jobs); err != nil {
		return nil, err
	}
	if err := common.IndexByDataset(jobs, DatasetNames); err != nil {
		return nil, err
	}
	batched := common.Batched(c.queue, d.ChildEventBatchPeriod)
	if c.synced, err = common.AddHandlers(
		common.Handler{Informer: jobs, Handler: common.OwnerHandler(c.queue.Add)},
		common.Handler{Informer: pods.Informer(), Handler: common.PodHandler(gvk, exp, batched)},
		common.Handler{Informer: models.Informer(), Handler: common.ReferenceHandler(c.jobIndexer, common.ByModel, c.queue.Add)},
		common.Handler{Informer: datasets.Informer(), Handler: common.ReferenceHandler(c.jobIndexer, common.ByDataset, c.queue.Add)},
	); err != nil {
		return nil, err
	}
	c.synced = append(c.synced, d.Admission.Watch(gvk, c.queue.Add))
	return c, nil
}

// get reads a job from the informer's cache, as a lister would.
func (c *Controller[J]) get(namespace, name string) (J, error) {
	var job J
	obj, exists, err := c.jobIndexer.GetByKey(namespace + "/" + name)
	if err != nil {
		return job, err
	}
	if !exists {
		return job, apierrors.NewNotFound(c.resource, name)
	}
	job, ok := obj.(J)
	if !ok {
		return job, fmt.Errorf("cached %s %s/%s is a %T", c.name, namespace, name, obj)
	}
	return job, nil
}

// Run processes jobs with workers goroutines until ctx is done.
func (c *Controller[J]) Run(ctx context.Context, workers int) error {
	return common.Run(ctx, c.name, c.queue, workers, c.Sync, c.metrics, c.synced...)
}

// DatasetNames is the Dataset a learning-cycle job names, for
// common.IndexByDataset and the Dataset protection.
func DatasetNames(obj any) []string {
	if job, ok := obj.(interface{ DatasetNames() []string }); ok {
		return job.DatasetNames()
	}
	return nil
}
