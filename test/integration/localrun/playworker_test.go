package localrun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/test/framework"
)

// playWorker runs `kubectl nereid play-worker` (the plugin at bin) as a
// user does on the local run, with its kubeconfig and its state folder, and
// fails the test with its output if it fails.
func playWorker(t *testing.T, bin, ns string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args = append([]string{"play-worker"}, append(args, "-n", ns, "--kubeconfig", framework.KubeconfigPath(), "--local-run", framework.OutDir())...)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl nereid %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("kubectl nereid %s:\n%s", strings.Join(args, " "), out)
}

// applyExample applies an example folder in a namespace of the test's own.
func applyExample(t *testing.T, example string) string {
	t.Helper()
	ns := framework.Namespace(t)
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", filepath.Join(framework.RepoRoot(), "examples", example)); err != nil {
		t.Fatalf("applying examples/%s: %v\n%s", example, err, out)
	}
	return ns
}

// runningWorkers waits until the job's pods of role number want, each
// Running with an address (so kwok has started it and the LocalController
// may be told where it is), and returns them.
func runningWorkers(t *testing.T, ns, role string, want int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	selector := common.LabelWorkerRole + "=" + role
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("%d running %s workers", want, role), func(ctx context.Context) (bool, error) {
		list, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" })
		return len(pods) == want, nil
	})
	return pods
}

func TestPlayWorkerDrivesTheFederatedLearningExampleToSucceeded(t *testing.T) {
	bin := built(t, "./cmd/kubectl-nereid")
	ns := applyExample(t, "federatedlearningjob")
	const job = "surface-defect-detection"
	trainers := runningWorkers(t, ns, "training", 2)
	aggregators := runningWorkers(t, ns, "aggregation", 1)

	// What each trainer's node reported last: the third round, completed,
	// with its own accuracy and model.
	want := map[string][]sednav1.Metric{}
	for i, p := range trainers {
		accuracy := fmt.Sprintf("0.9%d", i)
		model := "/model/" + p.Spec.NodeName + "/round-3"
		playWorker(t, bin, ns, p.Name, "--rounds", "3", "--metric", "accuracy="+accuracy, "--model-url", model, "--finish")
		want[p.Spec.NodeName] = []sednav1.Metric{
			{Key: "currentRound", Value: "3"}, {Key: "format", Value: "pb"},
			{Key: "metrics", Value: `{"accuracy":` + accuracy + `}`}, {Key: "totalRounds", Value: "3"}, {Key: "url", Value: model},
		}
	}
	playWorker(t, bin, ns, aggregators[0].Name, "--finish")

	// The pods' phases and the workers' reports reach the status by
	// different ways (the reports through each node's LocalController), so
	// the job may say Succeeded a moment before the last reports are in.
	sedna := nereidclient.NewForConfigOrDie(framework.RESTConfig())
	var last string // what the status said at the last look, logged if it never came
	defer func() {
		if t.Failed() {
			t.Log(last)
		}
	}()
	framework.Eventually(t, 2*time.Minute, "the job Succeeded with every trainer's last round", func(ctx context.Context) (bool, error) {
		got, err := sedna.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = "phase " + string(got.Status.Phase)
		done := got.Status.Phase == sednav1.FLJobSucceeded && len(got.Status.EdgeNodes) == len(want)
		for _, n := range got.Status.EdgeNodes {
			if n.Stage != "train" || n.State != "completed" || n.Round != 3 || !slices.Equal(n.Metrics, want[n.Name]) {
				done = false
			}
			last += fmt.Sprintf("; edge node %s: stage %s, state %s, round %d, metrics %v; want train, completed, round 3, metrics %v",
				n.Name, n.Stage, n.State, n.Round, n.Metrics, want[n.Name])
		}
		return done, nil
	})
}

func TestPlayWorkerPlaysALearningCycleRound(t *testing.T) {
	// The example's Dataset and models are files on edge-0, under the
	// local run's root of that node; a real worker writes its model there.
	bin := built(t, "./cmd/kubectl-nereid")
	root := filepath.Join(framework.OutDir(), "edge", "edge-0", "root")
	const dataset = "/data/helmet_detection/train_data/train_data.txt"
	const deployModel = "/models/deploy_model/saved_model.pb"
	const newModel = "/output/round-1/train/model.pb"
	writeNodeFile(t, root, "/models/base_model/model.ckpt", "initial model")
	writeNodeFile(t, root, deployModel, "initial model")
	writeNodeFile(t, root, dataset, samples(0, 100))

	ns := applyExample(t, "incrementallearningjob")
	const job = "helmet-detection-demo"
	sedna := nereidclient.NewForConfigOrDie(framework.RESTConfig())
	cycle := func(ctx context.Context) (sednav1.CycleStatus, error) {
		j, err := sedna.SednaV1alpha1().IncrementalLearningJobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return sednav1.CycleStatus{}, err
		}
		return j.Status.CycleStatus, nil
	}
	framework.Eventually(t, 2*time.Minute, "round 1 waiting for its train trigger", func(ctx context.Context) (bool, error) {
		s, err := cycle(ctx)
		return err == nil && s.Round == 1 && s.Stage == sednav1.StageTrain && s.State == sednav1.StageWaiting, err
	})
	// New samples past the trigger's 500: the LocalController starts round 1.
	writeNodeFile(t, root, dataset, samples(0, 601))
	train := runningWorkers(t, ns, "train", 1)[0]
	writeNodeFile(t, root, newModel, "model of round 1")
	playWorker(t, bin, ns, train.Name, "--status", "completed", "--model-url", newModel, "--metric", "precision=0.75", "--finish")
	eval := runningWorkers(t, ns, "eval", 1)[0]
	playWorker(t, bin, ns, eval.Name, "--status", "completed", "--model-url", newModel, "--model-url", deployModel,
		"--metric", "precision_delta=[0.15,0.12]", "--finish")

	var round sednav1.RoundStatus
	framework.Eventually(t, 2*time.Minute, "round 1 decided", func(ctx context.Context) (bool, error) {
		s, err := cycle(ctx)
		if err != nil || len(s.History) == 0 {
			return false, err
		}
		round = s.History[0]
		return round.Result != "", nil
	})
	if round.Round != 1 || round.Result != "Deployed" || !strings.Contains(round.Message, "precision_delta") {
		t.Errorf("round %d: %s (%s); want round 1 Deployed on precision_delta", round.Round, round.Result, round.Message)
	}
}

// samples are the lines of a txt dataset's samples from to to.
func samples(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "images/%06d.jpg labels/%06d.txt\n", i, i)
	}
	return b.String()
}

// writeNodeFile writes content at a node path of the node whose root is root.
func writeNodeFile(t *testing.T, root, path, content string) {
	t.Helper()
	file := filepath.Join(root, path)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
