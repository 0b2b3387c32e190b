// Package cycle is the edge half of the incremental and lifelong learning
// cycle. The GlobalManager runs the stage machine from "train ready" on; the
// LocalController of the node that holds a job's Dataset owns two things:
//
//   - the train trigger, evaluated here so that it keeps firing while the
//     cloud is away (edge autonomy): when the Dataset has grown enough, the
//     new samples are split into the round's train and test files and a
//     "train ready" report goes up;
//   - for an IncrementalLearningJob, the deploy copy: when the cloud says the
//     round's model is to be deployed, it is copied over the deploy Model's
//     file on the node and a "deploy completed" (or "failed") report goes up.
//
// Each report is appended together with the job's state (the round prepared,
// the round deployed) in one store transaction, so a round is never prepared
// or deployed twice, across restarts and partitions alike.
package cycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/nodefs"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// DefaultTick is how often a Manager looks at its jobs when Config.Tick is 0.
// It is short because looking is cheap (each trigger keeps its own check
// period) and it is how soon the deploy copy starts.
const DefaultTick = 500 * time.Millisecond

// Store is the part of the LocalController's store a Manager uses: the jobs,
// Datasets and Models the GlobalManager sent, with their status, and the
// state half where each job's progress is kept.
type Store interface {
	ListObjects(kind string) ([]store.Object, error)
	GetObject(key store.Key) (store.Object, bool, error)
	GetState(key string) ([]byte, bool, error)
	DeleteState(key string) error
}

// Outbox takes a report for the GlobalManager with the state that says it
// was made (see store.Outbox).
type Outbox = store.Outbox

// Config says which jobs a Manager handles and where their files are.
type Config struct {
	// Node is this LocalController's node: a job is handled here when its
	// Dataset's spec.nodeName is this node.
	Node string
	// Root is the node's filesystem (its Dir "/" on a real node); Dataset
	// and Model URLs and outputDir are resolved under it, within its allowed
	// paths.
	Root nodefs.Root
	// Tick is how often the jobs are looked at (DefaultTick if 0).
	Tick time.Duration
	// DeployRetryFor is how long a failing deploy copy is tried again
	// before it is reported failed (DefaultDeployRetryFor if 0).
	DeployRetryFor time.Duration
}

// Manager runs the edge half of the learning cycle of the jobs whose Dataset
// is on its node. Run it from one goroutine.
type Manager struct {
	cfg    Config
	store  Store
	outbox Outbox

	// Wall is the wall clock: the trigger's daily timer window is read in
	// it, and reports carry its time. Tests and demos move it
	// (--clock-file).
	Wall clock.PassiveClock
	// clock measures check periods and ticks Run; the real clock outside
	// tests. It is not Wall: a wall clock moved by a demo must not make a
	// check period pass.
	clock clock.WithTicker

	jobs map[jobKey]*jobMemory
	// checks counts the train triggers' checks by result.
	checks *prometheus.CounterVec
}

// NewManager returns a Manager reading jobs from st and appending its reports
// to outbox.
func NewManager(st Store, outbox Outbox, cfg Config) *Manager {
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.DeployRetryFor <= 0 {
		cfg.DeployRetryFor = DefaultDeployRetryFor
	}
	checks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "nereid", Subsystem: "cycle", Name: "train_trigger_checks_total",
		Help: "Checks of the train triggers of the learning-cycle jobs on this node, by result: fired, not_met, outside_window or unevaluable.",
	}, []string{"result"})
	for _, r := range []string{CheckFired, CheckNotMet, CheckOutsideWindow, CheckUnevaluable} {
		checks.WithLabelValues(r)
	}
	return &Manager{cfg: cfg, store: st, outbox: outbox, Wall: clock.RealClock{}, clock: clock.RealClock{},
		jobs: make(map[jobKey]*jobMemory), checks: checks}
}

// Collector is the Manager's metric, for the LocalController's registry: the
// checks of the train triggers by result, which show that a trigger was
// evaluated, and why it did not fire.
func (m *Manager) Collector() prometheus.Collector { return m.checks }

