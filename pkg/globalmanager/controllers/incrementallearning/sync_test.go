package incrementallearning

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle/cycletest"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

const (
	ns       = cycletest.Namespace
	jobName  = "helmet-detection-demo"
	node     = "edge-0"
	kindName = edgeproto.OwnerIncrementalLearningJob
)

var testConfig = Config{StageAttempts: 3, HistoryLimit: 10}

type fixture = cycletest.Fixture[*sednav1.IncrementalLearningJob]

func exampleJob(t *testing.T) *sednav1.IncrementalLearningJob {
	t.Helper()
	data, err := os.ReadFile("../../../../examples/incrementallearningjob/10-incrementallearningjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := &sednav1.IncrementalLearningJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace, job.UID, job.Generation = ns, "job-uid", 1
	return job
}

func referencedObjects() []runtime.Object {
	return []runtime.Object{
		&sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "incremental-dataset", Namespace: ns},
			Spec: sednav1.DatasetSpec{URL: "/data/helmet_detection/train_data/train_data.txt", Format: "txt", NodeName: node}},
		&sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: "initial-model", Namespace: ns},
			Spec: sednav1.ModelSpec{URL: "/models/base_model", Format: "ckpt"}},
		&sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: "deploy-model", Namespace: ns},
			Spec: sednav1.ModelSpec{URL: "/models/deploy_model/saved_model.pb", Format: "pb"}},
	}
}

func build(config Config) cycletest.Build[*sednav1.IncrementalLearningJob] {
	return func(ctx context.Context, d kinds.Deps) (*Controller, error) { return NewController(ctx, d, config) }
}

func newFixture(t *testing.T, job *sednav1.IncrementalLearningJob, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, testConfig, job, objs...)
}

func newFixtureWith(t *testing.T, config Config, job *sednav1.IncrementalLearningJob, objs ...runtime.Object) *fixture {
	t.Helper()
	if objs == nil {
		objs = referencedObjects()
	}
	return cycletest.New(t, build(config), append(objs, job)...)
}

