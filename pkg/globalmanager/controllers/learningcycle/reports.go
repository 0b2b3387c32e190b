package learningcycle

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// ApplyReports records reports about one job forwarded by a node's
// LocalController under the job's edgeNodes and moves the cycle on each, in
// order: the train trigger fired, a stage
// worker runs, completed or failed, the edge deployed the model. A report
// about anything but the current round, stage and try is recorded only. It
// follows edgestatus.EdgeReports' rule: idempotent by node, store and report ID,
// read from the API server, written together with conflict retries, events
// after the write.
func (c *Controller[J]) ApplyReports(ctx context.Context, from edgeproto.Source, reports []edgeproto.WorkerReport) []error {
	return c.reports.ApplyWorkers(ctx, from, reports, func(job J, wr edgeproto.WorkerReport, now metav1.Time) ([]common.Event, error) {
		r, info := wr.Report, wr.Info
		fields := c.kind.Fields(job)
		st := fields.read()
		if why := notCurrentWorker(job.GetName(), &st, info); why != "" {
			return nil, edgeproto.Refuse("%s", why)
		}
		if info.Name == edgeproto.LocalControllerWorker {
			if err := c.checkLocalController(job, from, info); err != nil {
				return nil, err
			}
		}
		m := &machine{job: job.GetName(), st: &st, now: now, config: &c.config}
		o := Outcome{Now: now}
		if job.GetDeletionTimestamp() == nil {
			o = c.move(ctx, m, job, r, info)
		}
		fields.write(st)
		kindEvents, err := c.kind.Applied(ctx, job, info, o)
		if err != nil {
			return nil, err
		}
		return append(m.events, kindEvents...), nil
	})
}

// checkLocalController refuses a report under the LocalController's own
// name unless it comes from the node of the job's Dataset, whose
// LocalController alone runs the job's train trigger and deploy, and unless
// the round's data it names is within the job's outputDir: those paths are
// mounted into the round's pods. Any node the job concerns may send reports
// about it, and a node's LocalController may be another's attacker.
func (c *Controller[J]) checkLocalController(job J, from edgeproto.Source, info *edgeproto.WorkerInfo) error {
	spec := c.kind.Spec(job)
	ds, err := c.datasets.Datasets(job.GetNamespace()).Get(spec.Dataset)
	switch {
	case apierrors.IsNotFound(err):
		return edgeproto.Refuse("the Dataset %s of job %s does not exist, so no node's LocalController reports for its cycle", spec.Dataset, job.GetName())
	case err != nil:
		return fmt.Errorf("reading Dataset %s/%s: %w", job.GetNamespace(), spec.Dataset, err)
	case ds.Spec.NodeName != from.Node:
		return edgeproto.Refuse("only the LocalController of node %q, the Dataset %s's, reports for the cycle of job %s, not node %s's",
			ds.Spec.NodeName, spec.Dataset, job.GetName(), from.Node)
	}
	owner := parseOwnerInfo(info.OwnerInfo)
	for _, field := range []string{"trainDatasetURL", "testDatasetURL"} {
		if why := reportedPath("ownerInfo."+field, owner.String(field), spec.OutputDir); why != "" {
			return edgeproto.Refuse("%s", why)
		}
	}
	return nil
}

// notCurrentWorker says why a worker's report is refused for good: it is not
// the LocalController, the current try's stage pod or the inference worker.
// A stage pod's name is predictable, so a pod of an earlier try or round
// must not speak for the current one (a "new model" at a path of its
// choosing, say).
func notCurrentWorker(job string, st *Status, info *edgeproto.WorkerInfo) string {
	if info.Name == edgeproto.LocalControllerWorker || (st.InferenceWorker != "" && info.Name == st.InferenceWorker) {
		return ""
	}
	wanted, _ := wantedStagePod(job, st)
	if wanted != "" && info.Name == wanted {
		return ""
	}
	if wanted == "" {
		return fmt.Sprintf("worker %s reports, but no stage of job %s runs now", info.Name, job)
	}
	return fmt.Sprintf("worker %s is not the current stage's pod %s of job %s", info.Name, wanted, job)
}

