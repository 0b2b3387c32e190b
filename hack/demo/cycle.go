package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/plugin/playworker"
)

// cycleExample is what the demo needs to know of a learning-cycle example.
type cycleExample struct {
	job     string
	dataset string // the index file, a node path
	header  string // the csv header, "" for txt
	model   string // where the deploy stage's model goes (incremental), a node path
	initial string // the initial model, a node path
	node    string
	output  string // outputDir
}

var cycleExamples = map[string]cycleExample{
	"incrementallearningjob": {job: "helmet-detection-demo", dataset: "/data/helmet_detection/train_data/train_data.txt",
		model: "/models/deploy_model/saved_model.pb", initial: "/models/base_model/model.ckpt",
		node: "edge-0", output: "/output"},
	"lifelonglearningjob": {job: "atcii-classifier-demo", dataset: "/data/atcii/trainData.csv", header: "temperature,humidity,comfort",
		node: "edge-0", output: "/output"},
}

// runCycle runs a learning-cycle example: it grows the dataset on the node
// past the train trigger and plays each round's train and eval workers.
// A checkPeriodSeconds above 0 replaces the example's (15) in the job's train
// trigger.
func runCycle(outDir, ns, example string, rounds int, pause time.Duration, checkPeriodSeconds int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ex := cycleExamples[example]
	c := &cycleDemo{ns: ns, example: example, ex: ex, root: filepath.Join(outDir, "edge", ex.node, "root")}
	manifests := "examples/" + example + "/"
	if checkPeriodSeconds > 0 {
		dir, err := withCheckPeriod(manifests, checkPeriodSeconds)
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		manifests = dir
	}
	d, err := start(ctx, outDir, ns, example+"/"+ex.job, manifests, c.prepareNode)
	if err != nil {
		return err
	}
	c.d = d
	if _, err := c.waitFor(ctx, 1, sednav1.StageTrain, sednav1.StageWaiting); err != nil {
		return err
	}
	say("job %s waits in round 1 for its train trigger (watch: kubectl get il,ll -n %s -w)", ex.job, ns)
	for round := int32(1); round <= int32(rounds); round++ {
		if err := c.playRound(ctx, round, pause); err != nil {
			return err
		}
	}
	say("done: kubectl get %s %s -n %s -o yaml shows the rounds in status.history", example, ex.job, ns)
	return nil
}

// cycleDemo is a learning-cycle example played on the local run: the files
// of its node and the workers of its rounds.
type cycleDemo struct {
	d       *demoRun
	ns      string
	example string // its resource, the key of cycleExamples
	ex      cycleExample
	root    string // the node's root filesystem, a folder of local-up's
	samples int    // in the dataset so far
}

// node is where a node path is on this machine.
func (c *cycleDemo) node(url string) string { return filepath.Join(c.root, url) }

// grow appends n samples to the dataset on the node, after the csv header
// if the dataset is new.
func (c *cycleDemo) grow(n int) error {
	path := c.node(c.ex.dataset)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if c.samples == 0 && c.ex.header != "" {
		fmt.Fprintln(f, c.ex.header)
	}
	for range n {
		c.samples++
		if c.ex.header != "" {
			fmt.Fprintf(f, "%d.5,%d,%d\n", 18+c.samples%10, 30+c.samples%50, c.samples%3)
		} else {
			fmt.Fprintf(f, "images/%06d.jpg labels/%06d.txt\n", c.samples, c.samples)
		}
	}
	return nil
}

