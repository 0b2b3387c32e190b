package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/incrementallearning"
	edgecycle "github.com/nereid-ml/nereid/pkg/localcontroller/cycle"
	"github.com/nereid-ml/nereid/test/framework"
)

// The learning-cycle tests run a GlobalManager with its edge hub and edge-0's
// LocalController (real processes, real control plane); the test plays the
// stage workers: it posts to the LocalController what Sedna's workers post and
// marks their pods finished the way a kubelet would.

const (
	cycleJob       = "cycle"
	cycleNode      = "edge-0"
	cycleIndex     = "/data/cycle/index.txt"
	cycleOutput    = "/output/cycle"
	cycleDeployURL = "/models/deploy/model.pb"
)

// cycle is one test's learning-cycle setup.
type cycle struct {
	t         *testing.T
	ns        string
	hub       *framework.EdgeHub
	lc        *framework.LocalController
	ownerKind string // incrementallearningjob or lifelonglearningjob
	samples   int
}

// startCycle starts the GlobalManager and edge-0's LocalController; lcArgs go
// to the LocalController.
func startCycle(t *testing.T, ownerKind string, gmArgs []string, lcArgs ...string) *cycle {
	t.Helper()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns, gmArgs...)
	lc := framework.StartLocalController(t, hub, cycleNode, framework.EdgeIdentity(t, ns, cycleNode), lcArgs...)
	return &cycle{t: t, ns: ns, hub: hub, lc: lc, ownerKind: ownerKind}
}

// nodeFile is a node path as a file of edge-0's root.
func (c *cycle) nodeFile(url string) string { return filepath.Join(c.lc.Root, url) }