func jobOf(t *testing.T, f *fixture) *sednav1.IncrementalLearningJob {
	t.Helper()
	job, err := f.Sedna.SednaV1alpha1().IncrementalLearningJobs(ns).Get(t.Context(), jobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// Names of the workers of the example job.
var (
	train11 = jobName + "-train-1-1"
	eval11  = jobName + "-eval-1-1"
	deploy0 = jobName + "-deploy-0"
)

const (
	newModel  = "/output/round-1/train/model.pb"
	trainDone = `{"format":"pb","url":"` + newModel + `","metrics":{"loss":0.2}}`
	evalNew   = `{"url":"` + newModel + `","metrics":{"precision":[0.9,0.8],"recall":0.7}}`
	evalOld   = `{"url":"/models/base_model","metrics":{"precision":[0.7,0.6],"recall":0.6}}`
	evalWorse = `{"url":"` + newModel + `","metrics":{"precision":[0.75,0.6],"recall":0.6}}`
)

// report sends the next report of the dataset's node.
type reporter struct{ id uint64 }

func (r *reporter) send(t *testing.T, f *fixture, info edgeproto.WorkerInfo) {
	t.Helper()
	r.id++
	f.Report(t, node, r.id, info)
}

func stateOf(job *sednav1.IncrementalLearningJob) string {
	s := job.Status
	return strings.Join([]string{string(s.Stage), string(s.State), itoa(s.Round), itoa(s.Attempt)}, "/")
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// toEval runs a new job through round 1's train stage: the job is at Eval/Ready.
func toEval(t *testing.T, f *fixture, r *reporter) *fixture {
	t.Helper()
	f = toTrain(t, f, r)
	r.send(t, f, cycletest.Worker(kindName, jobName, train11, edgeproto.StageTrain, edgeproto.WorkerCompleted, trainDone))
	return f.Next(t)
}

// toTrain runs a new job to round 1's train try 1, its pod made: the
// trigger fired and the sync that followed.
func toTrain(t *testing.T, f *fixture, r *reporter) *fixture {
	t.Helper()
	f.Sync(t, jobName)
	f = f.Next(t)
	r.send(t, f, cycletest.Trigger(kindName, jobName, 1, 600))
	f = f.Next(t)
	f.Sync(t, jobName)
	return f
}

// toDeploy runs a new job to Deploy/Ready with an evaluation that fires the trigger.
func toDeploy(t *testing.T, f *fixture, r *reporter) *fixture {
	t.Helper()
	f = toEval(t, f, r)
	f.Sync(t, jobName)
	r.send(t, f, cycletest.Worker(kindName, jobName, eval11, edgeproto.StageEval, edgeproto.WorkerCompleted, evalNew, evalOld))
	return f.Next(t)
}

func deployed(round int32) edgeproto.WorkerInfo {
	info := cycletest.Worker(kindName, jobName, edgeproto.LocalControllerWorker, edgeproto.StageDeploy, edgeproto.WorkerCompleted,
		`{"url":"/models/deploy_model/saved_model.pb","format":"pb"}`)
	info.OwnerInfo = []byte(`{"round":` + itoa(round) + `}`)
	return info
}

func TestNewJobStartsRoundOneWithItsInferenceWorker(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, job)
	f.Sync(t, jobName)

	got := jobOf(t, f).Status
	if got.Round != 1 || got.Stage != sednav1.StageTrain || got.State != sednav1.StageWaiting || got.Attempt != 0 ||
		got.InferenceWorker != deploy0 || got.StartTime == nil || got.ObservedGeneration != 1 {
		t.Errorf("status after the first sync: %+v", got)
	}
	if len(got.Conditions) != 1 || got.Conditions[0].Stage != sednav1.StageTrain || got.Conditions[0].Type != sednav1.StageWaiting ||
		got.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("conditions %+v, want [Train Waiting True]", got.Conditions)
	}
	if diff := cmp.Diff([]string{"create pods " + deploy0}, f.Writes()); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
	pod := f.Pod(t, deploy0)
	want := map[string]string{
		"NAMESPACE": ns, "JOB_NAME": jobName, "WORKER_NAME": deploy0, "LC_SERVER": "http://$(NEREID_NODE_IP):9100",
		"LOG_LEVEL": "INFO", "DATA_PATH_PREFIX": "/home/data",
		"MODEL_URL": "/home/data/models/deploy_model/saved_model.pb", "MODEL_NAME": "deploy-model", "MODEL_HOT_UPDATE": "true",
		// Sedna's ModelLoadingThread reads these two; without them it never
		// reloads (Sedna's setModelHotUpdateEnv).
		"MODEL_POLL_PERIOD_SECONDS": "60", "MODEL_HOT_UPDATE_CONFIG": "/model-hot-update/model_config.json",
		"HEM_NAME": "IBT", "HEM_PARAMETERS": `{"threshold_box":"0.9","threshold_img":"0.9"}`,
		// The user's own variables stay.
		"input_shape": "352,640", "video_url": "file://video/video.mp4", "HE_SAVED_URL": "/he_saved_url",
	}
	if diff := cmp.Diff(want, cycletest.Env(pod)); diff != "" {
		t.Errorf("inference worker env (-want,+got):\n%s", diff)
	}
	if pod.Labels[common.LabelWorkerRole] != "inference" || pod.Spec.NodeName != node {
		t.Errorf("inference pod role %q on node %q", pod.Labels[common.LabelWorkerRole], pod.Spec.NodeName)
	}
	// The hot update folder, Sedna's, where the LocalController puts the file.
	var hot []string
	for _, v := range pod.Spec.Volumes {
		if hp := v.HostPath; hp != nil && hp.Type != nil && *hp.Type == corev1.HostPathDirectoryOrCreate {
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				if m.Name == v.Name {
					hot = append(hot, hp.Path+" at "+m.MountPath)
				}
			}
		}
	}
	if diff := cmp.Diff([]string{"/var/lib/sedna/model-hot-update/" + ns + "/incrementallearningjob/" + jobName + " at /model-hot-update"}, hot); diff != "" {
		t.Errorf("hot update mount (-want,+got):\n%s", diff)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.Kind != "IncrementalLearningJob" || ref.UID != job.UID {
		t.Errorf("controller reference %+v", ref)
	}
	if ev := f.Events(); !containsPrefix(ev, "Normal Started") {
		t.Errorf("events %q, want a Started event", ev)
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

func TestRoundTrainsWhenTheTriggerFiresAndRunsItsTrainPod(t *testing.T) {
	f := newFixture(t, exampleJob(t))
	f.Sync(t, jobName)
	f = f.Next(t)
	r := &reporter{}
	r.send(t, f, cycletest.Trigger(kindName, jobName, 1, 600))

	job := jobOf(t, f)
	if stateOf(job) != "Train/Ready/1/1" {
		t.Fatalf("after the trigger: %s", stateOf(job))
	}
	wantRound := &sednav1.RoundStatus{Round: 1, StartTime: ptrTime("2026-01-02T03:04:05Z"), NumberOfSamples: 600,
		TrainDatasetURL: "/output/round-1/data/train.txt", TestDatasetURL: "/output/round-1/data/test.txt"}
	if diff := cmp.Diff(wantRound, job.Status.CurrentRound); diff != "" {
		t.Errorf("currentRound (-want,+got):\n%s", diff)
	}
	if got := conditionTypes(job); got != "Train/Waiting Train/Ready" {
		t.Errorf("conditions %s, want Train/Waiting Train/Ready", got)
	}

	f = f.Next(t)
	f.Sync(t, jobName)
	if diff := cmp.Diff([]string{"create pods " + train11}, f.Writes()); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
	if got := stateOf(jobOf(t, f)); got != "Train/Starting/1/1" {
		t.Errorf("after the pod was created: %s", got)
	}
	if ev := f.Events(); !containsPrefix(ev, "Normal StageStarting") {
		t.Errorf("events %q, want StageStarting", ev)
	}
	pod := f.Pod(t, train11)
	want := map[string]string{
		"NAMESPACE": ns, "JOB_NAME": jobName, "WORKER_NAME": train11, "LC_SERVER": "http://$(NEREID_NODE_IP):9100",
		"LOG_LEVEL": "INFO", "DATA_PATH_PREFIX": "/home/data",
		"ORIGINAL_DATASET_URL": "/home/data/data/helmet_detection/train_data/train_data.txt",
		"TRAIN_DATASET_URL":    "/home/data/output/round-1/data/train.txt",
		"BASE_MODEL_URL":       "/home/data/models/base_model",
		"MODEL_URL":            "/home/data/output/round-1/train",
		"OUTPUT_URL":           "/home/data/output/round-1/train",
		"batch_size":           "32", "epochs": "1", "input_shape": "352,640", "class_names": "person,helmet,helmet-on,helmet-off",
		"nms_threshold": "0.4", "obj_threshold": "0.3",
	}
	if diff := cmp.Diff(want, cycletest.Env(pod)); diff != "" {
		t.Errorf("train worker env (-want,+got):\n%s", diff)
	}
	if pod.Spec.NodeName != node || pod.Labels[common.LabelWorkerRole] != "train" || pod.Labels[learningcycle.LabelRound] != "1" {
		t.Errorf("train pod on node %q with labels %v", pod.Spec.NodeName, pod.Labels)
	}
	var mounts []string
	for _, v := range pod.Spec.Volumes {
		mounts = append(mounts, v.HostPath.Path)
	}
	wantMounts := []string{"/data/helmet_detection/train_data", "/output/round-1/data", "/output/round-1/train", "/models/base_model"}
	if diff := cmp.Diff(wantMounts, mounts); diff != "" {
		t.Errorf("host paths (-want,+got):\n%s", diff)
	}

	f = f.Next(t)
	f.SetPodPhase(t, train11, corev1.PodRunning)
	f = f.Next(t)
	f.Sync(t, jobName)
	job = jobOf(t, f)
	if stateOf(job) != "Train/Running/1/1" || job.Status.Active != 2 {
		t.Errorf("with the pod running: %s, active %d", stateOf(job), job.Status.Active)
	}
	if w := f.Writes(); len(w) != 0 {
		t.Errorf("writes with every pod there: %v", w)
	}
}

func ptrTime(s string) *metav1.Time {
	var t metav1.Time
	if err := t.UnmarshalQueryParameter(s); err != nil {
		panic(err)
	}
	return &t
}

func conditionTypes(job *sednav1.IncrementalLearningJob) string {
	var out []string
	for _, c := range job.Status.Conditions {
		out = append(out, string(c.Stage)+"/"+string(c.Type))
	}
	return strings.Join(out, " ")
}

func TestStaleReportsDoNotMoveTheCycle(t *testing.T) {
	wrongRound := cycletest.Trigger(kindName, jobName, 2, 600)
	cases := map[string]struct {
		info        edgeproto.WorkerInfo
		id          uint64
		wantState   string
		wantNodes   bool
		wantRefused bool
	}{
		"a trigger for another round": {info: wrongRound, id: 10, wantState: "Train/Starting/1/1", wantNodes: true},
		"a second trigger for this round": {info: cycletest.Trigger(kindName, jobName, 1, 700), id: 10,
			wantState: "Train/Starting/1/1", wantNodes: true},
		"a worker of another try, refused for good": {info: cycletest.Worker(kindName, jobName, jobName+"-train-1-2", edgeproto.StageTrain, edgeproto.WorkerCompleted, trainDone),
			id: 10, wantState: "Train/Starting/1/1", wantRefused: true},
		"the right worker with the wrong stage": {info: cycletest.Worker(kindName, jobName, train11, edgeproto.StageEval, edgeproto.WorkerCompleted, evalNew),
			id: 10, wantState: "Train/Starting/1/1", wantNodes: true},
		"a report id already applied": {info: cycletest.Worker(kindName, jobName, train11, edgeproto.StageTrain, edgeproto.WorkerCompleted, trainDone),
			id: 1, wantState: "Train/Starting/1/1"},
		"the current worker (control)": {info: cycletest.Worker(kindName, jobName, train11, edgeproto.StageTrain, edgeproto.WorkerRunning),
			id: 10, wantState: "Train/Running/1/1", wantNodes: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, exampleJob(t)).FirstTrain(t, node, kindName, jobName, 600)
			before := jobOf(t, f).Status
			f = f.Next(t)

			err := f.Apply(t, node, tc.id, tc.info)
			if _, refused := edgeproto.IsRefused(err); refused != tc.wantRefused || (err != nil && !refused) {
				t.Fatalf("ApplyReport: %v; want refused: %v", err, tc.wantRefused)
			}
			after := jobOf(t, f).Status
			if got := stateOf(jobOf(t, f)); got != tc.wantState {
				t.Errorf("state %s, want %s", got, tc.wantState)
			}
			if writes := f.StatusWrites(); (writes == 1) != tc.wantNodes {
				t.Errorf("%d status writes; want a write: %v", writes, tc.wantNodes)
			}
			if !tc.wantNodes {
				return
			}
			if after.EdgeNodes[0].LastReportID != int64(tc.id) {
				t.Errorf("edgeNodes %+v, want the report recorded", after.EdgeNodes)
			}
			if tc.wantState == "Train/Starting/1/1" && !cmp.Equal(before.CurrentRound, after.CurrentRound) {
				t.Errorf("an ignored report changed the round (-before,+after):\n%s", cmp.Diff(before.CurrentRound, after.CurrentRound))
			}
		})
	}
}

func TestTrainCompletedStartsTheEvalStageWithBothModels(t *testing.T) {
	f := toEval(t, newFixture(t, exampleJob(t)), &reporter{})
	job := jobOf(t, f)
	if stateOf(job) != "Eval/Ready/1/1" {
		t.Fatalf("after the train worker completed: %s", stateOf(job))
	}
	if diff := cmp.Diff([]sednav1.RoundModel{{URL: newModel, Format: "pb"}}, job.Status.CurrentRound.Models); diff != "" {
		t.Errorf("round models (-want,+got):\n%s", diff)
	}
	if got := conditionTypes(job); got != "Train/Waiting Train/Ready Train/Starting Train/Completed Eval/Ready" {
		t.Errorf("conditions %s", got)
	}
	f.Sync(t, jobName)
	// The train pod has not exited yet: it reported its work and exits by
	// itself, its logs kept.
	if diff := cmp.Diff([]string{"create pods " + eval11}, f.Writes()); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
	env := cycletest.Env(f.Pod(t, eval11))
	want := map[string]string{
		"ORIGINAL_DATASET_URL": "/home/data/data/helmet_detection/train_data/train_data.txt",
		"TEST_DATASET_URL":     "/home/data/output/round-1/data/test.txt",
		"MODEL_URLS":           "/home/data/output/round-1/train/model.pb;/home/data/models/base_model",
		"MODEL_URL":            "/home/data/output/round-1/train/model.pb",
		"OUTPUT_URL":           "/home/data/output/round-1/eval",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("eval env %s = %q, want %q", k, env[k], v)
		}
	}
}

