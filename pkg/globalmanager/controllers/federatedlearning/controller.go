// Package federatedlearning is the FederatedLearningJob controller: one
// aggregation worker and its Service in the cloud, one training worker per
// dataset on the edge, phases from their pods.
package federatedlearning

import (
	"context"

	corev1 "k8s.io/api/core/v1"
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
const Name = "federatedlearningjob"

// jobKind is the kind of the jobs this controller owns children for.
var jobKind = sednav1.FederatedLearningJobKind

// Config is what the GlobalManager's flags set for every federated job,
// beside what every kind shares (kinds.Deps).
type Config struct {
	// AggregationPort is the port the aggregation worker listens on (AGG_BIND_PORT).
	AggregationPort int32
}

// Controller reconciles FederatedLearningJobs.
type Controller struct {
	jobIndexer cache.Indexer
	models     sednalisters.ModelLister
	datasets   sednalisters.DatasetLister
	synced     []cache.InformerSynced
	syncer     *common.Syncer[*sednav1.FederatedLearningJob]
	reports    *edgestatus.EdgeReports[*sednav1.FederatedLearningJob]

	queue   workqueue.TypedRateLimitingInterface[string]
	metrics *common.Metrics
	deps    kinds.Deps
	config  Config

	// Test seams.
	children *common.Children
	exp      *common.Expectations
	clock    clock.PassiveClock
}

// NewController wires the controller to its informers; it starts nothing.
func NewController(_ context.Context, d kinds.Deps, config Config) (*Controller, error) {
	kubeClient, sednaClient, recorder, metrics := d.Kube, d.Client, d.Recorder, d.Metrics
	jobInformer := d.Informers.Sedna().V1alpha1().FederatedLearningJobs()
	modelInformer, datasetInformer := d.Informers.Sedna().V1alpha1().Models(), d.Informers.Sedna().V1alpha1().Datasets()
	podInformer, serviceInformer := d.KubeInformers.Core().V1().Pods(), d.KubeInformers.Core().V1().Services()
	exp := common.NewExpectations()
	c := &Controller{
		jobIndexer: jobInformer.Informer().GetIndexer(),
		models:     modelInformer.Lister(),
		datasets:   datasetInformer.Lister(),
		queue:      common.NewQueue(Name),
		metrics:    metrics,
		deps:       d,
		config:     config,
		exp:        exp,
		children:   &common.Children{Client: kubeClient, Recorder: recorder, Expectations: exp, Metrics: metrics, Controller: Name},
		clock:      d.ClockOrReal(),
	}
	children, err := common.IndexChildren(podInformer.Informer(), serviceInformer.Informer())
	if err != nil {
		return nil, err
	}
	jobs := jobInformer.Lister()
	c.syncer = &common.Syncer[*sednav1.FederatedLearningJob]{
		LogName: "job",
		Get: func(ns, name string) (*sednav1.FederatedLearningJob, error) {
			return jobs.FederatedLearningJobs(ns).Get(name)
		},
		Client: func(ns string) common.StatusClient[*sednav1.FederatedLearningJob] {
			return sednaClient.SednaV1alpha1().FederatedLearningJobs(ns)
		},
		Status:       func(j *sednav1.FederatedLearningJob) any { return &j.Status },
		Recorder:     recorder,
		Expectations: exp,
		Pods:         children[0],
		Services:     children[1],
		Forget:       func(key string) { d.Admission.Forget(jobKind, key) },
		Lifecycle:    c.lifecycle(),
		Children:     c.children,
		Clock:        c.clock,
		After:        c.queue.AddAfter,
	}
	c.reports = edgestatus.For(c.syncer, Name,
		func(j *sednav1.FederatedLearningJob) *[]sednav1.EdgeNodeStatus { return &j.Status.EdgeNodes },
		c.clock, metrics)
	if err := common.IndexByModel(jobInformer.Informer()); err != nil {
		return nil, err
	}
	if err := common.IndexByDataset(jobInformer.Informer(), datasetNames); err != nil {
		return nil, err
	}
	batched := common.Batched(c.queue, d.ChildEventBatchPeriod)
	if c.synced, err = common.AddHandlers(
		common.Handler{Informer: jobInformer.Informer(), Handler: common.OwnerHandler(c.queue.Add)},
		common.Handler{Informer: podInformer.Informer(), Handler: common.PodHandler(jobKind, exp, batched)},
		common.Handler{Informer: serviceInformer.Informer(), Handler: common.ChildHandler(jobKind, batched)},
		common.Handler{Informer: modelInformer.Informer(), Handler: common.ReferenceHandler(c.jobIndexer, common.ByModel, c.queue.Add)},
		common.Handler{Informer: datasetInformer.Informer(), Handler: common.ReferenceHandler(c.jobIndexer, common.ByDataset, c.queue.Add)},
	); err != nil {
		return nil, err
	}
	c.synced = append(c.synced, d.Gangs.Watch(jobKind, batched), d.Admission.Watch(jobKind, c.queue.Add))
	return c, nil
}

// Run processes jobs with workers goroutines until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	return common.Run(ctx, Name, c.queue, workers, c.sync, c.metrics, c.synced...)
}

// datasetNames are the Datasets a job names, its training workers', for
// common.IndexByDataset.
func datasetNames(obj any) []string {
	job, ok := obj.(*sednav1.FederatedLearningJob)
	if !ok {
		return nil
	}
	return datasetsOf(job)
}

func datasetsOf(j *sednav1.FederatedLearningJob) []string {
	var names []string
	for _, w := range j.Spec.TrainingWorkers {
		names = append(names, w.Dataset.Name)
	}
	return names
}

// podPhaseIs counts pods in a phase.
func podPhaseIs(pods []*corev1.Pod, phase corev1.PodPhase) int32 {
	var n int32
	for _, p := range pods {
		if p.Status.Phase == phase {
			n++
		}
	}
	return n
}