// writeNodeFile writes a file at a node path.
func (c *cycle) writeNodeFile(url, content string) {
	c.t.Helper()
	path := c.nodeFile(url)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// addSamples appends n samples to the dataset's index file, as new labelled
// images arriving on the edge would.
func (c *cycle) addSamples(n int) {
	c.t.Helper()
	path := c.nodeFile(cycleIndex)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		c.t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	for range n {
		c.samples++
		fmt.Fprintf(f, "images/%04d.jpg labels/%04d.txt\n", c.samples, c.samples)
	}
}

func (c *cycle) createModels() {
	c.t.Helper()
	for name, url := range map[string]string{"initial-model": "/models/base/model.pb", "deploy-model": cycleDeployURL} {
		m := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sednav1.ModelSpec{URL: url, Format: "pb"}}
		if _, err := framework.SednaClient(c.t).SednaV1alpha1().Models(c.ns).Create(c.t.Context(), m, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
	c.writeNodeFile(cycleDeployURL, "initial model")
}

func (c *cycle) createDataset(name, url string) {
	c.t.Helper()
	d := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: sednav1.DatasetSpec{URL: url, Format: "txt", NodeName: cycleNode}}
	if _, err := framework.SednaClient(c.t).SednaV1alpha1().Datasets(c.ns).Create(c.t.Context(), d, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// stageTemplate is a worker template pinned to edge-0.
func stageTemplate(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: cycleNode,
		Containers: []corev1.Container{{Name: name, Image: "kubeedge/sedna-example:test"}}}}
}

// trainTrigger fires on more than threshold new samples, checked every second.
func trainTrigger(threshold float64, timer *sednav1.Timer) sednav1.Trigger {
	return sednav1.Trigger{CheckPeriodSeconds: 1, Timer: timer,
		Condition: sednav1.TriggerCondition{Operator: ">", Threshold: threshold, Metric: "num_of_samples"}}
}

// createIncremental creates the dataset, the models and an incremental job
// whose train trigger fires past threshold new samples and whose deploy
// trigger fires when precision improved by more than 0.1 on every class.
func (c *cycle) createIncremental(threshold float64, timer *sednav1.Timer) *sednav1.IncrementalLearningJob {
	c.t.Helper()
	c.createModels()
	c.createDataset("cycle-data", cycleIndex)
	job := incrementalJob(cycleJob, threshold, timer)
	created, err := framework.SednaClient(c.t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Create(c.t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return created
}

// incrementalJob is an incremental job of Dataset cycle-data and Models
// initial-model and deploy-model, with stage templates pinned to edge-0,
// whose train trigger fires past threshold new samples (within timer's
// window) and whose deploy trigger fires when precision improved by more
// than 0.1 on every class.
func incrementalJob(name string, threshold float64, timer *sednav1.Timer) *sednav1.IncrementalLearningJob {
	return &sednav1.IncrementalLearningJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: sednav1.IncrementalLearningJobSpec{
			Dataset:      sednav1.CycleDataset{Name: "cycle-data", TrainProb: 0.8},
			InitialModel: sednav1.ModelRef{Name: "initial-model"},
			TrainSpec:    sednav1.TrainSpec{Template: stageTemplate("train"), Trigger: trainTrigger(threshold, timer)},
			EvalSpec:     sednav1.EvalSpec{Template: stageTemplate("eval")},
			DeploySpec: sednav1.DeploySpec{
				Model:    sednav1.DeployModel{Name: "deploy-model", HotUpdateEnabled: true},
				Trigger:  sednav1.Trigger{Condition: sednav1.TriggerCondition{Operator: ">", Threshold: 0.1, Metric: "precision_delta"}},
				Template: stageTemplate("infer"),
			},
			OutputDir: cycleOutput,
		},
	}
}

// status reads the job's cycle status.
func (c *cycle) status(ctx context.Context) (sednav1.CycleStatus, error) {
	if c.ownerKind == "lifelonglearningjob" {
		j, err := framework.SednaClient(c.t).SednaV1alpha1().LifelongLearningJobs(c.ns).Get(ctx, cycleJob, metav1.GetOptions{})
		if err != nil {
			return sednav1.CycleStatus{}, err
		}
		return j.Status.CycleStatus, nil
	}
	j, err := framework.SednaClient(c.t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Get(ctx, cycleJob, metav1.GetOptions{})
	if err != nil {
		return sednav1.CycleStatus{}, err
	}
	return j.Status.CycleStatus, nil
}

func describe(s sednav1.CycleStatus) string {
	return fmt.Sprintf("round %d %s/%s attempt %d, %d rounds in history", s.Round, s.Stage, s.State, s.Attempt, len(s.History))
}

// waitFor waits until the job is in round at stage, in one of states.
func (c *cycle) waitFor(round int32, stage sednav1.Stage, states ...sednav1.StageState) sednav1.CycleStatus {
	c.t.Helper()
	var got sednav1.CycleStatus
	framework.Eventually(c.t, 60*time.Second, fmt.Sprintf("round %d %s %v", round, stage, states), func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.status(ctx)
		if err != nil {
			return false, err
		}
		if got.Round > round {
			return false, fmt.Errorf("passed the round: %s", describe(got))
		}
		return got.Round == round && got.Stage == stage && slices.Contains(states, got.State), nil
	})
	return got
}

// stagePods are the job's live pods of a role (train, eval, inference), by name.
func (c *cycle) stagePods(ctx context.Context, role string) (map[string]*corev1.Pod, error) {
	list, err := framework.KubeClient(c.t).CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{
		LabelSelector: common.LabelWorkerRole + "=" + role})
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out, nil
}

// stagePod waits for the stage pod of round and attempt.
func (c *cycle) stagePod(stage string, round, attempt int) *corev1.Pod {
	c.t.Helper()
	name := common.ChildName(cycleJob, stage, fmt.Sprint(round), fmt.Sprint(attempt))
	var pod *corev1.Pod
	framework.Eventually(c.t, 60*time.Second, "stage pod "+name, func(ctx context.Context) (bool, error) {
		p, err := framework.KubeClient(c.t).CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		pod = p
		return err == nil && p.DeletionTimestamp == nil, err
	})
	return pod
}

// post posts a worker's report to edge-0's LocalController, as Sedna's worker
// library does, until it is taken.
func (c *cycle) post(worker, stage, status string, results []map[string]any) {
	c.t.Helper()
	body, err := json.Marshal(map[string]any{
		"name": worker, "namespace": c.ns, "ownerName": cycleJob, "ownerKind": c.ownerKind,
		"kind": stage, "status": status, "results": results,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	framework.Eventually(c.t, 30*time.Second, fmt.Sprintf("the LocalController to take %s's %s report", worker, status), func(context.Context) (bool, error) {
		code, msg := framework.PostAsWorker(c.t, c.lc, c.ns, worker, body)
		if code != http.StatusOK && !notYetKnown(code) {
			return false, fmt.Errorf("status %d: %s", code, msg)
		}
		return code == http.StatusOK, nil
	})
}

// finish ends a stage pod, playing the kubelet; a pod already gone is
// fine: the GlobalManager removes a replaced try's pod.
func (c *cycle) finish(pod *corev1.Pod, phase corev1.PodPhase) {
	c.t.Helper()
	framework.EndPodUnlessGone(c.t, c.ns, pod.Name, phase)
}

// modelURL is where the round's train worker writes its model.
func modelURL(round int) string {
	return fmt.Sprintf("%s/round-%d/train/model.pb", cycleOutput, round)
}

// playTrain is the train worker of round: it runs, writes its model on the
// node, reports it and exits.
func (c *cycle) playTrain(round int, extra map[string]any) *corev1.Pod {
	c.t.Helper()
	c.waitFor(int32(round), sednav1.StageTrain, sednav1.StageStarting, sednav1.StageRunning)
	pod := c.stagePod("train", round, 1)
	c.post(pod.Name, "train", "running", nil)
	c.writeNodeFile(modelURL(round), fmt.Sprintf("model of round %d", round))
	result := map[string]any{"format": "pb", "url": modelURL(round)}
	for k, v := range extra {
		result[k] = v
	}
	c.post(pod.Name, "train", "completed", []map[string]any{result})
	c.finish(pod, corev1.PodSucceeded)
	return pod
}

// playEval is the eval worker of round: it reports the new model's metrics
// first, then the deployed model's, as Sedna's eval worker does for MODEL_URLS.
func (c *cycle) playEval(round int, newMetrics, oldMetrics map[string]any) {
	c.t.Helper()
	c.waitFor(int32(round), sednav1.StageEval, sednav1.StageStarting, sednav1.StageRunning)
	pod := c.stagePod("eval", round, 1)
	c.post(pod.Name, "eval", "completed", []map[string]any{
		{"format": "pb", "url": modelURL(round), "metrics": newMetrics},
		{"format": "pb", "url": cycleDeployURL, "metrics": oldMetrics},
	})
	c.finish(pod, corev1.PodSucceeded)
}

// waitForRoundEnd waits until round is in the history and the next round waits.
func (c *cycle) waitForRoundEnd(round int) sednav1.RoundStatus {
	c.t.Helper()
	s := c.waitFor(int32(round+1), sednav1.StageTrain, sednav1.StageWaiting)
	for _, r := range s.History {
		if r.Round == int32(round) {
			return r
		}
	}
	c.t.Fatalf("round %d not in the history: %s", round, describe(s))
	return sednav1.RoundStatus{}
}

// triggerChecks is how often edge-0's LocalController has checked a train
// trigger with result (edgecycle.CheckFired, edgecycle.CheckNotMet, …) since it
// started.
func (c *cycle) triggerChecks(result string) float64 {
	c.t.Helper()
	return c.lc.Metrics(c.t).Get(fmt.Sprintf(`nereid_cycle_train_trigger_checks_total{result=%q}`, result))
}

// waitForTriggerCheck waits until edge-0's LocalController checks the train
// trigger once more and holds it, for result (not met, outside the window):
// it held the job waiting for a round and evaluated the trigger on the node's
// files and clock as they are now. The trigger firing instead fails the test.
func (c *cycle) waitForTriggerCheck(result string) {
	c.t.Helper()
	before, fired := c.triggerChecks(result), c.triggerChecks(edgecycle.CheckFired)
	framework.Eventually(c.t, 30*time.Second, "a train trigger check with result "+result, func(context.Context) (bool, error) {
		if n := c.triggerChecks(edgecycle.CheckFired); n > fired {
			return false, fmt.Errorf("the train trigger fired (%v times)", n-fired)
		}
		return c.triggerChecks(result) > before, nil
	})
}

// ilSynced reads the GlobalManager's incremental learning controller, for
// framework.WaitForSyncAfter.
func (c *cycle) ilSynced() framework.ControllerReading {
	c.t.Helper()
	return framework.ReadController(c.t, c.hub.Process, incrementallearning.Name)
}

func readNodeFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func countLines(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

func TestDatasetGrowingPastTheThresholdStartsExactlyOneRound(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "incrementallearningjob", nil)
	c.addSamples(3)
	c.createIncremental(5, nil)
	c.createDataset("missing-data", "/data/missing/index.txt")

	waitDatasetsCounted(t, c)
	c.waitFor(1, sednav1.StageTrain, sednav1.StageWaiting)
	// No round under the threshold: edge-0 evaluated the trigger on its 3
	// samples and held it.
	c.waitForTriggerCheck(edgecycle.CheckNotMet)
	if s, err := c.status(t.Context()); err != nil || s.Round != 1 || s.State != sednav1.StageWaiting {
		t.Fatalf("after a check under the threshold: %s (%v), want round 1 waiting", describe(s), err)
	}
	if fired := c.triggerChecks(edgecycle.CheckFired); fired != 0 {
		t.Fatalf("the trigger fired %v times under the threshold", fired)
	}

	c.addSamples(4) // 7 > 5
	c.waitFor(1, sednav1.StageTrain, sednav1.StageStarting, sednav1.StageRunning)
	// More data while the round runs starts nothing new: once the cloud has
	// the new count and the controller has synced the job since, still one
	// round and one train pod. A Dataset's status write alone syncs none of
	// the jobs naming it (a sync reads none of it), so an annotation on the
	// job makes the sync.
	c.addSamples(20)
	framework.Eventually(t, 30*time.Second, "the Dataset's count of 27 samples in its status", func(ctx context.Context) (bool, error) {
		d, err := framework.SednaClient(t).SednaV1alpha1().Datasets(c.ns).Get(ctx, "cycle-data", metav1.GetOptions{})
		return err == nil && d.Status.NumberOfSamples == 27, err
	})
	synced := c.ilSynced()
	if _, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Patch(t.Context(), "cycle", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"test.nereid.io/poke":"after-27-samples"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitForSyncAfter(t, synced)
	s, err := c.status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if pods, err := c.stagePods(t.Context(), "train"); err != nil || s.Round != 1 || s.Stage != sednav1.StageTrain || len(pods) != 1 {
		t.Fatalf("after more data during round 1: %s, %d train pods (%v); want round 1 training, one train pod", describe(s), len(pods), err)
	}
	if fired := c.triggerChecks(edgecycle.CheckFired); fired != 1 {
		t.Errorf("the trigger fired %v times, want once", fired)
	}
	if s.CurrentRound == nil || s.CurrentRound.NumberOfSamples != 7 {
		t.Fatalf("current round %+v, want one prepared from the 7 samples", s.CurrentRound)
	}
	// The round's data is split on the node under outputDir: 7 new samples, 80 % to train.
	train := readNodeFile(t, c.nodeFile(s.CurrentRound.TrainDatasetURL))
	test := readNodeFile(t, c.nodeFile(s.CurrentRound.TestDatasetURL))
	if countLines(train)+countLines(test) != 7 || countLines(train) < 5 {
		t.Errorf("split: %d train and %d test samples, want 7 with about 80 %% to train", countLines(train), countLines(test))
	}

	checkTrainPodCarriesSednasEnvAndComesBackOnce(t, c)

	// Deleting the job deletes its pods (garbage collection by owner reference).
	if err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Delete(t.Context(), cycleJob, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the job's pods gone", func(ctx context.Context) (bool, error) {
		list, err := framework.KubeClient(t).CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: common.LabelWorkerRole})
		return err == nil && len(list.Items) == 0, err
	})
}

// waitDatasetsCounted: the LocalController counts the dataset; a missing
// file is a condition, not a zero.
func waitDatasetsCounted(t *testing.T, c *cycle) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "the datasets' status", func(ctx context.Context) (bool, error) {
		d, err := framework.SednaClient(t).SednaV1alpha1().Datasets(c.ns).Get(ctx, "cycle-data", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		m, err := framework.SednaClient(t).SednaV1alpha1().Datasets(c.ns).Get(ctx, "missing-data", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		missing := apimeta.FindStatusCondition(m.Status.Conditions, "Readable")
		return d.Status.NumberOfSamples == 3 && d.Status.UpdateTime != nil &&
			missing != nil && missing.Status == metav1.ConditionFalse && strings.Contains(missing.Message, "/data/missing/index.txt"), nil
	})
}

// checkTrainPodCarriesSednasEnvAndComesBackOnce: round 1's train pod carries
// what Sedna's train worker reads, and, deleted by hand, comes back once.
func checkTrainPodCarriesSednasEnvAndComesBackOnce(t *testing.T, c *cycle) {
	t.Helper()
	// The stage pod carries what Sedna's train worker reads.
	pod := c.stagePod("train", 1, 1)
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for _, name := range []string{"TRAIN_DATASET_URL", "BASE_MODEL_URL", "MODEL_URL", "WORKER_NAME", "LC_SERVER", "NAMESPACE", "JOB_NAME"} {
		if env[name] == "" {
			t.Errorf("train pod has no %s (env %v)", name, env)
		}
	}

	// A stage pod deleted by hand comes back, once.
	synced := c.ilSynced()
	framework.DeletePodByHand(t, c.ns, pod.Name)
	framework.Eventually(t, 30*time.Second, "the train pod back", func(ctx context.Context) (bool, error) {
		p, err := framework.KubeClient(t).CoreV1().Pods(c.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && p.UID != pod.UID && p.DeletionTimestamp == nil, err
	})
	after := framework.WaitForSyncAfter(t, synced)
	if pods, err := c.stagePods(t.Context(), "train"); err != nil || len(pods) != 1 {
		t.Errorf("%d train pods after one was deleted (%v), want 1", len(pods), err)
	}
	if created := after.ChildrenCreated("Pod") - synced.ChildrenCreated("Pod"); created != 1 {
		var said []string
		for _, e := range framework.Events(t, c.ns, pod.OwnerReferences[0].UID) {
			said = append(said, fmt.Sprintf("%s %s: %s (×%d)", e.LastTimestamp.Format(time.Stamp), e.Reason, e.Message, e.Count))
		}
		t.Errorf("%v pods created for one deleted train pod, want 1; the job's events:\n%s", created, strings.Join(said, "\n"))
	}
}

func TestIncrementalLearningThreeRoundsDeployOnlyBetterModels(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "incrementallearningjob", nil)
	c.createIncremental(5, nil)
	infer := func(ctx context.Context) (*corev1.Pod, error) {
		pods, err := c.stagePods(ctx, "inference")
		if err != nil || len(pods) != 1 {
			return nil, fmt.Errorf("inference pods %v: %v", len(pods), err)
		}
		for _, p := range pods {
			return p, nil
		}
		return nil, nil
	}
	var first *corev1.Pod
	framework.Eventually(t, 60*time.Second, "the inference worker", func(ctx context.Context) (bool, error) {
		p, err := infer(ctx)
		first = p
		return err == nil, nil
	})

	// Round 1: precision better on every class (the trigger derives
	// precision_delta from the two models' precision) → deployed.
	c.addSamples(6)
	c.playTrain(1, nil)
	c.playEval(1, map[string]any{"precision": []float64{0.9, 0.8}}, map[string]any{"precision": []float64{0.7, 0.6}})
	r1 := c.waitForRoundEnd(1)
	if r1.Result != sednav1.RoundDeployed {
		t.Fatalf("round 1 %s (%s), want Deployed", r1.Result, r1.Message)
	}
	if got := readNodeFile(t, c.nodeFile(cycleDeployURL)); got != "model of round 1" {
		t.Errorf("deploy model file holds %q, want round 1's model", got)
	}
	m, err := framework.SednaClient(t).SednaV1alpha1().Models(c.ns).Get(t.Context(), "deploy-model", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Status.UpdateTime == nil || len(m.Status.Metrics) == 0 {
		t.Errorf("deploy model status %+v, want the deployed model's metrics and updateTime", m.Status)
	}

	playRoundTwoWithAnEditAndAWorseModel(t, c)

	// Round 3: better again → deployed, hot: the inference pod is the same.
	c.addSamples(6)
	c.playTrain(3, nil)
	c.playEval(3, map[string]any{"precision_delta": []float64{0.15, 0.2}}, map[string]any{})
	r3 := c.waitForRoundEnd(3)
	if r3.Result != sednav1.RoundDeployed {
		t.Fatalf("round 3 %s (%s), want Deployed", r3.Result, r3.Message)
	}
	if got := readNodeFile(t, c.nodeFile(cycleDeployURL)); got != "model of round 3" {
		t.Errorf("deploy model file holds %q, want round 3's model", got)
	}
	s, err := c.status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, r := range s.History {
		results = append(results, fmt.Sprintf("%d:%s", r.Round, r.Result))
	}
	if want := []string{"1:Deployed", "2:NotDeployed", "3:Deployed"}; !slices.Equal(results, want) {
		t.Errorf("history %v, want %v", results, want)
	}
	if s.DeployedRound != 3 {
		t.Errorf("deployedRound %d, want 3", s.DeployedRound)
	}
	now, err := infer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if now.UID != first.UID {
		t.Errorf("the inference pod was recreated (%s → %s); with hotUpdateEnabled it must be updated in place", first.Name, now.Name)
	}
}

// playRoundTwoWithAnEditAndAWorseModel: a spec edit while the train stage
// runs takes effect at the next stage (the eval pod); the running train pod
// is not replaced. The new model is worse on one class → not deployed.
func playRoundTwoWithAnEditAndAWorseModel(t *testing.T, c *cycle) {
	t.Helper()
	c.addSamples(6)
	c.waitFor(2, sednav1.StageTrain, sednav1.StageStarting, sednav1.StageRunning)
	trainPod := c.stagePod("train", 2, 1)
	var edited *sednav1.IncrementalLearningJob
	framework.Eventually(t, 30*time.Second, "the eval template edited", func(ctx context.Context) (bool, error) {
		j, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Get(ctx, cycleJob, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		j.Spec.EvalSpec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "EDITED", Value: "yes"}}
		edited, err = framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Update(ctx, j, metav1.UpdateOptions{})
		return err == nil, nil
	})
	// The sync that took the edit in says so in observedGeneration; it would
	// have replaced the train pod before writing it.
	framework.Eventually(t, 30*time.Second, "the edit observed", func(ctx context.Context) (bool, error) {
		j, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Get(ctx, cycleJob, metav1.GetOptions{})
		return err == nil && j.Status.ObservedGeneration >= edited.Generation, err
	})
	if p, err := framework.KubeClient(t).CoreV1().Pods(c.ns).Get(t.Context(), trainPod.Name, metav1.GetOptions{}); err != nil || p.UID != trainPod.UID || p.DeletionTimestamp != nil {
		t.Fatalf("the running train pod after the edit: %v; want it kept", err)
	}
	c.playTrain(2, nil)
	c.waitFor(2, sednav1.StageEval, sednav1.StageStarting, sednav1.StageRunning)
	evalPod := c.stagePod("eval", 2, 1)
	if !slices.ContainsFunc(evalPod.Spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == "EDITED" }) {
		t.Errorf("the eval pod after the edit does not carry it: %v", evalPod.Spec.Containers[0].Env)
	}
	c.playEval(2, map[string]any{"precision_delta": []float64{0.2, -0.05}}, map[string]any{})
	r2 := c.waitForRoundEnd(2)
	if r2.Result != sednav1.RoundNotDeployed {
		t.Fatalf("round 2 %s (%s), want NotDeployed", r2.Result, r2.Message)
	}
	if got := readNodeFile(t, c.nodeFile(cycleDeployURL)); got != "model of round 1" {
		t.Errorf("deploy model file holds %q after a worse model, want round 1's still", got)
	}
}

