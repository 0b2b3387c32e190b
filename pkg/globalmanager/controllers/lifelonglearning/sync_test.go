package lifelonglearning

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle/cycletest"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

const (
	ns       = cycletest.Namespace
	jobName  = "atcii-classifier-demo"
	node     = "edge-0"
	kindName = edgeproto.OwnerLifelongLearningJob
)

var testConfig = Config{
	Config:   learningcycle.Config{},
	KBServer: "http://kb.example:9020",
}

func exampleJob(t *testing.T) *sednav1.LifelongLearningJob {
	t.Helper()
	data, err := os.ReadFile("../../../../examples/lifelonglearningjob/10-lifelonglearningjob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := &sednav1.LifelongLearningJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace, job.UID, job.Generation = ns, "job-uid", 1
	return job
}

func newFixture(t *testing.T, job *sednav1.LifelongLearningJob) *cycletest.Fixture[*sednav1.LifelongLearningJob] {
	t.Helper()
	build := func(ctx context.Context, d kinds.Deps) (*Controller, error) { return NewController(ctx, d, testConfig) }
	dataset := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "lifelong-dataset", Namespace: ns},
		Spec: sednav1.DatasetSpec{URL: "/data/atcii/trainData.csv", Format: "csv", NodeName: node}}
	return cycletest.New(t, build, []runtime.Object{dataset, job}...)
}

