package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// cycleExample is what the demo needs to know of a learning-cycle example.
type cycleExample struct {
	job      string
	dataset  string // the index file, a node path
	header   string // the csv header, "" for txt
	model    string // where the deploy stage's model goes (incremental), a node path
	initial  string // the initial model, a node path
	node     string
	output   string // outputDir
	ownerKey string // ownerKind in reports
}

var cycleExamples = map[string]cycleExample{
	"incrementallearningjob": {job: "helmet-detection-demo", dataset: "/data/helmet_detection/train_data/train_data.txt",
		model: "/models/deploy_model/saved_model.pb", initial: "/models/base_model/model.ckpt",
		node: "edge-0", output: "/output", ownerKey: "incrementallearningjob"},
	"lifelonglearningjob": {job: "atcii-classifier-demo", dataset: "/data/atcii/trainData.csv", header: "temperature,humidity,comfort",
		node: "edge-0", output: "/output", ownerKey: "lifelonglearningjob"},
}

// runCycle runs a learning-cycle example: it grows the dataset on the node
// past the train trigger and plays each round's train and eval workers.
func runCycle(outDir, ns, example string, rounds int, pause time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ex := cycleExamples[example]
	root := filepath.Join(outDir, "edge", ex.node, "root")
	node := func(url string) string { return filepath.Join(root, url) }
	samples := 0
	grow := func(n int) error {
		path := node(ex.dataset)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if samples == 0 && ex.header != "" {
			fmt.Fprintln(f, ex.header)
		}
		for range n {
			samples++
			if ex.header != "" {
				fmt.Fprintf(f, "%d.5,%d,%d\n", 18+samples%10, 30+samples%50, samples%3)
			} else {
				fmt.Fprintf(f, "images/%06d.jpg labels/%06d.txt\n", samples, samples)
			}
		}
		return nil
	}
	write := func(url, content string) error {
		if err := os.MkdirAll(filepath.Dir(node(url)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(node(url), []byte(content), 0o644)
	}

	d, err := start(ctx, outDir, ns, example+"/"+ex.job, "examples/"+example+"/", func(*demoRun) error {
		if _, err := os.Stat(root); err != nil {
			return fmt.Errorf("no node root for %s at %s: run make local-up first", ex.node, root)
		}
		if err := os.Remove(node(ex.dataset)); err != nil && !os.IsNotExist(err) {
			return err
		}
		if ex.model != "" {
			if err := write(ex.initial, "initial model"); err != nil {
				return err
			}
			if err := write(ex.model, "initial model"); err != nil {
				return err
			}
		}
		say("dataset %s on %s: 100 samples (under %s)", ex.dataset, ex.node, root)
		return grow(100)
	})
	if err != nil {
		return err
	}
	status := func(ctx context.Context) (sednav1.CycleStatus, error) {
		if example == "lifelonglearningjob" {
			j, err := d.sedna.SednaV1alpha1().LifelongLearningJobs(ns).Get(ctx, ex.job, metav1.GetOptions{})
			if err != nil {
				return sednav1.CycleStatus{}, err
			}
			return j.Status.CycleStatus, nil
		}
		j, err := d.sedna.SednaV1alpha1().IncrementalLearningJobs(ns).Get(ctx, ex.job, metav1.GetOptions{})
		if err != nil {
			return sednav1.CycleStatus{}, err
		}
		return j.Status.CycleStatus, nil
	}
	waitFor := func(round int32, stage sednav1.Stage, states ...sednav1.StageState) (sednav1.CycleStatus, error) {
		var s sednav1.CycleStatus
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			s, err = status(ctx)
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
	play := func(stage string, s sednav1.CycleStatus, results []map[string]any) error {
		name := common.ChildName(ex.job, stage, fmt.Sprint(s.Round), fmt.Sprint(s.Attempt))
		var pod *corev1.Pod
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := d.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			pod = p
			return err == nil, nil
		}); err != nil {
			return fmt.Errorf("waiting for pod %s: %w", name, err)
		}
		for _, st := range []string{"running", "completed"} {
			body := map[string]any{"name": name, "namespace": ns, "ownerName": ex.job, "ownerKind": ex.ownerKey, "kind": stage, "status": st}
			if st == "completed" {
				body["results"] = results
			}
			if err := post(ctx, d.kube, d.lcURL[ex.node], ns, name, body); err != nil {
				return err
			}
		}
		pod.Status.Phase = corev1.PodSucceeded
		if _, err := d.kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("marking %s Succeeded: %w", name, err)
		}
		say("  %s worker %s: completed (posted to %s's LocalController, pod marked Succeeded)", stage, name, ex.node)
		return nil
	}

	if _, err := waitFor(1, sednav1.StageTrain, sednav1.StageWaiting); err != nil {
		return err
	}
	say("job %s waits in round 1 for its train trigger (watch: kubectl get il,ll -n %s -w)", ex.job, ns)
	for round := int32(1); round <= int32(rounds); round++ {
		say("round %d: 501 new samples arrive on %s; the LocalController's trigger fires at its next check", round, ex.node)
		if err := grow(501); err != nil {
			return err
		}
		s, err := waitFor(round, sednav1.StageTrain, sednav1.StageStarting, sednav1.StageRunning)
		if err != nil {
			return err
		}
		say("round %d: data split on %s into %s and %s", round, ex.node, s.CurrentRound.TrainDatasetURL, s.CurrentRound.TestDatasetURL)
		modelURL := fmt.Sprintf("%s/round-%d/train/model.pb", ex.output, round)
		if err := write(modelURL, fmt.Sprintf("model of round %d", round)); err != nil {
			return err
		}
		if err := play("train", s, []map[string]any{{"format": "pb", "url": modelURL, "modelID": fmt.Sprintf("task-%d", round),
			"classes": []string{"cold", "comfortable", "hot"}, "metrics": map[string]any{"precision": 0.7 + 0.05*float64(round)}}}); err != nil {
			return err
		}
		time.Sleep(pause)
		if s, err = waitFor(round, sednav1.StageEval, sednav1.StageStarting, sednav1.StageRunning); err != nil {
			return err
		}
		// Odd rounds improve every class; even rounds get worse on one.
		delta := []float64{0.15, 0.12, 0.2, 0.11}
		if round%2 == 0 {
			delta = []float64{0.2, -0.03, 0.1, 0.12}
		}
		if err := play("eval", s, []map[string]any{
			{"format": "pb", "url": modelURL, "metrics": map[string]any{"precision_delta": delta, "precision": 0.7 + 0.05*float64(round)}},
			{"format": "pb", "url": ex.model, "metrics": map[string]any{}},
		}); err != nil {
			return err
		}
		if s, err = waitFor(round+1, sednav1.StageTrain, sednav1.StageWaiting); err != nil {
			return err
		}
		last := s.History[len(s.History)-1]
		say("round %d: %s — %s", last.Round, last.Result, last.Message)
		if ex.model != "" {
			content, _ := os.ReadFile(node(ex.model))
			say("  %s on %s now holds: %q", ex.model, ex.node, content)
		}
		time.Sleep(pause)
	}
	say("done: kubectl get %s %s -n %s -o yaml shows the rounds in status.history", example, ex.job, ns)
	return nil
}