func TestTimerWindowHoldsTheRoundUntilItOpens(t *testing.T) {
	t.Parallel()
	clock := filepath.Join(t.TempDir(), "clock")
	setClock := func(hour int) {
		now := time.Date(2026, 11, 21, hour, 0, 0, 0, time.Local).Format(time.RFC3339)
		if err := os.WriteFile(clock, []byte(now), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setClock(1)
	c := startCycle(t, "incrementallearningjob", nil, "--clock-file", clock)
	c.createIncremental(5, &sednav1.Timer{Start: "02:00", End: "20:00"})
	c.addSamples(10)
	c.waitFor(1, sednav1.StageTrain, sednav1.StageWaiting)
	// No round at 01:00: edge-0 evaluated the trigger, with its 10 samples,
	// and held it for the window.
	c.waitForTriggerCheck(edgecycle.CheckOutsideWindow)
	if s, err := c.status(t.Context()); err != nil || s.Round != 1 || s.State != sednav1.StageWaiting {
		t.Fatalf("after a check at 01:00: %s (%v), want round 1 waiting", describe(s), err)
	}
	if fired := c.triggerChecks(edgecycle.CheckFired); fired != 0 {
		t.Fatalf("the trigger fired %v times outside its window", fired)
	}
	setClock(3)
	c.waitFor(1, sednav1.StageTrain, sednav1.StageReady, sednav1.StageStarting, sednav1.StageRunning)
}

func TestRoundPreparedWhileTheCloudIsAwayStartsOnceWhenItReturns(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "incrementallearningjob", nil)
	c.createIncremental(5, nil)
	c.waitFor(1, sednav1.StageTrain, sednav1.StageWaiting)
	// The version it holds must be the one waiting for round 1's trigger,
	// not an earlier one still on its way when the cloud goes.
	framework.Eventually(t, 30*time.Second, "the LocalController to hold the job waiting for round 1", func(ctx context.Context) (bool, error) {
		job, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Get(ctx, cycleJob, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want, err := desired.Digest(sednav1.IncrementalLearningJobKind.Kind, job)
		if err != nil {
			return false, err
		}
		objs, err := lcDigests(c.lc)
		return objs["IncrementalLearningJob "+c.ns+"/"+cycleJob] == want, err
	})

	// Taken before the kill: everything the restarted GlobalManager does is after it.
	synced := c.ilSynced()
	c.hub.Kill(t)
	c.addSamples(8)
	// Edge autonomy: the LocalController fires the trigger and prepares the
	// round with the cloud away.
	trainFile := c.nodeFile(cycleOutput + "/round-1/data/train.txt")
	framework.Eventually(t, 30*time.Second, "round 1's data prepared on the edge", func(context.Context) (bool, error) {
		_, err := os.Stat(trainFile)
		return err == nil, nil
	})
	c.addSamples(8) // still growing; no second round is prepared
	if err := c.hub.Start(); err != nil {
		t.Fatal(err)
	}
	c.waitFor(1, sednav1.StageTrain, sednav1.StageStarting, sednav1.StageRunning)
	// Round 1 started once: edge-0's reports all applied, and the
	// controller synced on them, one round of 8 samples and one train pod.
	framework.WaitForReportsAcknowledged(t, c.lc)
	framework.WaitForSyncAfter(t, synced)
	s, err := c.status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pods, err := c.stagePods(t.Context(), "train")
	if err != nil || s.Round != 1 || s.CurrentRound == nil || s.CurrentRound.NumberOfSamples != 8 || len(pods) != 1 {
		t.Errorf("after the cloud's return: %s, current round %+v, %d train pods (%v); want round 1 of 8 samples, one train pod",
			describe(s), s.CurrentRound, len(pods), err)
	}
	if fired := c.triggerChecks(edgecycle.CheckFired); fired != 1 {
		t.Errorf("the trigger fired %v times, want once", fired)
	}
	if _, err := os.Stat(c.nodeFile(cycleOutput + "/round-2")); !os.IsNotExist(err) {
		t.Errorf("round 2 prepared too (%v)", err)
	}
}

func TestLocalControllerRestartedMidRoundContinuesTheSameRound(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "incrementallearningjob", nil)
	c.createIncremental(5, nil)
	c.addSamples(6)
	c.waitFor(1, sednav1.StageTrain, sednav1.StageStarting, sednav1.StageRunning)
	pod := c.stagePod("train", 1, 1)
	c.post(pod.Name, "train", "running", nil)
	c.waitFor(1, sednav1.StageTrain, sednav1.StageRunning)

	c.lc.Kill(t)
	c.addSamples(10) // grows while the LocalController is down
	if err := c.lc.Start(); err != nil {
		t.Fatal(err)
	}
	synced := c.ilSynced()
	c.playTrain(1, nil)
	c.waitFor(1, sednav1.StageEval, sednav1.StageReady, sednav1.StageStarting, sednav1.StageRunning)
	// Still round 1, with no second train pod, once the restarted
	// LocalController's reports are all applied and the controller synced
	// on them; the restarted LocalController prepared nothing again.
	framework.WaitForReportsAcknowledged(t, c.lc)
	framework.WaitForSyncAfter(t, synced)
	s, err := c.status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if pods, err := c.stagePods(t.Context(), "train"); err != nil || s.Round != 1 || s.Stage != sednav1.StageEval || len(pods) > 1 {
		t.Errorf("after the restart: %s, %d train pods (%v); want round 1 evaluating, at most the one train pod", describe(s), len(pods), err)
	}
	if fired := c.triggerChecks(edgecycle.CheckFired); fired != 0 {
		t.Errorf("the restarted LocalController fired the trigger %v times for a round it had prepared", fired)
	}
}

func TestFailedStageIsRetriedThenFailsTheJob(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "incrementallearningjob", []string{"--stage-attempts", "2"})
	c.createIncremental(5, nil)
	c.addSamples(6)
	synced := c.ilSynced()
	for attempt := 1; attempt <= 2; attempt++ {
		pod := c.stagePod("train", 1, attempt)
		c.post(pod.Name, "train", "failed", []map[string]any{{"reason": "out of memory"}})
		c.finish(pod, corev1.PodFailed)
	}
	s := c.waitFor(1, sednav1.StageTrain, sednav1.StageFailed)
	if len(s.History) != 1 || s.History[0].Result != sednav1.RoundFailed {
		t.Errorf("history %+v, want round 1 Failed", s.History)
	}
	// No third try, once the failure reports are applied and the controller
	// synced on them and on the pods.
	framework.WaitForReportsAcknowledged(t, c.lc)
	framework.WaitForSyncAfter(t, synced)
	pods, err := c.stagePods(t.Context(), "train")
	if err != nil {
		t.Fatal(err)
	}
	for name := range pods {
		if strings.HasSuffix(name, "-3") {
			t.Errorf("pod %s of a third try", name)
		}
	}
}