func jobOf(t *testing.T, f *cycletest.Fixture[*sednav1.LifelongLearningJob]) *sednav1.LifelongLearningJob {
	t.Helper()
	job, err := f.Sedna.SednaV1alpha1().LifelongLearningJobs(ns).Get(t.Context(), jobName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func TestLifelongRoundFillsTheKnowledgeBaseAndDeploysANewInferenceWorker(t *testing.T) {
	f := newFixture(t, exampleJob(t))
	f.Sync(t, jobName)
	deploy0, deploy1 := jobName+"-deploy-0", jobName+"-deploy-1"
	train11, eval11 := jobName+"-train-1-1", jobName+"-eval-1-1"
	env := cycletest.Env(f.Pod(t, deploy0))
	if env["HAS_COMPLETED_INITIAL_TRAINING"] != "false" || env["KB_SERVER"] != "http://kb.example:9020" || env["CLOUD_KB_INDEX"] != "" {
		t.Errorf("first inference worker env %v: no knowledge base yet", env)
	}
	// No knowledge base before the first deploy; a folder to write in.
	unset(t, "inference", env, "MODEL_URLS", "MODEL_URL")
	if got := env["OUTPUT_URL"]; got != "/home/data/output/deploy" {
		t.Errorf("first inference worker OUTPUT_URL %q, want /home/data/output/deploy", got)
	}

	f = f.Next(t)
	f.Report(t, node, 1, cycletest.Trigger(kindName, jobName, 1, 600))
	f = f.Next(t)
	f.Sync(t, jobName)
	env = cycletest.Env(f.Pod(t, train11))
	wantTrain := map[string]string{
		"ORIGINAL_DATASET_URL": "/home/data/data/atcii/trainData.csv", "TRAIN_DATASET_URL": "/home/data/output/round-1/data/train.txt",
		"OUTPUT_URL": "/home/data/output/round-1/train", "HAS_COMPLETED_INITIAL_TRAINING": "false", "KB_SERVER": "http://kb.example:9020",
	}
	for k, v := range wantTrain {
		if env[k] != v {
			t.Errorf("train env %s = %q, want %q", k, env[k], v)
		}
	}
	// A lifelong job names no model, and round 1 starts the knowledge base.
	unset(t, "train", env, "MODEL_URL", "BASE_MODEL_URL", "MODEL_URLS", "CLOUD_KB_INDEX")

	f.Report(t, node, 2, cycletest.Worker(kindName, jobName, train11, edgeproto.StageTrain, edgeproto.WorkerCompleted,
		`{"format":"pkl","url":"/output/round-1/train/task-0.pkl","modelID":"task-0","classes":["person","helmet"],"metrics":{"precision":0.83}}`,
		`{"format":"pkl","url":"/output/round-1/train/task-1.pkl","classes":["helmet","vest"],"metrics":{"precision":"0.7"}}`))
	kb := jobOf(t, f).Status.KnowledgeBase
	wantKB := sednav1.KnowledgeBase{
		AIModels: sednav1.AIModels{NumberOfAIModels: 2, ListOfAIModels: []sednav1.AIModel{
			{ModelID: "task-0", AveragePrecision: 0.83, NumberOfTrainSamples: 600},
			{ModelID: "task-1.pkl", AveragePrecision: 0.7, NumberOfTrainSamples: 600},
		}},
		AIClasses: sednav1.AIClasses{NumberOfAIClasses: 3, ListOfAIClasses: []string{"helmet", "person", "vest"}},
	}
	if diff := cmp.Diff(wantKB, kb); diff != "" {
		t.Errorf("knowledge base (-want,+got):\n%s", diff)
	}

	f = f.Next(t)
	f.Sync(t, jobName)
	env = cycletest.Env(f.Pod(t, eval11))
	if got := env["CLOUD_KB_INDEX"]; got != "/home/data/output/round-1/train/index.pkl" {
		t.Errorf("eval CLOUD_KB_INDEX %q", got)
	}
	if got := env["OUTPUT_URL"]; got != "/home/data/output/round-1/eval" {
		t.Errorf("eval OUTPUT_URL %q", got)
	}
	// Sedna's eval worker reads the index from MODEL_URLS.
	if got := env["MODEL_URLS"]; got != "/home/data/output/round-1/train/index.pkl" {
		t.Errorf("eval MODEL_URLS %q", got)
	}
	unset(t, "eval", env, "MODEL_URL")
	f.Report(t, node, 3, cycletest.Worker(kindName, jobName, eval11, edgeproto.StageEval, edgeproto.WorkerCompleted,
		`{"url":"/output/round-1/train/task-0.pkl","metrics":{"precision":0.83}}`))
	if s := jobOf(t, f).Status; s.Stage != sednav1.StageDeploy || s.State != sednav1.StageReady {
		t.Fatalf("after the evaluation: %s/%s, want Deploy/Ready", s.Stage, s.State)
	}

	f = f.Next(t)
	f.Sync(t, jobName)
	s := jobOf(t, f).Status
	if s.Round != 2 || s.State != sednav1.StageWaiting || s.DeployedRound != 1 || s.InferenceWorker != deploy1 ||
		len(s.History) != 1 || s.History[0].Result != sednav1.RoundDeployed {
		t.Errorf("after the deploy: round %d %s, deployedRound %d, inferenceWorker %s, history %+v",
			s.Round, s.State, s.DeployedRound, s.InferenceWorker, s.History)
	}
	if diff := cmp.Diff([]string{"create pods " + deploy1, "delete pods " + deploy0}, f.Writes()); diff != "" {
		t.Errorf("writes (-want,+got):\n%s", diff)
	}
	env = cycletest.Env(f.Pod(t, deploy1))
	if env["MODEL_URLS"] != "/home/data/output/round-1/train/index.pkl" || env["HAS_COMPLETED_INITIAL_TRAINING"] != "true" {
		t.Errorf("new inference worker env %v, want round 1's knowledge base in MODEL_URLS", env)
	}

	checkRoundTwoTrainsFromRoundOnesIndex(t, f.Next(t))
}

// checkRoundTwoTrainsFromRoundOnesIndex: round 2's train worker updates
// round 1's knowledge base. Sedna's library reads CLOUD_KB_INDEX as a node
// path under DATA_PATH_PREFIX, so the index's folder is mounted there.
func checkRoundTwoTrainsFromRoundOnesIndex(t *testing.T, f *cycletest.Fixture[*sednav1.LifelongLearningJob]) {
	t.Helper()
	f.Report(t, node, 4, cycletest.Trigger(kindName, jobName, 2, 900))
	f = f.Next(t)
	f.Sync(t, jobName)
	train21 := f.Pod(t, jobName+"-train-2-1")
	env := cycletest.Env(train21)
	if env["CLOUD_KB_INDEX"] != "/output/round-1/train/index.pkl" || env["HAS_COMPLETED_INITIAL_TRAINING"] != "true" {
		t.Errorf("round 2 train env %v, want round 1's index as a node path", env)
	}
	for _, v := range train21.Spec.Volumes {
		for _, m := range train21.Spec.Containers[0].VolumeMounts {
			if m.Name == v.Name && v.HostPath != nil && v.HostPath.Path == "/output/round-1/train" && m.MountPath == "/home/data/output/round-1/train" {
				return
			}
		}
	}
	t.Errorf("round 2's train pod does not mount round 1's index folder: %+v", train21.Spec.Volumes)
}

// unset fails unless env, a worker's, has none of names.
func unset(t *testing.T, worker string, env map[string]string, names ...string) {
	t.Helper()
	for _, k := range names {
		if v, ok := env[k]; ok {
			t.Errorf("%s env has %s=%q, want it unset", worker, k, v)
		}
	}
}

func TestKnowledgeBaseReplacesModelsByIDAndKeepsTheNewest(t *testing.T) {
	var kb sednav1.KnowledgeBase
	for i := range MaxKnowledgeBaseModels + 5 {
		learn(&kb, []json.RawMessage{json.RawMessage(fmt.Sprintf(`{"url":"/out/m%d.pkl","modelID":"m%d"}`, i, i))}, int32(i))
	}
	learn(&kb, []json.RawMessage{json.RawMessage(`{"url":"/out/again.pkl","modelID":"m50","classes":["b","a"],"metrics":{"precision":[0.1]}}`)}, 7)
	models := kb.AIModels.ListOfAIModels
	if len(models) != MaxKnowledgeBaseModels || kb.AIModels.NumberOfAIModels != MaxKnowledgeBaseModels {
		t.Fatalf("%d models (count %d), want %d", len(models), kb.AIModels.NumberOfAIModels, MaxKnowledgeBaseModels)
	}
	if models[0].ModelID != "m5" || models[len(models)-1] != (sednav1.AIModel{ModelID: "m50", NumberOfTrainSamples: 7}) {
		t.Errorf("oldest %+v, newest %+v: want m5 first and the replaced m50 last, without a list precision", models[0], models[len(models)-1])
	}
	if !cmp.Equal(kb.AIClasses.ListOfAIClasses, []string{"a", "b"}) || kb.AIClasses.NumberOfAIClasses != 2 {
		t.Errorf("classes %+v", kb.AIClasses)
	}
}

func TestReportsCountTheUnseenSamples(t *testing.T) {
	f := newFixture(t, exampleJob(t))
	f.Sync(t, jobName)
	info := cycletest.Worker(kindName, jobName, jobName+"-deploy-0", edgeproto.StageInference, "")
	info.OwnerInfo = json.RawMessage(`{"numberOfUnseenSample":12,"numberOfLabeledUnseenSample":"5"}`)
	f.Report(t, node, 1, info)
	want := sednav1.Samples{NumberOfUnseenSample: 12, NumberOfLabeledUnseenSample: 5}
	if got := jobOf(t, f).Status.KnowledgeBase.Samples; got != want {
		t.Errorf("samples %+v, want %+v", got, want)
	}
}

// Sedna's library reports as its train result the knowledge base index
// without metrics, and as its eval result the index it kept of the round's
// tasks with the metric of the eval script (precision_score): the knowledge
// base's model takes the eval's precision, and the deploy serves the eval's
// index, as Sedna's LocalController copies it to <outputDir>/deploy.
func TestEvalOfSednasLibraryJudgesTheKnowledgeBaseAndItsIndexIsDeployed(t *testing.T) {
	f := newFixture(t, exampleJob(t)).FirstTrain(t, node, kindName, jobName, 600)
	f.Report(t, node, 2, cycletest.Worker(kindName, jobName, jobName+"-train-1-1", edgeproto.StageTrain, edgeproto.WorkerCompleted,
		`{"format":"pkl","url":"/output/round-1/train/index.pkl","metrics":null}`))
	f = f.Next(t)
	f.Sync(t, jobName)
	f.Report(t, node, 3, cycletest.Worker(kindName, jobName, jobName+"-eval-1-1", edgeproto.StageEval, edgeproto.WorkerCompleted,
		`{"format":"pkl","url":"/output/round-1/eval/index.pkl","metrics":{"recall":0.5,"precision_score":[0.5,1]}}`))
	want := []sednav1.AIModel{{ModelID: "index.pkl", AveragePrecision: 0.75, NumberOfTrainSamples: 600}}
	if diff := cmp.Diff(want, jobOf(t, f).Status.KnowledgeBase.AIModels.ListOfAIModels); diff != "" {
		t.Errorf("knowledge base models (-want,+got):\n%s", diff)
	}
	f = f.Next(t)
	f.Sync(t, jobName)
	s := jobOf(t, f).Status
	if len(s.History) != 1 || s.History[0].EvaluatedModel == nil || s.History[0].EvaluatedModel.URL != "/output/round-1/eval/index.pkl" {
		t.Fatalf("round 1 %+v: want the eval's index as its evaluated model", s.History)
	}
	env := cycletest.Env(f.Pod(t, jobName+"-deploy-1"))
	if got := env["MODEL_URLS"]; got != "/home/data/output/round-1/eval/index.pkl" {
		t.Errorf("inference MODEL_URLS %q, want the eval's index", got)
	}
}

func TestPrecisionIsTheEvalsPrecisionMetric(t *testing.T) {
	for _, c := range []struct {
		metrics []sednav1.Metric
		want    float64
		ok      bool
	}{
		{[]sednav1.Metric{{Key: "precision_score", Value: "0.7"}, {Key: "Precision", Value: "0.9"}}, 0.9, true},
		{[]sednav1.Metric{{Key: "b_precision", Value: "x"}, {Key: "a_precision", Value: "[0.5, 0.7]"}}, 0.6, true},
		{[]sednav1.Metric{{Key: "recall", Value: "0.7"}, {Key: "precision", Value: "[]"}}, 0, false},
		{nil, 0, false},
	} {
		if got, ok := precisionOf(c.metrics); ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("precisionOf(%v) = %v, %v; want %v, %v", c.metrics, got, ok, c.want, c.ok)
		}
	}
}
