package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
	"github.com/nereid-ml/nereid/test/framework"
	"github.com/nereid-ml/nereid/test/sednalib"
)

// sednaLibrary is Sedna's own library beside the checkout, or skips the
// test: without ../shared there is none; without root or Debian's Python
// packages (make test-integration installs them as root) it cannot run.
func sednaLibrary(t *testing.T) string {
	t.Helper()
	lib, err := sednalib.SednaLib(framework.SednaCompat(t))
	if err != nil {
		t.Skipf("Sedna's worker library is not here: %v", err)
	}
	if err := sednalib.Usable(t.Context(), lib); err != nil {
		t.Skipf("Sedna's worker library cannot run here: %v", err)
	}
	return lib
}

// startSednaWorker runs role of the harness as pod's worker, stopped at the
// end of the test; its output is printed if the test fails.
func startSednaWorker(t *testing.T, h *sednalib.Harness, lib string, pod *corev1.Pod, run sednalib.Run) *sednalib.Worker {
	t.Helper()
	w, err := h.Start(t.Context(), lib, pod, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Stop()
		if t.Failed() {
			t.Logf("%s's worker (%s) said:\n%s", pod.Name, run.Role, tail(w.Log(), 40))
		}
	})
	return w
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runningPods waits for want pods of job to run with an address, and returns
// them by worker role.
func runningPods(t *testing.T, ns string, job metav1.Object, want int) map[string][]*corev1.Pod {
	t.Helper()
	var byRole map[string][]*corev1.Pod
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("%d pods of %s running", want, job.GetName()), func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, job)
		if err != nil {
			return false, err
		}
		byRole = map[string][]*corev1.Pod{}
		n := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				byRole[p.Labels[common.LabelWorkerRole]] = append(byRole[p.Labels[common.LabelWorkerRole]], p)
				n++
			}
		}
		return n == want, nil
	})
	return byRole
}

// waitForWorkerExit waits for w to exit, and fails the test unless it
// exited 0.
func waitForWorkerExit(t *testing.T, w *sednalib.Worker, within time.Duration) {
	t.Helper()
	select {
	case <-w.Done():
		if w.Err() != nil {
			t.Fatalf("%s's worker exited with %v:\n%s", w.Pod.Name, w.Err(), tail(w.Log(), 40))
		}
	case <-time.After(within):
		t.Fatalf("%s's worker still runs after %s:\n%s", w.Pod.Name, within, tail(w.Log(), 40))
	}
}