// A train pod that ends Succeeded without its worker's report (on edge-0,
// whose LocalController is linked) is said at once on the job, and fails
// its try once --stage-report-grace has passed: the cycle tries again.
func TestStagePodEndedWithoutItsReportFailsTheTryAfterTheGrace(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "incrementallearningjob", []string{"--stage-report-grace", "3s"})
	job := c.createIncremental(5, nil)
	c.addSamples(6)
	pod := c.stagePod("train", 1, 1)
	c.finish(pod, corev1.PodSucceeded)
	framework.Eventually(t, 20*time.Second, "the job to say its pod ended without a report", func(ctx context.Context) (bool, error) {
		j, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(c.ns).Get(ctx, cycleJob, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range j.Status.Conditions {
			if cond.Reason == "PodEndedWithoutReport" && strings.Contains(cond.Message, pod.Name) {
				return true, nil
			}
		}
		return false, nil
	})
	c.stagePod("train", 1, 2)
	framework.Eventually(t, 10*time.Second, "a StageRetry warning saying why",
		warned(t, c.ns, job.UID, "StageRetry", pod.Name+" ended without its worker reporting completed"))
}

// A round whose model is gone when it is to be deployed: edge-0's
// LocalController tries the copy again, with backoff, for its
// --deploy-retry-for, then says why; the round ends Failed with that
// reason and the job goes on to the next round, its inference pod serving.
func TestFailedDeployEndsTheRoundNotTheJob(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "incrementallearningjob", nil, "--deploy-retry-for", "3s")
	job := c.createIncremental(5, nil)
	c.addSamples(6)
	c.playTrain(1, nil)
	if err := os.Remove(c.nodeFile(modelURL(1))); err != nil {
		t.Fatal(err)
	}
	c.playEval(1, map[string]any{"precision": []float64{0.9, 0.8}}, map[string]any{"precision": []float64{0.7, 0.6}})
	r1 := c.waitForRoundEnd(1)
	if r1.Result != sednav1.RoundFailed || !strings.Contains(r1.Message, "no such file") || !strings.Contains(r1.Message, "tries over") {
		t.Errorf("round 1 %s (%s), want Failed saying the model is missing, after several tries", r1.Result, r1.Message)
	}
	framework.Eventually(t, 10*time.Second, "a RoundFailed warning", warned(t, c.ns, job.UID, "RoundFailed", "Deploy failed"))
	s, err := c.status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if s.State == sednav1.StageFailed || s.InferenceWorker == "" {
		t.Errorf("after the failed deploy: %s, inference worker %q; want the job going on, serving", describe(s), s.InferenceWorker)
	}
}