func TestTrainCompletedWithoutAModelIsAFailedTry(t *testing.T) {
	f := newFixture(t, exampleJob(t))
	r := &reporter{}
	f.Sync(t, jobName)
	f = f.Next(t)
	r.send(t, f, cycletest.Trigger(kindName, jobName, 1, 600))
	r.send(t, f, cycletest.Worker(kindName, jobName, train11, edgeproto.StageTrain, edgeproto.WorkerCompleted, `{"format":"pb"}`))
	job := jobOf(t, f)
	if stateOf(job) != "Train/Ready/1/2" {
		t.Errorf("after a completed report without a model: %s", stateOf(job))
	}
	last := job.Status.Conditions[len(job.Status.Conditions)-2]
	if last.Type != sednav1.StageFailed || !strings.Contains(last.Message, "train worker reported no model") {
		t.Errorf("failed try condition %+v", last)
	}
}

func TestEvaluationDecidesTheDeploy(t *testing.T) {
	cases := map[string]struct {
		results     []string
		wantState   string
		wantHistory []string
		wantMessage string
	}{
		"better for every class: deploy": {
			results: []string{evalNew, evalOld}, wantState: "Deploy/Ready/1/1",
			wantMessage: "precision_delta [0.2,0.2] > 0.1 for every element: deploying",
		},
		"worse for one class: next round": {
			results: []string{evalWorse, evalOld}, wantState: "Train/Waiting/2/0",
			wantHistory: []string{"1 NotDeployed precision_delta [0.05,0] is not > 0.1 for element 0: not deploying"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &reporter{}
			f := toEval(t, newFixture(t, exampleJob(t)), r)
			f.Sync(t, jobName)
			r.send(t, f, cycletest.Worker(kindName, jobName, eval11, edgeproto.StageEval, edgeproto.WorkerCompleted, tc.results...))
			job := jobOf(t, f)
			if got := stateOf(job); got != tc.wantState {
				t.Errorf("state %s, want %s", got, tc.wantState)
			}
			if diff := cmp.Diff(tc.wantHistory, history(job)); diff != "" {
				t.Errorf("history (-want,+got):\n%s", diff)
			}
			if tc.wantMessage != "" {
				if job.Status.CurrentRound.Message != tc.wantMessage {
					t.Errorf("round message %q, want %q", job.Status.CurrentRound.Message, tc.wantMessage)
				}
				wantMetrics := []sednav1.Metric{{Key: "precision", Value: "[0.9,0.8]"}, {Key: "recall", Value: "0.7"}}
				if diff := cmp.Diff(wantMetrics, job.Status.CurrentRound.Models[0].Metrics); diff != "" {
					t.Errorf("new model's metrics (-want,+got):\n%s", diff)
				}
				return
			}
			if job.Status.CurrentRound != nil || conditionTypes(job) != "Train/Waiting" {
				t.Errorf("round 2 starts afresh: currentRound %+v, conditions %s", job.Status.CurrentRound, conditionTypes(job))
			}
			if ev := f.Events(); !containsPrefix(ev, "Normal RoundNotDeployed Round 1: precision_delta") {
				t.Errorf("events %q", ev)
			}
		})
	}
}