// Run looks at the jobs at once and then every tick until ctx is done.
func (m *Manager) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	t := m.clock.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		if err := m.sync(ctx); err != nil {
			logger.Error(err, "Running learning cycles")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// jobKey names a job of one of the learning-cycle kinds.
type jobKey struct {
	Kind      string
	Namespace string
	Name      string
}

func (k jobKey) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// stateKey is where the job's progress is kept in the store.
func (k jobKey) stateKey() string { return "cycle/" + k.Kind + "/" + k.Namespace + "/" + k.Name }

// job is what the Manager needs of an IncrementalLearningJob or a
// LifelongLearningJob.
type job struct {
	key       jobKey
	ownerKind edgeproto.OwnerKind
	uid       types.UID
	dataset   sednav1.CycleDataset
	trigger   sednav1.Trigger
	outputDir string
	status    sednav1.CycleStatus
	// deployModel is the Model the deploy copy overwrites; empty for a
	// LifelongLearningJob, whose deploy stage is the cloud's alone.
	deployModel string
	// hotUpdate says the inference worker reloads the model from the hot
	// update folder (hotupdate.go), which the deploy copy then fills too.
	hotUpdate bool
}

// kinds are the learning-cycle kinds and how to read each.
var kinds = []struct {
	kind   string
	decode func(store.Object) (*job, error)
}{
	{"IncrementalLearningJob", func(o store.Object) (*job, error) {
		var j sednav1.IncrementalLearningJob
		if err := json.Unmarshal(o.Data, &j); err != nil {
			return nil, err
		}
		return &job{
			ownerKind: edgeproto.OwnerIncrementalLearningJob, uid: j.UID,
			dataset: j.Spec.Dataset, trigger: j.Spec.TrainSpec.Trigger, outputDir: j.Spec.OutputDir,
			status: j.Status.CycleStatus, deployModel: j.Spec.DeploySpec.Model.Name,
			hotUpdate: j.Spec.DeploySpec.Model.HotUpdateEnabled,
		}, nil
	}},
	{"LifelongLearningJob", func(o store.Object) (*job, error) {
		var j sednav1.LifelongLearningJob
		if err := json.Unmarshal(o.Data, &j); err != nil {
			return nil, err
		}
		return &job{
			ownerKind: edgeproto.OwnerLifelongLearningJob, uid: j.UID,
			dataset: j.Spec.Dataset, trigger: j.Spec.TrainSpec.Trigger, outputDir: j.Spec.OutputDir,
			status: j.Status.CycleStatus,
		}, nil
	}},
}

// jobState is a job's progress on this node, kept in the store (as JSON) so a
// restart neither prepares nor deploys a round twice.
type jobState struct {
	// UID tells the job from an earlier one of the same name, whose
	// progress is not this one's.
	UID types.UID `json:"uid,omitempty"`
	// PreparedRound is the last round whose data this LocalController
	// prepared and reported.
	PreparedRound int32 `json:"preparedRound"`
	// Baseline is the Dataset's sample count at that preparation; the next
	// round trains on the samples past it.
	Baseline int32 `json:"baseline"`
	// DeployedRound is the last round the deploy copy was done (or failed)
	// for, and DeployedAttempt the GlobalManager's attempt it answered.
	DeployedRound   int32 `json:"deployedRound"`
	DeployedAttempt int32 `json:"deployedAttempt,omitempty"`
}

// jobMemory is what the Manager keeps of a job between ticks.
type jobMemory struct {
	state jobState
	// nextCheck is when the train trigger is next evaluated, on the
	// monotonic clock; zero checks at once.
	nextCheck time.Time
	// nextDeploy holds back a deploy copy whose report the outbox refused.
	nextDeploy time.Time
	// deployRetry is the current deploy's failing copy, tried again.
	deployRetry *deployRetry
	// warned holds the configuration problems already logged.
	warned map[string]bool
}

// warnOnce logs a problem with a job's spec the first time it is seen.
func (mem *jobMemory) warnOnce(logger klog.Logger, msg string, kv ...any) {
	key := fmt.Sprint(append([]any{msg}, kv...)...)
	if mem.warned[key] {
		return
	}
	mem.warned[key] = true
	logger.V(2).Info(msg, kv...)
}

// sync looks at every job once.
func (m *Manager) sync(ctx context.Context) error {
	var errs []error
	seen := make(map[jobKey]bool)
	for _, k := range kinds {
		objs, err := m.store.ListObjects(k.kind)
		if err != nil {
			return err
		}
		for _, o := range objs {
			key := jobKey{Kind: k.kind, Namespace: o.Key.Namespace, Name: o.Key.Name}
			seen[key] = true
			j, err := k.decode(o)
			if err != nil {
				errs = append(errs, fmt.Errorf("decoding %s: %w", key, err))
				continue
			}
			j.key = key
			if err := m.handle(ctx, j); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
			}
		}
	}
	for key := range m.jobs {
		if seen[key] {
			continue
		}
		if err := m.store.DeleteState(key.stateKey()); err != nil {
			errs = append(errs, err) // kept in memory, so tried again next tick
			continue
		}
		delete(m.jobs, key)
		klog.FromContext(ctx).V(2).Info("Forgot a job no longer on this node", "job", key.String())
	}
	return errors.Join(errs...)
}