// A lifelong job whose Dataset's index file edge-0 cannot read says so on
// the job (DatasetsReadable=False, the Dataset's reason and message, a
// Warning), not only on the Dataset; once the file is there it says True.
func TestUnreadableDatasetIsSaidOnTheJob(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "lifelonglearningjob", nil)
	c.createDataset("cycle-data", cycleIndex) // no index file yet
	job := lifelongCycleJob()
	created, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(c.ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	readable := func(status corev1.ConditionStatus, reason, says string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			j, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(c.ns).Get(ctx, cycleJob, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := common.FindJobCondition(j.Status.JobConditions, common.ConditionDatasetsReadable)
			return cond != nil && cond.Status == status && cond.Reason == reason && strings.Contains(cond.Message, says), nil
		}
	}
	framework.Eventually(t, 60*time.Second, "the job to say its Dataset is unreadable", allOf(
		readable(corev1.ConditionFalse, "IndexFileUnreadable", "Dataset cycle-data: "),
		warned(t, c.ns, created.UID, "IndexFileUnreadable", "cycle-data"),
	))
	c.addSamples(1)
	framework.Eventually(t, 60*time.Second, "the job to say its Dataset is readable", readable(corev1.ConditionTrue, "Readable", ""))
}

// lifelongCycleJob is the cycle tests' lifelong job on the Dataset
// cycle-data, its train trigger at 5 new samples.
func lifelongCycleJob() *sednav1.LifelongLearningJob {
	return &sednav1.LifelongLearningJob{
		ObjectMeta: metav1.ObjectMeta{Name: cycleJob},
		Spec: sednav1.LifelongLearningJobSpec{
			Dataset:    sednav1.CycleDataset{Name: "cycle-data", TrainProb: 0.8},
			TrainSpec:  sednav1.TrainSpec{Template: stageTemplate("train"), Trigger: trainTrigger(5, nil)},
			EvalSpec:   sednav1.LLWorkerSpec{Template: stageTemplate("eval")},
			DeploySpec: sednav1.LLWorkerSpec{Template: stageTemplate("infer")},
			OutputDir:  cycleOutput,
		},
	}
}

