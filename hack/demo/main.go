// Command demo runs an example on the local run and plays the workers' part.
//
// With -example federatedlearningjob (make demo), for each training worker it
// posts to the LocalController of the worker's node exactly what a Sedna
// training worker posts, round after round, then marks the pods finished the
// way a kubelet would, so that `kubectl get fl -w` shows the job go Pending →
// Running → Succeeded and `kubectl get fl -o yaml` shows what the cloud heard
// from each edge node.
//
// With -example incrementallearningjob or lifelonglearningjob (make
// demo-incremental, make demo-lifelong) it grows the example's dataset on
// edge-0's node root until the LocalController's train trigger fires, then
// plays the train and eval workers of each round, so that `kubectl get il -w`
// shows the stages go by, round after round.
//
// With -example dijob (make demo-dijob) it applies examples/dijob/dijob.yaml,
// shows what DI-engine's workers find once the job runs (their pods, DI_RANK,
// DI_NODES, the headless Service, the replicas HTTP API's GET replicas as
// the learner calls it), then plays the learner and the evaluator
// to their end, so that the job goes Succeeded and its cleanPodPolicy deletes
// the collectors.
//
// With -example dijob-v1 (make demo-dijob-v1) it applies examples/dijob-v1,
// a coordinator-driven diengine.opendilab.org/v1alpha1 job, waits for the
// coordinator pod the GlobalManager makes, and plays that coordinator against
// the v1 replicas server at its KUBERNETES_SERVER_URL, from its pod's
// address: it asks for 2 collectors and a learner, lists the replicas,
// reports a collector failed, gives one back, then ends, so that the job
// goes Succeeded (read in v1alpha1). It stops within 5 minutes, saying what
// it waited for when something does not come.
//
// The workers' reports are built, sent and their pods finished by
// pkg/plugin/playworker, as `kubectl nereid play-worker` sends them.
//
// It needs `make local-up` first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nereid-ml/nereid/internal/command"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/plugin/playworker"
)