func history(job *sednav1.IncrementalLearningJob) []string {
	var out []string
	for _, h := range job.Status.History {
		out = append(out, itoa(h.Round)+" "+h.Result+" "+h.Message)
	}
	return out
}

func TestEdgeDeployUpdatesTheModelAndTheInferenceWorker(t *testing.T) {
	cases := map[string]struct {
		hot             bool
		wantWorker      string
		wantWrites      []string
		wantWorkerAfter string
	}{
		"hot update: the running worker reloads the file": {
			hot: true, wantWorker: deploy0, wantWrites: nil,
		},
		"no hot update: a new worker replaces it": {
			hot: false, wantWorker: jobName + "-deploy-1",
			wantWrites: []string{"create pods " + jobName + "-deploy-1", "delete pods " + deploy0},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := exampleJob(t)
			job.Spec.DeploySpec.Model.HotUpdateEnabled = tc.hot
			r := &reporter{}
			f := toDeploy(t, newFixture(t, job), r)
			f.Sync(t, jobName)
			if w := f.Writes(); len(w) != 0 {
				t.Errorf("writes while the edge deploys: %v", w)
			}
			f = f.Next(t)
			f.Clock.SetTime(f.Clock.Now().Add(time.Minute))
			r.send(t, f, deployed(1))

			got := jobOf(t, f)
			if stateOf(got) != "Train/Waiting/2/0" || got.Status.DeployedRound != 1 || got.Status.InferenceWorker != tc.wantWorker {
				t.Errorf("after the deploy: %s, deployedRound %d, inferenceWorker %s", stateOf(got), got.Status.DeployedRound, got.Status.InferenceWorker)
			}
			if diff := cmp.Diff([]string{"1 Deployed precision_delta [0.2,0.2] > 0.1 for every element: deploying"}, history(got)); diff != "" {
				t.Errorf("history (-want,+got):\n%s", diff)
			}
			model, err := f.Sedna.SednaV1alpha1().Models(ns).Get(t.Context(), "deploy-model", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantMetrics := []sednav1.Metric{{Key: "precision", Value: "[0.9,0.8]"}, {Key: "recall", Value: "0.7"}}
			if diff := cmp.Diff(wantMetrics, model.Status.Metrics); diff != "" {
				t.Errorf("deploy Model metrics (-want,+got):\n%s", diff)
			}
			if model.Status.UpdateTime == nil || !model.Status.UpdateTime.Time.Equal(f.Clock.Now()) {
				t.Errorf("deploy Model updateTime %v, want %v", model.Status.UpdateTime, f.Clock.Now())
			}
			if ev := f.Events(); !containsPrefix(ev, "Normal RoundDeployed Round 1") {
				t.Errorf("events %q", ev)
			}

			f = f.Next(t)
			f.Sync(t, jobName)
			if diff := cmp.Diff(tc.wantWrites, f.Writes()); diff != "" {
				t.Errorf("writes after the deploy (-want,+got):\n%s", diff)
			}
			if tc.hot {
				// Sedna's ModelLoadingThread reports once it has loaded the
				// model the hot update file names.
				f = f.Next(t)
				r.send(t, f, cycletest.Worker(kindName, jobName, deploy0, edgeproto.StageDeploy, edgeproto.WorkerCompleted))
				if ev := f.Events(); !containsPrefix(ev, "Normal ModelHotUpdated Inference worker "+deploy0+" loaded the deployed model (round 1)") {
					t.Errorf("events after the worker's hot update %q", ev)
				}
			}
			if !tc.hot {
				// The new worker serves the file the edge just replaced; the
				// next round trains from and compares with it.
				if env := cycletest.Env(f.Pod(t, tc.wantWorker)); env["MODEL_URL"] != "/home/data/models/deploy_model/saved_model.pb" || env["MODEL_HOT_UPDATE"] != "false" {
					t.Errorf("new inference worker env %v", env)
				}
			}
		})
	}
}