func TestLifelongLearningRoundFillsTheKnowledgeBase(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "lifelonglearningjob", nil)
	c.createDataset("cycle-data", cycleIndex)
	job := lifelongCycleJob()
	if _, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(c.ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var before map[string]*corev1.Pod
	framework.Eventually(t, 60*time.Second, "the inference worker", func(ctx context.Context) (bool, error) {
		var err error
		before, err = c.stagePods(ctx, "inference")
		return len(before) == 1, err
	})
	c.addSamples(6)
	c.playTrain(1, map[string]any{"modelID": "task-0", "classes": []string{"helmet", "person"},
		"metrics": map[string]any{"precision": 0.83}})
	c.playEval(1, map[string]any{"precision": 0.83}, map[string]any{})
	r1 := c.waitForRoundEnd(1)
	if r1.Result != sednav1.RoundDeployed {
		t.Fatalf("round 1 %s (%s), want Deployed", r1.Result, r1.Message)
	}
	j, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(c.ns).Get(t.Context(), cycleJob, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kb := j.Status.KnowledgeBase
	if kb.AIModels.NumberOfAIModels != 1 || len(kb.AIModels.ListOfAIModels) != 1 || kb.AIModels.ListOfAIModels[0].ModelID != "task-0" ||
		!slices.Equal(kb.AIClasses.ListOfAIClasses, []string{"helmet", "person"}) {
		t.Errorf("knowledge base %+v, want the round's model and classes", kb)
	}
	// The deploy stage replaced the inference worker with one serving the new knowledge base.
	framework.Eventually(t, 30*time.Second, "a new inference worker", func(ctx context.Context) (bool, error) {
		after, err := c.stagePods(ctx, "inference")
		if err != nil || len(after) != 1 {
			return false, err
		}
		for name := range after {
			_, old := before[name]
			return !old, nil
		}
		return false, nil
	})
}