// move applies a report to the cycle; the outcome says what it did.
func (c *Controller[J]) move(ctx context.Context, m *machine, job J, r *edgeproto.Report, info *edgeproto.WorkerInfo) Outcome {
	st := m.st
	o := Outcome{Now: m.now}
	ignore := func(why string) Outcome {
		klog.FromContext(ctx).V(2).Info("Report does not move the cycle", "job", klog.KObj(job), "report", r.ID,
			"worker", info.Name, "kind", info.Kind, "status", info.Status, "why", why)
		return o
	}
	// done is the outcome of a move: the round it concerns is the current
	// one, or the one it just finished.
	done := func(move Move) Outcome {
		o.Move = move
		if st.CurrentRound != nil {
			o.Round = *st.CurrentRound.DeepCopy()
		} else if n := len(st.History); n > 0 {
			o.Round = *st.History[n-1].DeepCopy()
		}
		return o
	}
	switch {
	case st.Finished():
		return ignore("the job is finished")
	case st.Round == 0:
		return ignore("the cycle has not started")
	case info.Name == edgeproto.LocalControllerWorker:
		return c.moveOnLocalController(m, job, r, info, ignore, done)
	}

	wanted, _ := wantedStagePod(job.GetName(), st)
	if wanted == "" || info.Name != wanted || info.Kind != stageOf(st.Stage) {
		return ignore(fmt.Sprintf("not from the current try's worker (%s)", wanted))
	}
	if suspended(c.kind.Spec(job)) && info.Status != edgeproto.WorkerCompleted {
		// The suspension stopped its pod: that it ran, or failed as it was
		// stopped, says nothing of the try, which runs again on resume. A
		// completed report is a result all the same.
		return ignore("the job is suspended")
	}
	switch info.Status {
	case edgeproto.WorkerRunning:
		m.running("worker " + info.Name + " reported running")
		return done(MoveOther)
	case edgeproto.WorkerFailed:
		m.failTry(failureReason(info.OwnerInfo, info.Results))
		return done(MoveOther)
	case edgeproto.WorkerCompleted:
	default:
		return ignore("status " + string(info.Status))
	}
	if st.Stage == sednav1.StageTrain {
		models := trainedModels(info.Results)
		if len(models) == 0 {
			m.failTry("train worker reported no model")
			return done(MoveOther)
		}
		if why := checkModels(models, c.kind.Spec(job).OutputDir); why != "" {
			m.failTry(why)
			return done(MoveOther)
		}
		m.trained(models)
		return done(MoveTrainCompleted)
	}
	metrics, own := evaluation(info.Results, m.round().Models, c.kind.Spec(job).OutputDir)
	deploy, sentence := c.kind.Decide(job, info.Results)
	m.evaluated(metrics, own, deploy, sentence)
	return done(MoveEvaluated)
}

// moveOnLocalController applies what the LocalController of the dataset's
// node reports of its own part: the train trigger fired, or the deploy stage
// copied the model.
func (c *Controller[J]) moveOnLocalController(m *machine, job J, r *edgeproto.Report, info *edgeproto.WorkerInfo,
	ignore func(string) Outcome, done func(Move) Outcome) Outcome {
	st := m.st
	owner := parseOwnerInfo(info.OwnerInfo)
	round, ok := owner.Int("round")
	if !ok {
		return ignore("ownerInfo has no round")
	}
	switch {
	case info.Kind == edgeproto.StageTrain && info.Status == edgeproto.WorkerReady:
		samples, _ := owner.Int("numberOfSamples")
		moved, why := m.trainReady(trigger{
			round:           round,
			samples:         samples,
			trainDatasetURL: owner.String("trainDatasetURL"),
			testDatasetURL:  owner.String("testDatasetURL"),
			at:              owner.Time("triggeredAt", r.ReceivedAt),
		})
		if !moved {
			return ignore(why)
		}
		return done(MoveOther)
	case info.Kind != edgeproto.StageDeploy:
		return ignore("a LocalController reports only train triggers and deploys")
	}
	deployment := c.kind.Deployment(job)
	switch {
	case deployment == DeployByController:
		return ignore("this kind's deploy stage is the controller's own")
	case st.Stage != sednav1.StageDeploy || st.State != sednav1.StageReady:
		return ignore(fmt.Sprintf("the cycle is at %s/%s, not deploying", st.Stage, st.State))
	case round != st.Round:
		return ignore(fmt.Sprintf("the deploy is for round %d, the cycle is at round %d", round, st.Round))
	}
	// The stage stays Ready while the LocalController copies: Ready is what
	// it acts on, a new try included.
	switch info.Status {
	case edgeproto.WorkerFailed:
		// The LocalController tried the copy again, with backoff, for
		// its bounded time before it said so: the round ends, the job
		// goes on.
		m.deployFailed(failureReason(info.OwnerInfo, nil))
		return done(MoveOther)
	case edgeproto.WorkerCompleted:
		m.deployed(deployment == DeployByEdgeHot)
		return done(MoveDeployed)
	}
	return ignore("status " + string(info.Status))
}

// stageOf is the report kind of a stage's workers; the deploy stage has none.
func stageOf(s sednav1.Stage) edgeproto.Stage {
	switch s {
	case sednav1.StageTrain:
		return edgeproto.StageTrain
	case sednav1.StageEval:
		return edgeproto.StageEval
	case sednav1.StageDeploy:
		return edgeproto.StageDeploy
	}
	return ""
}