func TestDeployReportOfAnotherRoundIsIgnored(t *testing.T) {
	r := &reporter{}
	f := toDeploy(t, newFixture(t, exampleJob(t)), r)
	r.send(t, f, deployed(2))
	if got := stateOf(jobOf(t, f)); got != "Deploy/Ready/1/1" {
		t.Errorf("after a deploy report of round 2: %s", got)
	}
}

func TestFailedTriesAreRetriedThenTheJobFails(t *testing.T) {
	f := newFixtureWith(t, Config{StageAttempts: 2}, exampleJob(t))
	r := &reporter{}
	f = toTrain(t, f, r)

	// Try 1: the pod fails.
	f = f.Next(t)
	f.SetPodPhase(t, train11, corev1.PodFailed)
	f = f.Next(t)
	f.Sync(t, jobName)
	job := jobOf(t, f)
	if stateOf(job) != "Train/Starting/1/2" {
		t.Errorf("after try 1 failed: %s", stateOf(job))
	}
	if diff := cmp.Diff([]string{"create pods " + jobName + "-train-1-2"}, f.Writes()); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
	if ev := f.Events(); !containsPrefix(ev, "Warning StageRetry Round 1: Train try 1 of 2 failed (pod "+train11+" failed)") {
		t.Errorf("events %q", ev)
	}

	// Try 2: the worker reports a failure.
	f = f.Next(t)
	failed := cycletest.Worker(kindName, jobName, jobName+"-train-1-2", edgeproto.StageTrain, edgeproto.WorkerFailed)
	failed.OwnerInfo = []byte(`{"reason":"out of memory"}`)
	r.send(t, f, failed)
	job = jobOf(t, f)
	if job.Status.State != sednav1.StageFailed || job.Status.CompletionTime == nil || job.Status.CurrentRound != nil {
		t.Errorf("after the last try failed: %s, completionTime %v, currentRound %+v", stateOf(job), job.Status.CompletionTime, job.Status.CurrentRound)
	}
	if diff := cmp.Diff([]string{"1 Failed Train failed after 2 tries: out of memory"}, history(job)); diff != "" {
		t.Errorf("history (-want,+got):\n%s", diff)
	}
	if ev := f.Events(); !containsPrefix(ev, "Warning JobFailed Round 1: Train failed after 2 tries: out of memory") {
		t.Errorf("events %q", ev)
	}

	// The finished job creates nothing: the inference worker deleted by hand
	// stays deleted, the last try's pod is deleted, no stage pod comes.
	f = f.Next(t)
	f.DeletePod(t, deploy0)
	f = f.Next(t)
	f.Sync(t, jobName)
	if diff := cmp.Diff([]string{"delete pods " + jobName + "-train-1-2"}, f.Writes()); diff != "" {
		t.Errorf("writes for a finished job (-want,+got):\n%s", diff)
	}
	r.send(t, f, cycletest.Trigger(kindName, jobName, 1, 600))
	if got := jobOf(t, f).Status.State; got != sednav1.StageFailed {
		t.Errorf("a trigger moved a failed job to %s", got)
	}
}

func TestHistoryKeepsTheLastRounds(t *testing.T) {
	f := newFixtureWith(t, Config{HistoryLimit: 2}, exampleJob(t))
	r := &reporter{}
	f.Sync(t, jobName)
	for round := int32(1); round <= 3; round++ {
		f = f.Next(t)
		r.send(t, f, cycletest.Trigger(kindName, jobName, round, 600))
		name := func(stage string) string { return jobName + "-" + stage + "-" + itoa(round) + "-1" }
		r.send(t, f, cycletest.Worker(kindName, jobName, name("train"), edgeproto.StageTrain, edgeproto.WorkerCompleted, trainDone))
		r.send(t, f, cycletest.Worker(kindName, jobName, name("eval"), edgeproto.StageEval, edgeproto.WorkerCompleted, evalWorse, evalOld))
	}
	job := jobOf(t, f)
	var rounds []int32
	for _, h := range job.Status.History {
		rounds = append(rounds, h.Round)
	}
	if diff := cmp.Diff([]int32{2, 3}, rounds); diff != "" || job.Status.Round != 4 {
		t.Errorf("history rounds (-want,+got):\n%s; round %d", diff, job.Status.Round)
	}
}