func main() {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: demo [flags]

Runs an example on the local run (make local-up first) and plays its workers'
part, so that kubectl shows the job go from start to end.

Flags:
`)
		command.PrintFlags(fs)
	}
	outDir := fs.String("out-dir", "_output/local", "State dir of the local run (make local-up).")
	namespace := fs.String("namespace", "demo", "Namespace to run the example in.")
	example := fs.String("example", "federatedlearningjob",
		"Example to run: federatedlearningjob, incrementallearningjob, lifelonglearningjob, dijob or dijob-v1.")
	rounds := fs.Int("rounds", 3, "Training rounds each worker reports (federated), or learning-cycle rounds to play.")
	pause := fs.Duration("pause", 2*time.Second, "Pause between rounds (dijob, dijob-v1: before each worker ends), so there is time to watch.")
	checkPeriod := fs.Int("check-period-seconds", 0,
		"incrementallearningjob, lifelonglearningjob: how often the job's train trigger checks its dataset, in seconds (0: the example's 15); tests set 1 to play rounds without waiting.")
	_ = command.ParseFlags(fs, os.Args[1:]) // ExitOnError: Parse exits on --help and a bad flag.
	var err error
	if _, cycle := cycleExamples[*example]; *checkPeriod < 0 || *checkPeriod > 0 && !cycle {
		fmt.Fprintf(os.Stderr, "demo: -check-period-seconds=%d: want 0, or seconds for -example incrementallearningjob or lifelonglearningjob\n", *checkPeriod)
		os.Exit(2)
	}
	switch *example {
	case "federatedlearningjob":
		err = run(*outDir, *namespace, *rounds, *pause)
	case "incrementallearningjob", "lifelonglearningjob":
		err = runCycle(*outDir, *namespace, *example, *rounds, *pause, int32(*checkPeriod))
	case "dijob":
		err = runDIJob(*outDir, *namespace, *pause)
	case "dijob-v1":
		err = runDIJobV1(*outDir, *namespace, *pause)
	default:
		err = fmt.Errorf("-example %q is not one of federatedlearningjob, incrementallearningjob, lifelonglearningjob, dijob, dijob-v1", *example)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// localRun reads what local-up wrote: the kubeconfig, and the LC_SERVER of
// each edge node's LocalController.
func localRun(outDir string) (kubeconfig string, lcServer map[string]string, err error) {
	lcServer, err = playworker.LocalControllers(outDir)
	if err != nil {
		return "", nil, fmt.Errorf("%w: run make local-up first", err)
	}
	return filepath.Join(outDir, "kubeconfig"), lcServer, nil
}

// demoRun is the local run the demo talks to.
type demoRun struct {
	kube       kubernetes.Interface
	sedna      sednaclient.Interface
	kubeconfig string
	// lcURL is each edge node's LC_SERVER.
	lcURL map[string]string
	// outDir is local-up's state folder.
	outDir string
	// poster sends the workers' reports, each from its pod's address.
	poster *playworker.Poster
}

// start connects to the local run, deletes the job an earlier run of the
// demo left (job is "<resource>/<name>"), creates ns if needed and applies
// manifests (a file or folder of examples/) in it; before runs after the
// delete and before the apply (it prepares the node's files).
func start(ctx context.Context, outDir, ns, job, manifests string, before func(*demoRun) error) (*demoRun, error) {
	kubeconfig, lcURL, err := localRun(outDir)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	d := &demoRun{kube: kubernetes.NewForConfigOrDie(cfg), sedna: sednaclient.NewForConfigOrDie(cfg), kubeconfig: kubeconfig, lcURL: lcURL, outDir: outDir}
	d.poster = &playworker.Poster{Kube: d.kube}
	if err := d.deleteEarlierRun(ctx, ns, job); err != nil {
		return nil, err
	}
	if before != nil {
		if err := before(d); err != nil {
			return nil, err
		}
	}
	if _, err := d.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		if _, err := d.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	say("applying %s in namespace %s", manifests, ns)
	apply := exec.CommandContext(ctx, kubectlPath(), "--kubeconfig", kubeconfig, "apply", "-n", ns, "-f", manifests)
	apply.Stdout, apply.Stderr = os.Stdout, os.Stderr
	if err := apply.Run(); err != nil {
		return nil, fmt.Errorf("kubectl apply: %w", err)
	}
	return d, nil
}

// deleteEarlierRun deletes the job an earlier run of the demo left (it has
// finished, or stands where that run stopped), and waits until it is gone
// with its pods, so that this run starts the job afresh rather than finding
// it done. Its Datasets and Models stay: applying them again changes nothing.
func (d *demoRun) deleteEarlierRun(ctx context.Context, ns, job string) error {
	get := exec.CommandContext(ctx, kubectlPath(), "--kubeconfig", d.kubeconfig, "get", "-n", ns, job, "--ignore-not-found", "-o", "name")
	out, err := get.Output()
	if err != nil {
		return fmt.Errorf("looking for %s of an earlier run: %w", job, err)
	}
	if strings.TrimSpace(string(out)) == "" {
		return nil
	}
	say("deleting %s of an earlier run, and its pods", job)
	// Foreground: the job goes only once the garbage collector has deleted
	// its pods, so none of them is left to be mistaken for this run's.
	del := exec.CommandContext(ctx, kubectlPath(), "--kubeconfig", d.kubeconfig, "delete", "-n", ns, job,
		"--ignore-not-found", "--cascade=foreground", "--wait", "--timeout=2m")
	del.Stdout, del.Stderr = os.Stdout, os.Stderr
	if err := del.Run(); err != nil {
		return fmt.Errorf("deleting %s of an earlier run: %w", job, err)
	}
	return nil
}

// kubectlPath is the kubectl that make tools builds, of the local run's
// Kubernetes version, when it is there; else the one on PATH.
func kubectlPath() string {
	cache := os.Getenv("NEREID_CACHE_DIR")
	if cache == "" {
		cache = ".cache"
	}
	p := filepath.Join(cache, "bin", "kubectl")
	if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
		return p
	}
	return "kubectl"
}

func run(outDir, ns string, rounds int, pause time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const jobName = "surface-defect-detection"
	d, err := start(ctx, outDir, ns, "federatedlearningjob/"+jobName, "examples/federatedlearningjob/", func(*demoRun) error {
		return writeDatasets(outDir, "examples/federatedlearningjob/00-datasets.yaml", 100)
	})
	if err != nil {
		return err
	}
	kube, sedna := d.kube, d.sedna
	var job *sednav1.FederatedLearningJob
	say("waiting for the GlobalManager to start the workers (kubectl get fl -n %s -w)", ns)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		job, err = sedna.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, jobName, metav1.GetOptions{})
		return err == nil && job.Status.Phase == sednav1.FLJobRunning, nil
	}); err != nil {
		return fmt.Errorf("the job did not reach Running: %w", err)
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
	if err != nil {
		return err
	}
	var trainers []corev1.Pod
	var aggregator *corev1.Pod
	for i := range pods.Items {
		p := pods.Items[i]
		switch p.Labels[common.LabelWorkerRole] {
		case "training":
			trainers = append(trainers, p)
		case "aggregation":
			aggregator = &pods.Items[i]
		}
	}
	say("job Running: %d training workers, aggregator %s", len(trainers), aggregator.Name)

	for round := 1; round <= rounds; round++ {
		for _, p := range trainers {
			if err := d.playTrainer(ctx, &p, round, rounds); err != nil {
				return err
			}
		}
		time.Sleep(pause)
	}
	say("training workers done; marking their pods and the aggregator Succeeded (playing the kubelet)")
	for _, p := range append(trainers, *aggregator) {
		if err := playworker.FinishPod(ctx, kube, ns, p.Name, corev1.PodSucceeded); err != nil {
			return err
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		job, err = sedna.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, jobName, metav1.GetOptions{})
		return err == nil && job.Status.Phase == sednav1.FLJobSucceeded && len(job.Status.EdgeNodes) == len(trainers), nil
	}); err != nil {
		return fmt.Errorf("the job did not succeed with a report from every edge node: %w", err)
	}
	say("job %s Succeeded; what the cloud last heard from each edge node:", jobName)
	for _, n := range job.Status.EdgeNodes {
		say("  %s: report %d from %s, %s %s, %v", n.Name, n.LastReportID, n.Worker, n.Stage, n.State, n.Metrics)
	}
	return nil
}

// playTrainer posts what a Sedna training worker posts in round of rounds:
// running, or completed with its model and accuracy in the last round.
func (d *demoRun) playTrainer(ctx context.Context, p *corev1.Pod, round, rounds int) error {
	status := edgeproto.WorkerRunning
	var results []map[string]any
	if round == rounds {
		status = edgeproto.WorkerCompleted
		results = playworker.ModelResults("pb", []string{"/model/surface-defect/round-" + strconv.Itoa(round)},
			map[string]any{"accuracy": 0.80 + 0.04*float64(round)})
	}
	loss := map[string]any{"loss": 1.0 / float64(round+1)}
	if err := d.report(ctx, p, playworker.TrainingRound(round, rounds, status, loss, results)); err != nil {
		return err
	}
	say("%s on %s: round %d/%d %s (posted to its LocalController)", p.Name, p.Spec.NodeName, round, rounds, status)
	return nil
}

// report posts r as worker pod p to the LocalController of p's node, from
// p's address, as the job its labels name.
func (d *demoRun) report(ctx context.Context, p *corev1.Pod, r playworker.Report) error {
	w, err := playworker.WorkerOf(p)
	if err != nil {
		return err
	}
	body, err := r.Body(w)
	if err != nil {
		return err
	}
	return d.poster.Post(ctx, d.lcURL[p.Spec.NodeName], p.Namespace, p.Name, body)
}