// handle runs the edge half of one job's cycle, if its Dataset is on this node.
func (m *Manager) handle(ctx context.Context, j *job) error {
	logger := klog.FromContext(ctx).WithValues("job", j.key.String())
	ctx = klog.NewContext(ctx, logger)
	obj, found, err := m.store.GetObject(store.Key{Kind: "Dataset", Namespace: j.key.Namespace, Name: j.dataset.Name})
	if err != nil {
		return err
	}
	if !found {
		logger.V(4).Info("Dataset not in the store", "dataset", j.dataset.Name)
		return nil
	}
	var ds sednav1.Dataset
	if err := json.Unmarshal(obj.Data, &ds); err != nil {
		return fmt.Errorf("decoding Dataset %s: %w", j.dataset.Name, err)
	}
	if ds.Spec.NodeName != m.cfg.Node {
		return nil
	}
	mem, err := m.memory(ctx, j)
	if err != nil {
		return err
	}
	return errors.Join(m.deploy(ctx, j, mem), m.trigger(ctx, j, mem, &ds))
}

// memory returns what the Manager keeps of j, loading its progress from the
// store on first sight, and starting afresh for a new job under an old name.
func (m *Manager) memory(ctx context.Context, j *job) (*jobMemory, error) {
	mem := m.jobs[j.key]
	if mem == nil {
		mem = &jobMemory{warned: make(map[string]bool)}
		data, found, err := m.store.GetState(j.key.stateKey())
		if err != nil {
			return nil, err
		}
		if found {
			if err := json.Unmarshal(data, &mem.state); err != nil {
				// Starting afresh prepares the current round again at worst;
				// a bad record must not stop the cycle.
				klog.FromContext(ctx).Error(err, "Ignoring an unreadable learning-cycle state")
				mem.state = jobState{}
			}
		}
		m.jobs[j.key] = mem
	}
	if mem.state.UID != j.uid {
		if mem.state.UID != "" {
			klog.FromContext(ctx).V(2).Info("The job was recreated; starting its cycle afresh", "uid", j.uid)
		}
		*mem = jobMemory{state: jobState{UID: j.uid}, warned: make(map[string]bool)}
	}
	return mem, nil
}

// ownReport is a report the LocalController makes about a job itself.
type ownReport struct {
	stage     edgeproto.Stage
	status    edgeproto.WorkerStatus
	ownerInfo any
	results   []any
}

// appendReport appends r about j, under the worker name
// edgeproto.LocalControllerWorker, with the job's new state; mem takes the
// state only once both are on disk.
func (m *Manager) appendReport(j *job, mem *jobMemory, r ownReport, state jobState, now time.Time) error {
	info := edgeproto.WorkerInfo{
		Name: edgeproto.LocalControllerWorker, Namespace: j.key.Namespace,
		OwnerName: j.key.Name, OwnerKind: j.ownerKind,
		Kind: r.stage, Status: r.status,
	}
	var err error
	if info.OwnerInfo, err = json.Marshal(r.ownerInfo); err != nil {
		return fmt.Errorf("encoding the %s report: %w", r.stage, err)
	}
	for _, res := range r.results {
		data, err := json.Marshal(res)
		if err != nil {
			return fmt.Errorf("encoding the %s report: %w", r.stage, err)
		}
		info.Results = append(info.Results, data)
	}
	body, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encoding the %s report: %w", r.stage, err)
	}
	// What the GlobalManager would refuse must not enter the outbox.
	if _, err := edgeproto.ParseWorkerInfo(body); err != nil {
		return fmt.Errorf("the %s report is invalid: %w", r.stage, err)
	}
	report, err := edgeproto.OutboxRecord(edgeproto.Report{Worker: edgeproto.LocalControllerWorker, Body: body, ReceivedAt: now.UTC()})
	if err != nil {
		return fmt.Errorf("encoding the %s report: %w", r.stage, err)
	}
	stateData, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("encoding the learning-cycle state: %w", err)
	}
	if _, err := m.outbox.AppendReportWithState(report, j.key.stateKey(), stateData); err != nil {
		return fmt.Errorf("appending the %s report: %w", r.stage, err)
	}
	mem.state = state
	return nil
}