func TestDeletedWorkerPodIsRecreatedOnce(t *testing.T) {
	for _, pod := range []string{train11, deploy0} {
		t.Run(pod, func(t *testing.T) {
			f := newFixture(t, exampleJob(t))
			f.Sync(t, jobName)
			f = f.Next(t)
			f.Report(t, node, 1, cycletest.Trigger(kindName, jobName, 1, 600))
			f = f.Next(t)
			f.Sync(t, jobName)
			f = f.Next(t)
			f.SetPodPhase(t, train11, corev1.PodRunning)
			f = f.Next(t)
			f.Sync(t, jobName)

			f.DeletePod(t, pod)
			f = f.Next(t)
			f.Sync(t, jobName)
			// The cache has not seen the new pod yet: the second sync must not create it again.
			f.Sync(t, jobName)
			if diff := cmp.Diff([]string{"create pods " + pod}, f.Writes()); diff != "" {
				t.Errorf("writes (-want,+got):\n%s", diff)
			}
			if got := stateOf(jobOf(t, f)); got != "Train/Running/1/1" {
				t.Errorf("state %s: a recreated pod is the same try", got)
			}
		})
	}
}

func TestMissingReferenceCreatesNothingAndSaysWhich(t *testing.T) {
	objs := referencedObjects()
	f := newFixture(t, exampleJob(t), objs[0], objs[2]) // no initial model
	f.Sync(t, jobName)
	if w := f.Writes(); len(w) != 0 {
		t.Errorf("writes while a model is missing: %v", w)
	}
	if ev := f.Events(); !containsPrefix(ev, "Warning MissingReference waiting for Model initial-model") {
		t.Errorf("events %q", ev)
	}
	job := jobOf(t, f)
	if got := stateOf(job); got != "Train/Waiting/1/0" {
		t.Errorf("state %s: the cycle starts regardless", got)
	}
	// No pod is made, so none is named as the inference worker.
	if job.Status.InferenceWorker != "" {
		t.Errorf("status.inferenceWorker %q while blocked, want none: no such pod exists", job.Status.InferenceWorker)
	}
	// Said in status, as the other kinds say it, and told once: a later sync
	// that finds it still missing records no second warning.
	if c := common.FindJobCondition(job.Status.JobConditions, common.ConditionReferencesResolved); c == nil || c.Status != corev1.ConditionFalse ||
		!strings.Contains(c.Message, "Model initial-model") {
		t.Errorf("jobConditions %+v, want ReferencesResolved False naming the Model", job.Status.JobConditions)
	}
	f = f.Next(t)
	f.Sync(t, jobName)
	if ev := f.Events(); containsPrefix(ev, "Warning MissingReference") {
		t.Errorf("the warning again at the next sync: %q", ev)
	}
}