// write writes content to the file at a node path, making its folder.
func (c *cycleDemo) write(url, content string) error {
	if err := os.MkdirAll(filepath.Dir(c.node(url)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(c.node(url), []byte(content), 0o644)
}

// prepareNode starts the node's files afresh, before the example is
// applied: a dataset of 100 samples and, for incremental learning, the
// initial and deploy models.
func (c *cycleDemo) prepareNode(*demoRun) error {
	if _, err := os.Stat(c.root); err != nil {
		return fmt.Errorf("no node root for %s at %s: run make local-up first", c.ex.node, c.root)
	}
	if err := os.Remove(c.node(c.ex.dataset)); err != nil && !os.IsNotExist(err) {
		return err
	}
	if c.ex.model != "" {
		if err := c.write(c.ex.initial, "initial model"); err != nil {
			return err
		}
		if err := c.write(c.ex.model, "initial model"); err != nil {
			return err
		}
	}
	say("dataset %s on %s: 100 samples (under %s)", c.ex.dataset, c.ex.node, c.root)
	return c.grow(100)
}

// status reads the job's cycle status.
func (c *cycleDemo) status(ctx context.Context) (sednav1.CycleStatus, error) {
	if c.example == "lifelonglearningjob" {
		j, err := c.d.sedna.SednaV1alpha1().LifelongLearningJobs(c.ns).Get(ctx, c.ex.job, metav1.GetOptions{})
		if err != nil {
			return sednav1.CycleStatus{}, err
		}
		return j.Status.CycleStatus, nil
	}
	j, err := c.d.sedna.SednaV1alpha1().IncrementalLearningJobs(c.ns).Get(ctx, c.ex.job, metav1.GetOptions{})
	if err != nil {
		return sednav1.CycleStatus{}, err
	}
	return j.Status.CycleStatus, nil
}

// waitFor waits up to 3 minutes until the job is in round's stage, in one of
// states, and returns its cycle status then.
func (c *cycleDemo) waitFor(ctx context.Context, round int32, stage sednav1.Stage, states ...sednav1.StageState) (sednav1.CycleStatus, error) {
	var s sednav1.CycleStatus
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		s, err = c.status(ctx)
		if err != nil {
			return false, nil
		}
		for _, st := range states {
			if s.Round == round && s.Stage == stage && s.State == st {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return s, fmt.Errorf("waiting for round %d %s %v (now round %d %s/%s): %w", round, stage, states, s.Round, s.Stage, s.State, err)
	}
	return s, nil
}

// play is a stage worker: it reports, writes what it made, and exits.
func (c *cycleDemo) play(ctx context.Context, stage string, s sednav1.CycleStatus, results []map[string]any) error {
	name := common.ChildName(c.ex.job, stage, fmt.Sprint(s.Round), fmt.Sprint(s.Attempt))
	var pod *corev1.Pod
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = c.d.kube.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("waiting for pod %s: %w", name, err)
	}
	running := playworker.Report{Stage: edgeproto.Stage(stage), Status: edgeproto.WorkerRunning}
	completed := playworker.Report{Stage: edgeproto.Stage(stage), Status: edgeproto.WorkerCompleted, Results: results}
	for _, r := range []playworker.Report{running, completed} {
		if err := c.d.report(ctx, pod, r); err != nil {
			return err
		}
	}
	if err := playworker.FinishPod(ctx, c.d.kube, c.ns, name, corev1.PodSucceeded); err != nil {
		return err
	}
	say("  %s worker %s: completed (posted to %s's LocalController, pod marked Succeeded)", stage, name, c.ex.node)
	return nil
}

// playRound plays one round: new samples past the train trigger, the train
// worker, the eval worker, then what the round decided, with a pause after
// each worker.
func (c *cycleDemo) playRound(ctx context.Context, round int32, pause time.Duration) error {
	say("round %d: 501 new samples arrive on %s; the LocalController's trigger fires at its next check", round, c.ex.node)
	if err := c.grow(501); err != nil {
		return err
	}
	modelURL, err := c.train(ctx, round)
	if err != nil {
		return err
	}
	time.Sleep(pause)
	if err := c.eval(ctx, round, modelURL); err != nil {
		return err
	}
	if err := c.showResult(ctx, round); err != nil {
		return err
	}
	time.Sleep(pause)
	return nil
}

// train waits for the round's train stage and plays its worker, which
// writes the round's model under outputDir; it returns the model's node path.
func (c *cycleDemo) train(ctx context.Context, round int32) (modelURL string, err error) {
	s, err := c.waitFor(ctx, round, sednav1.StageTrain, sednav1.StageStarting, sednav1.StageRunning)
	if err != nil {
		return "", err
	}
	say("round %d: data split on %s into %s and %s", round, c.ex.node, s.CurrentRound.TrainDatasetURL, s.CurrentRound.TestDatasetURL)
	modelURL = fmt.Sprintf("%s/round-%d/train/model.pb", c.ex.output, round)
	if err := c.write(modelURL, fmt.Sprintf("model of round %d", round)); err != nil {
		return "", err
	}
	results := playworker.ModelResults("pb", []string{modelURL}, map[string]any{"precision": 0.7 + 0.05*float64(round)})
	results[0]["modelID"] = fmt.Sprintf("task-%d", round)
	results[0]["classes"] = []string{"cold", "comfortable", "hot"}
	if err := c.play(ctx, "train", s, results); err != nil {
		return "", err
	}
	return modelURL, nil
}

// eval waits for the round's eval stage and plays its worker, which judges
// the round's model at modelURL against the deployed one.
func (c *cycleDemo) eval(ctx context.Context, round int32, modelURL string) error {
	s, err := c.waitFor(ctx, round, sednav1.StageEval, sednav1.StageStarting, sednav1.StageRunning)
	if err != nil {
		return err
	}
	// Odd rounds improve every class; even rounds get worse on one.
	delta := []float64{0.15, 0.12, 0.2, 0.11}
	if round%2 == 0 {
		delta = []float64{0.2, -0.03, 0.1, 0.12}
	}
	return c.play(ctx, "eval", s, playworker.ModelResults("pb", []string{modelURL, c.ex.model},
		map[string]any{"precision_delta": delta, "precision": 0.7 + 0.05*float64(round)}))
}

// showResult waits until the job waits for the next round's trigger, then
// says what the round decided and, for incremental learning, what the deploy
// model on the node now holds.
func (c *cycleDemo) showResult(ctx context.Context, round int32) error {
	s, err := c.waitFor(ctx, round+1, sednav1.StageTrain, sednav1.StageWaiting)
	if err != nil {
		return err
	}
	last := s.History[len(s.History)-1]
	say("round %d: %s — %s", last.Round, last.Result, last.Message)
	if c.ex.model != "" {
		content, _ := os.ReadFile(c.node(c.ex.model))
		say("  %s on %s now holds: %q", c.ex.model, c.ex.node, content)
	}
	return nil
}

// withCheckPeriod copies the example's folder into a temporary one whose
// learning-cycle job checks its train trigger every seconds, and returns
// that folder.
func withCheckPeriod(dir string, seconds int32) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "demo-manifests-")
	if err != nil {
		return "", err
	}
	if err := copyWithCheckPeriod(files, tmp, seconds); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	return tmp, nil
}

// copyWithCheckPeriod writes files into dir, the one learning-cycle job
// among them with its train trigger checking every seconds.
func copyWithCheckPeriod(files []string, dir string, seconds int32) error {
	edited := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err == nil && (obj["kind"] == sednav1.IncrementalLearningJobKind.Kind || obj["kind"] == sednav1.LifelongLearningJobKind.Kind) {
			if err := unstructured.SetNestedField(obj, int64(seconds), "spec", "trainSpec", "trigger", "checkPeriodSeconds"); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if data, err = yaml.Marshal(obj); err != nil {
				return err
			}
			edited++
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), data, 0o644); err != nil {
			return err
		}
	}
	if edited != 1 {
		return fmt.Errorf("%d learning-cycle jobs, want 1 to set its check period in", edited)
	}
	return nil
}