// Sedna's own federated learning example, its manifests and its worker
// scripts' classes (AggregationServer, FederatedLearning) unchanged, trains
// three rounds: every trainer report reaches the job's status. Sedna's
// FederatedLearning sends ownerKind "default"; the LocalController takes the
// owner from the pod.
func TestSednasFederatedLearningWorkersTrainThreeRoundsIntoStatus(t *testing.T) {
	t.Parallel()
	lib := sednaLibrary(t)
	var job sednav1.FederatedLearningJob
	framework.SednaSample(t, "federatedlearningjob_v1alpha1.yaml", &job, map[string]string{"cloud": "cloud-0", "edge1": "edge-0", "edge2": "edge-1"})
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	lcs := map[string]*framework.LocalController{}
	h := &sednalib.Harness{Kube: framework.KubeClient(t), LogDir: t.TempDir(), Nodes: map[string]sednalib.Node{"cloud-0": {Root: t.TempDir()}}}
	for _, node := range []string{"edge-0", "edge-1"} {
		lc := framework.StartLocalController(t, hub, node, framework.EdgeIdentity(t, ns, node))
		lcs[node] = lc
		h.Nodes[node] = sednalib.Node{Root: lc.Root, LocalController: sednalib.URLHost(lc.WorkerURL)}
		writeNodeFile(t, lc.Root, "/data/train.txt", "images/0.jpg,0\nimages/1.jpg,1\nimages/2.jpg,0\n")
	}
	sc := framework.SednaClient(t).SednaV1alpha1()
	for i, node := range []string{"edge-0", "edge-1"} {
		ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: job.Spec.TrainingWorkers[i].Dataset.Name},
			Spec: sednav1.DatasetSpec{URL: "/data/train.txt", Format: "txt", NodeName: node}}
		if _, err := sc.Datasets(ns).Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	model := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: job.Spec.AggregationWorker.Model.Name},
		Spec: sednav1.ModelSpec{URL: "/model", Format: "pb"}}
	if _, err := sc.Models(ns).Create(t.Context(), model, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := sc.FederatedLearningJobs(ns).Create(t.Context(), &job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := runningPods(t, ns, created, 3)
	startSednaWorker(t, h, lib, pods["aggregation"][0], sednalib.Run{Role: "fl-aggregator"})
	var trainers []*sednalib.Worker
	for _, p := range pods["training"] {
		// Sedna's example images set BACKEND_TYPE; Keras's backend is the
		// one whose weights FederatedLearning sends.
		trainers = append(trainers, startSednaWorker(t, h, lib, p, sednalib.Run{Role: "fl-trainer", ImageEnv: map[string]string{"BACKEND_TYPE": "KERAS"}}))
	}
	for _, w := range trainers {
		waitForWorkerExit(t, w, 3*time.Minute)
	}
	framework.Eventually(t, 60*time.Second, "both edge nodes' round 3 in the job's status", func(ctx context.Context) (bool, error) {
		j, err := sc.FederatedLearningJobs(ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rounds := map[string]int32{}
		for _, n := range j.Status.EdgeNodes {
			rounds[n.Name] = n.Round
		}
		return rounds["edge-0"] == 3 && rounds["edge-1"] == 3 && j.Status.Round == 3 && j.Status.SlowestRound == 3, nil
	})
	for node, lc := range lcs {
		framework.WaitForReportsAcknowledged(t, lc)
		got, err := sc.FederatedLearningJobs(ns).Get(t.Context(), created.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range got.Status.EdgeNodes {
			// Sedna's trainer reports each round once: running, running, completed.
			if n.Name == node && n.ReportsApplied != 3 {
				t.Errorf("%s: %d reports applied, want 3", node, n.ReportsApplied)
			}
		}
	}
}

// writeNodeFile writes content at the node path p under a node's root.
func writeNodeFile(t *testing.T, root, p, content string) {
	t.Helper()
	full := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Sedna's own joint inference example: its edge worker's JointInference
// (JOB_NAME unset, so it reports ownerName "sedna", Sedna's default) posts
// its counters every LC_PERIOD, and they reach the service's status.
func TestSednasJointInferenceEdgeWorkerCountsReachTheServiceStatus(t *testing.T) {
	t.Parallel()
	lib := sednaLibrary(t)
	var svc sednav1.JointInferenceService
	framework.SednaSample(t, "jointinferenceservice_v1alpha1.yaml", &svc, map[string]string{"edge-node": "edge-0"})
	svc.Namespace = "" // the sample's is default; the test's namespace is its own
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	h := &sednalib.Harness{Kube: framework.KubeClient(t), LogDir: t.TempDir(),
		Nodes: map[string]sednalib.Node{"edge-0": {Root: lc.Root, LocalController: sednalib.URLHost(lc.WorkerURL)}}}
	// The sample's volumes are of type Directory: the node has them.
	for _, dir := range []string{"/joint_inference/output", "/joint_inference/video"} {
		if err := os.MkdirAll(filepath.Join(lc.Root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeNodeFile(t, lc.Root, "/models/little.pb", "[[0, 0, 0, 0]]")
	sc := framework.SednaClient(t).SednaV1alpha1()
	for name, url := range map[string]string{svc.Spec.EdgeWorker.Model.Name: "/models/little.pb", svc.Spec.CloudWorker.Model.Name: "/models/big.pb"} {
		m := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sednav1.ModelSpec{URL: url, Format: "pb"}}
		if _, err := sc.Models(ns).Create(t.Context(), m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sc.JointInferenceServices(ns).Create(t.Context(), &svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var edge *corev1.Pod
	framework.Eventually(t, 60*time.Second, "the edge worker to run", func(ctx context.Context) (bool, error) {
		pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.LabelWorkerRole + "=edge"})
		if err != nil || len(pods.Items) != 1 {
			return false, err
		}
		edge = &pods.Items[0]
		return edge.Status.Phase == corev1.PodRunning && edge.Status.PodIP != "", nil
	})
	// Its reporter posts every LC_PERIOD seconds (30 from Nereid, as from
	// Sedna): 1 here, so that the test waits seconds, not minutes.
	startSednaWorker(t, h, lib, edge, sednalib.Run{Role: "ji-edge-only", Override: map[string]string{"LC_PERIOD": "1", "NEREID_INFERENCES": "7"}})
	framework.Eventually(t, 60*time.Second, "the edge worker's counts in the service's status", func(ctx context.Context) (bool, error) {
		ji, err := sc.JointInferenceServices(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _ := edgestatus.MetricValue(ji.Status.Metrics, "inferenceNumber")
		return n == 7, nil
	})
}

// runningPod waits for the pod name of ns to run with an address.
func runningPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, 90*time.Second, "pod "+name+" to run", func(ctx context.Context) (bool, error) {
		p, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "", nil
	})
	return pod
}

// Sedna's own incremental learning example, with Sedna's worker classes:
// the dataset grows on the edge, IncrementalLearning trains and evaluates,
// the better model is deployed, and the inference worker, which runs from
// the start with hot update on, loads it by itself (Sedna's
// ModelLoadingThread, from the file the LocalController writes) and says so.
func TestSednasIncrementalLearningWorkersDeployByHotUpdate(t *testing.T) {
	t.Parallel()
	lib := sednaLibrary(t)
	var job sednav1.IncrementalLearningJob
	framework.SednaSample(t, "incrementallearningjob_v1alpha1.yaml", &job, map[string]string{"edge-node": "edge-0"})
	// The sample checks its trigger every minute from 02:00: every second
	// here, at any hour. Hot update on, polled every second.
	job.Spec.TrainSpec.Trigger.CheckPeriodSeconds, job.Spec.TrainSpec.Trigger.Timer = 1, nil
	job.Spec.DeploySpec.Model.HotUpdateEnabled, job.Spec.DeploySpec.Model.PollPeriodSeconds = true, 1
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	h := &sednalib.Harness{Kube: framework.KubeClient(t), LogDir: t.TempDir(),
		Nodes: map[string]sednalib.Node{"edge-0": {Root: lc.Root, LocalController: sednalib.URLHost(lc.WorkerURL)}}}
	for _, dir := range []string{"/incremental_learning/video", "/incremental_learning/he"} {
		if err := os.MkdirAll(filepath.Join(lc.Root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	untrained := "[[0, 0, 0, 0]]"
	writeNodeFile(t, lc.Root, "/models/initial/model.pb", untrained)
	writeNodeFile(t, lc.Root, "/models/deploy/model.pb", untrained)
	writeNodeFile(t, lc.Root, "/data/helmet/train.txt", "")
	sc := framework.SednaClient(t).SednaV1alpha1()
	for name, url := range map[string]string{job.Spec.InitialModel.Name: "/models/initial/model.pb", job.Spec.DeploySpec.Model.Name: "/models/deploy/model.pb"} {
		m := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sednav1.ModelSpec{URL: url, Format: "pb"}}
		if _, err := sc.Models(ns).Create(t.Context(), m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: job.Spec.Dataset.Name},
		Spec: sednav1.DatasetSpec{URL: "/data/helmet/train.txt", Format: "txt", NodeName: "edge-0"}}
	if _, err := sc.Datasets(ns).Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := sc.IncrementalLearningJobs(ns).Create(t.Context(), &job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inference := startSednaWorker(t, h, lib, runningPod(t, ns, job.Name+"-deploy-0"), sednalib.Run{Role: "il-inference"})

	// The dataset grows past the sample's threshold (500).
	var lines strings.Builder
	for i := range 600 {
		fmt.Fprintf(&lines, "images/%d.jpg %d\n", i, i%2)
	}
	writeNodeFile(t, lc.Root, "/data/helmet/train.txt", lines.String())
	waitForWorkerExit(t, startSednaWorker(t, h, lib, runningPod(t, ns, job.Name+"-train-1-1"), sednalib.Run{Role: "il-train"}), 2*time.Minute)
	waitForWorkerExit(t, startSednaWorker(t, h, lib, runningPod(t, ns, job.Name+"-eval-1-1"), sednalib.Run{Role: "il-eval"}), 2*time.Minute)

	framework.Eventually(t, 60*time.Second, "round 1 deployed", func(ctx context.Context) (bool, error) {
		j, err := sc.IncrementalLearningJobs(ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if j.Status.State == sednav1.StageFailed {
			return false, fmt.Errorf("the job failed: %+v", j.Status.History)
		}
		return j.Status.DeployedRound == 1 && j.Status.InferenceWorker == job.Name+"-deploy-0", nil
	})
	framework.Eventually(t, 60*time.Second, "the inference worker to say it loaded the round's model", func(ctx context.Context) (bool, error) {
		return framework.CountEvents(t, ns, created.UID, "ModelHotUpdated", job.Name+"-deploy-0") > 0, nil
	})
	framework.Eventually(t, 30*time.Second, "the inference worker to serve the trained model", func(context.Context) (bool, error) {
		return strings.Contains(inference.Log(), "serving a model of weight 1.0"), nil
	})
}

// Sedna's own lifelong learning example, with Sedna's worker classes and
// knowledge base server: two full rounds. Round 1 trains the knowledge
// base, evaluates it, and is deployed to a new inference worker that serves
// it (Sedna's inference reads MODEL_URLS); round 2's train worker updates
// round 1's index (Sedna's LifelongLearning.update reads CLOUD_KB_INDEX as
// a node path under DATA_PATH_PREFIX), and is deployed in turn.
func TestSednasLifelongLearningWorkersRunTwoRounds(t *testing.T) {
	t.Parallel()
	lib := sednaLibrary(t)
	var job sednav1.LifelongLearningJob
	framework.SednaSample(t, "lifelonglearningjobv1alpha1.yaml", &job, map[string]string{"edge-node": "edge-0"})
	// The sample checks its trigger every minute from 02:00: every second
	// here, at any hour.
	job.Spec.TrainSpec.Trigger.CheckPeriodSeconds, job.Spec.TrainSpec.Trigger.Timer = 1, nil
	ns := framework.Namespace(t)
	h := &sednalib.Harness{Kube: framework.KubeClient(t), LogDir: t.TempDir()}
	// Sedna's knowledge base server, which its installation runs in the
	// cloud; the GlobalManager gives its address to the workers (KB_SERVER).
	kbAddr := "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))
	kbDir := t.TempDir()
	kb, err := h.StartOnHost(lib, "ll-kb", map[string]string{"KnowledgeBaseServer": "http://" + kbAddr,
		"KnowledgeBasePath": kbDir, "KB_URL": "sqlite:///" + filepath.Join(kbDir, "kb.sqlite3")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kb.Stop()
		if t.Failed() {
			t.Logf("the knowledge base server said:\n%s", tail(kb.Log(), 20))
		}
	})
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns, "--kb-server=http://"+kbAddr)
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	h.Nodes = map[string]sednalib.Node{"edge-0": {Root: lc.Root, LocalController: sednalib.URLHost(lc.WorkerURL)}}
	writeNodeFile(t, lc.Root, "/data/ll/index.txt", "")
	sc := framework.SednaClient(t).SednaV1alpha1()
	ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: job.Spec.Dataset.Name},
		Spec: sednav1.DatasetSpec{URL: "/data/ll/index.txt", Format: "txt", NodeName: "edge-0"}}
	if _, err := sc.Datasets(ns).Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := sc.LifelongLearningJobs(ns).Create(t.Context(), &job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var samples strings.Builder
	for round := int32(1); round <= 2; round++ {
		// The dataset grows past the sample's threshold (500): the
		// example's index lines, of two origins (real: Berlin, sim).
		for i := range 600 {
			origin, city := "real", "berlin"
			if i%2 == 1 {
				origin, city = "sim", "sim"
			}
			fmt.Fprintf(&samples, "%s/%s_%d_%d.png %s/%s_%d_%d_label.png\n", origin, city, round, i, origin, city, round, i)
		}
		writeNodeFile(t, lc.Root, "/data/ll/index.txt", samples.String())
		for _, stage := range []string{"train", "eval"} {
			pod := runningPod(t, ns, fmt.Sprintf("%s-%s-%d-1", job.Name, stage, round))
			waitForWorkerExit(t, startSednaWorker(t, h, lib, pod, sednalib.Run{Role: "ll-" + stage}), 2*time.Minute)
		}
		framework.Eventually(t, 60*time.Second, fmt.Sprintf("round %d deployed", round), func(ctx context.Context) (bool, error) {
			j, err := sc.LifelongLearningJobs(ns).Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if n := len(j.Status.History); n > 0 && j.Status.History[n-1].Result == sednav1.RoundFailed {
				return false, fmt.Errorf("round %d failed: %s", j.Status.History[n-1].Round, j.Status.History[n-1].Message)
			}
			return j.Status.DeployedRound == round, nil
		})
	}
	// The inference worker of round 2 serves the knowledge base.
	deploy2 := runningPod(t, ns, job.Name+"-deploy-2")
	inference := startSednaWorker(t, h, lib, deploy2, sednalib.Run{Role: "ll-inference"})
	framework.Eventually(t, 60*time.Second, "the inference worker to serve", func(context.Context) (bool, error) {
		return strings.Contains(inference.Log(), "inference of real/berlin_01.png"), nil
	})
	j, err := sc.LifelongLearningJobs(ns).Get(t.Context(), created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Sedna's train worker reports its index without metrics; the eval
	// worker's precision_score is the knowledge base's precision (0 here:
	// the harness's estimator knows only samples it trained on, and a
	// round's test split is new), and its index is what the inference
	// worker serves. The unit tests of the lifelong kind show a precision
	// other than 0 taken the same way.
	last := j.Status.History[len(j.Status.History)-1]
	kbs := j.Status.KnowledgeBase
	if len(last.Models) == 0 || len(last.Models[0].Metrics) == 0 || last.Models[0].Metrics[0].Key != "precision_score" ||
		kbs.AIModels.NumberOfAIModels != 1 || strconv.FormatFloat(kbs.AIModels.ListOfAIModels[0].AveragePrecision, 'f', 1, 64) != last.Models[0].Metrics[0].Value {
		t.Errorf("knowledge base %+v: want the eval's precision_score of round %d's model %+v", kbs, last.Round, last.Models)
	}
	if got, want := envOf(deploy2)["MODEL_URLS"], "/output/round-2/eval/index.pkl"; !strings.HasSuffix(got, want) {
		t.Errorf("round 2's inference worker reads MODEL_URLS %q, want the eval's index %s", got, want)
	}
}