func TestSpecEditTakesEffectAtTheNextStage(t *testing.T) {
	r := &reporter{}
	f := newFixture(t, exampleJob(t))
	f.Sync(t, jobName)
	f = f.Next(t)
	r.send(t, f, cycletest.Trigger(kindName, jobName, 1, 600))
	f = f.Next(t)
	f.Sync(t, jobName)

	job := jobOf(t, f)
	job.Generation = 2
	job.Spec.TrainSpec.Template.Spec.Containers[0].Image = "train:v2"
	job.Spec.EvalSpec.Template.Spec.Containers[0].Image = "eval:v2"
	if _, err := f.Sedna.SednaV1alpha1().IncrementalLearningJobs(ns).Update(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f = f.Next(t)
	f.Sync(t, jobName)
	if w := f.Writes(); len(w) != 0 {
		t.Errorf("a spec edit replaced running pods: %v", w)
	}
	if got := jobOf(t, f).Status.ObservedGeneration; got != 2 {
		t.Errorf("observedGeneration %d, want 2", got)
	}
	r.send(t, f, cycletest.Worker(kindName, jobName, train11, edgeproto.StageTrain, edgeproto.WorkerCompleted, trainDone))
	f = f.Next(t)
	f.Sync(t, jobName)
	if img := f.Pod(t, eval11).Spec.Containers[0].Image; img != "eval:v2" {
		t.Errorf("the next stage's pod runs %q, want the edited eval:v2", img)
	}
}

func TestReplacedTryPodIsDeletedAndCompletedOnesExitByThemselves(t *testing.T) {
	r := &reporter{}
	f := newFixture(t, exampleJob(t))
	f.Sync(t, jobName)
	f = f.Next(t)
	r.send(t, f, cycletest.Trigger(kindName, jobName, 1, 600))
	f = f.Next(t)
	f.Sync(t, jobName)
	f = f.Next(t)
	f.SetPodPhase(t, train11, corev1.PodRunning)
	// The worker says it failed; its container restarts in the same pod.
	r.send(t, f, cycletest.Worker(kindName, jobName, train11, edgeproto.StageTrain, edgeproto.WorkerFailed, `{"reason":"disk full"}`))
	f = f.Next(t)
	f.Sync(t, jobName)
	train12 := jobName + "-train-1-2"
	if diff := cmp.Diff([]string{"create pods " + train12, "delete pods " + train11}, f.Writes()); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
	if c := jobOf(t, f).Status.Conditions; !strings.Contains(c[len(c)-3].Message, "try 1 of 3: disk full") {
		t.Errorf("conditions %+v, want the failed try's reason", c)
	}

	// Try 2 completes and its pod is still running: it is not deleted.
	f = f.Next(t)
	f.SetPodPhase(t, train12, corev1.PodRunning)
	r.send(t, f, cycletest.Worker(kindName, jobName, train12, edgeproto.StageTrain, edgeproto.WorkerCompleted, trainDone))
	f = f.Next(t)
	f.Sync(t, jobName)
	if diff := cmp.Diff([]string{"create pods " + eval11}, f.Writes()); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
}

func TestStagePodsOfRoundsBeforeThePreviousOneAreDeleted(t *testing.T) {
	r := &reporter{}
	f := newFixture(t, exampleJob(t))
	f.Sync(t, jobName)
	for round := int32(1); round <= 3; round++ {
		name := func(stage string) string { return jobName + "-" + stage + "-" + itoa(round) + "-1" }
		f = f.Next(t)
		r.send(t, f, cycletest.Trigger(kindName, jobName, round, 600))
		f = f.Next(t)
		f.Sync(t, jobName)
		if round == 3 {
			if diff := cmp.Diff([]string{"create pods " + name("train"), "delete pods " + jobName + "-eval-1-1",
				"delete pods " + jobName + "-train-1-1"}, f.Writes()); diff != "" {
				t.Errorf("writes as round 3 starts (-want,+got):\n%s", diff)
			}
			return
		}
		f = f.Next(t)
		f.SetPodPhase(t, name("train"), corev1.PodSucceeded)
		r.send(t, f, cycletest.Worker(kindName, jobName, name("train"), edgeproto.StageTrain, edgeproto.WorkerCompleted, trainDone))
		f = f.Next(t)
		f.Sync(t, jobName)
		f = f.Next(t)
		if round == 1 {
			f.SetPodPhase(t, name("eval"), corev1.PodSucceeded) // round 2's eval pod is still running at the end
		}
		r.send(t, f, cycletest.Worker(kindName, jobName, name("eval"), edgeproto.StageEval, edgeproto.WorkerCompleted, evalWorse, evalOld))
	}
}

func TestDeployWithTheDeployModelGoneStillEndsTheRound(t *testing.T) {
	r := &reporter{}
	f := toDeploy(t, newFixture(t, exampleJob(t)), r)
	if err := f.Sedna.SednaV1alpha1().Models(ns).Delete(t.Context(), "deploy-model", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r.send(t, f, deployed(1))
	if got := stateOf(jobOf(t, f)); got != "Train/Waiting/2/0" {
		t.Errorf("state %s, want round 2 waiting", got)
	}
	if ev := f.Events(); !containsPrefix(ev, "Warning MissingReference Deploy Model deploy-model not found") {
		t.Errorf("events %q", ev)
	}
}

// Reports under the LocalController's name move the cycle only from the
// Dataset's node, and the paths a report names are mounted into the round's
// pods only within the job's outputDir: a node the job concerns in another
// way (its deploy or inference node) must not choose a folder of a node to
// mount read-write.
func TestReportsChooseNoPathsOutsideTheOutputDir(t *testing.T) {
	f := newFixture(t, exampleJob(t))
	f.Sync(t, jobName)
	f = f.Next(t)

	err := f.Apply(t, "edge-elsewhere", 1, cycletest.Trigger(kindName, jobName, 1, 600))
	if reason, refused := edgeproto.IsRefused(err); !refused || !strings.Contains(reason, "only the LocalController of node") {
		t.Errorf("a train trigger from another node: %v, want it refused", err)
	}
	trigger := cycletest.Trigger(kindName, jobName, 1, 600)
	trigger.OwnerInfo = json.RawMessage(`{"round":1,"numberOfSamples":600,"trainDatasetURL":"/output/../etc/kubernetes/admin.conf","testDatasetURL":"/output/round-1/data/test.txt"}`)
	err = f.Apply(t, node, 2, trigger)
	if reason, refused := edgeproto.IsRefused(err); !refused || !strings.Contains(reason, "not within the job's outputDir") {
		t.Errorf("a train trigger naming a path outside outputDir: %v, want it refused", err)
	}
	if job := jobOf(t, f); job.Status.CurrentRound != nil {
		t.Fatalf("a refused trigger moved the cycle: %s, round %+v", stateOf(job), job.Status.CurrentRound)
	}

	r := &reporter{id: 2}
	r.send(t, f, cycletest.Trigger(kindName, jobName, 1, 600))
	f = f.Next(t)
	f.Sync(t, jobName)
	r.send(t, f, cycletest.Worker(kindName, jobName, train11, edgeproto.StageTrain, edgeproto.WorkerCompleted, `{"format":"pb","url":"/var/lib/kubelet/x.bin"}`))
	job := jobOf(t, f)
	if stateOf(job) != "Train/Ready/1/2" {
		t.Errorf("after a model outside outputDir: %s, want the train try failed", stateOf(job))
	}
	last := job.Status.Conditions[len(job.Status.Conditions)-2]
	if last.Type != sednav1.StageFailed || !strings.Contains(last.Message, `model url "/var/lib/kubelet/x.bin" is not within the job's outputDir`) {
		t.Errorf("failed try condition %+v", last)
	}
	if job.Status.CurrentRound != nil && len(job.Status.CurrentRound.Models) > 0 {
		t.Errorf("the round records models %v", job.Status.CurrentRound.Models)
	}
}

// Of what Nereid sets, a template overrides what Sedna's GlobalManager does
// not set for the worker type (createInferPod): the inference worker's
// MODEL_NAME and LOG_LEVEL are the template's, its MODEL_URL, HEM_NAME and,
// with hot update on, MODEL_HOT_UPDATE are Sedna's and so Nereid's.
func TestInferenceWorkerKeepsTheTemplatesOwnWhereSednaSetsNothing(t *testing.T) {
	job := exampleJob(t)
	c := &job.Spec.DeploySpec.Template.Spec.Containers[0]
	for _, name := range []string{"MODEL_NAME", "LOG_LEVEL", "MODEL_URL", "HEM_NAME", "MODEL_HOT_UPDATE"} {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: "template's"})
	}
	f := newFixture(t, job)
	f.Sync(t, jobName)
	env := cycletest.Env(f.Pod(t, deploy0))
	want := map[string]string{"MODEL_NAME": "template's", "LOG_LEVEL": "template's",
		"MODEL_URL": "/home/data/models/deploy_model/saved_model.pb", "HEM_NAME": "IBT", "MODEL_HOT_UPDATE": "true"}
	got := map[string]string{}
	for name := range want {
		got[name] = env[name]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inference worker env (-want,+got):\n%s", diff)
	}
}

// A stage pod that ended Succeeded without its worker's report says so at
// once, waits ReportGrace for the report while the edge link is up (none
// while it is down: the report may sit in the node's outbox), then fails
// the try, which the cycle retries.
func TestStagePodEndedWithoutItsReportFailsTheTryAfterTheGrace(t *testing.T) {
	const grace = 30 * time.Second
	f := newFixtureWith(t, Config{StageAttempts: 2, ReportGrace: grace}, exampleJob(t))
	r := &reporter{}
	f = toTrain(t, f, r)
	f = f.Next(t)
	f.SetPodPhase(t, train11, corev1.PodSucceeded)
	step := func(d time.Duration) *sednav1.IncrementalLearningJob {
		t.Helper()
		f.Clock.SetTime(f.Clock.Now().Add(d))
		f = f.Next(t)
		f.Sync(t, jobName)
		return jobOf(t, f)
	}
	job := step(0)
	last := job.Status.Conditions[len(job.Status.Conditions)-1]
	if stateOf(job) != "Train/Starting/1/1" || last.Reason != "PodEndedWithoutReport" || !strings.Contains(last.Message, train11) {
		t.Fatalf("the pod just ended: %s, last condition %+v; want try 1 waiting, saying so", stateOf(job), last)
	}
	// The link goes down: however long, the try waits.
	job.Status.JobConditions = append(job.Status.JobConditions, sednav1.JobCondition{Type: "EdgeLinked", Status: corev1.ConditionFalse,
		Reason: "LinkDown", LastTransitionTime: metav1.NewTime(f.Clock.Now())})
	if _, err := f.Sedna.SednaV1alpha1().IncrementalLearningJobs(ns).UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if job = step(5 * grace); stateOf(job) != "Train/Starting/1/1" {
		t.Fatalf("with the link down: %s, want try 1 waiting", stateOf(job))
	}
	// Back: the grace counts from then.
	job.Status.JobConditions[len(job.Status.JobConditions)-1] = sednav1.JobCondition{Type: "EdgeLinked", Status: corev1.ConditionTrue,
		Reason: "Linked", LastTransitionTime: metav1.NewTime(f.Clock.Now())}
	if _, err := f.Sedna.SednaV1alpha1().IncrementalLearningJobs(ns).UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if job = step(grace - time.Second); stateOf(job) != "Train/Starting/1/1" {
		t.Fatalf("within the grace after the link came back: %s, want try 1 waiting", stateOf(job))
	}
	job = step(time.Second)
	if stateOf(job) != "Train/Starting/1/2" {
		t.Errorf("after the grace: %s, want try 2", stateOf(job))
	}
	want := "Warning StageRetry Round 1: Train try 1 of 2 failed (pod " + train11 + " ended without its worker reporting completed)"
	if ev := f.Events(); !containsPrefix(ev, want) {
		t.Errorf("events %q, want %q", ev, want)
	}
}

// A deploy the edge reports failed (after its own bounded retries) ends the
// round Failed with the reason, keeps the inference worker, and leaves the
// job waiting for the next round's trigger.
func TestFailedDeployEndsTheRoundAndTheJobGoesOn(t *testing.T) {
	r := &reporter{}
	f := toDeploy(t, newFixture(t, exampleJob(t)), r)
	failed := cycletest.Worker(kindName, jobName, edgeproto.LocalControllerWorker, edgeproto.StageDeploy, edgeproto.WorkerFailed)
	const why = "stat /output/round-1/train/model.pb: no such file or directory (9 tries over 2m1s)"
	failed.OwnerInfo = []byte(`{"round":1,"reason":"` + why + `"}`)
	r.send(t, f, failed)
	job := jobOf(t, f)
	if stateOf(job) != "Train/Waiting/2/0" || job.Status.CompletionTime != nil {
		t.Errorf("after the failed deploy: %s, completionTime %v; want round 2 waiting, the job going on", stateOf(job), job.Status.CompletionTime)
	}
	if diff := cmp.Diff([]string{"1 Failed Deploy failed: " + why}, history(job)); diff != "" {
		t.Errorf("history (-want,+got):\n%s", diff)
	}
	if ev := f.Events(); !containsPrefix(ev, "Warning RoundFailed Round 1: Deploy failed: "+why) {
		t.Errorf("events %q", ev)
	}
	f = f.Next(t)
	f.Sync(t, jobName)
	if w := f.Writes(); len(w) != 0 || jobOf(t, f).Status.InferenceWorker != deploy0 {
		t.Errorf("writes %v, inference worker %s; want none, %s kept", w, jobOf(t, f).Status.InferenceWorker, deploy0)
	}
}
