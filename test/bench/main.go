// Command bench measures the GlobalManager on a real local control plane and
// prints what it measured, beside a ceiling measured in the same run:
//
//   - create: 500 FederatedLearningJobs (1 aggregator + 2 training workers)
//     at once; time until all 1,500 pods and 500 Services exist, against a plain
//     client-go program creating the same objects with no client-side rate limit
//     and 16 goroutines (the ceiling), and against one that also creates the
//     jobs and writes each one's status once (the floor: what any controller
//     of these jobs costs); the GlobalManager runs without gang scheduling;
//   - self-heal: 200 worker pods deleted one at a time; delete → replacement created;
//   - respec: 100 jobs edited one at a time; edit → all new-spec workers created;
//   - the GlobalManager's resident memory at the end.
//
// Then the DIJob section (dijob.go) creates 200 DIJobs of 1 learner + 4
// collectors + 1 evaluator at once, with the allocator on as by default, and
// compares their create rate against the same ceiling, measured once per run.
//
// Then, on the same control plane, the edge section (edge.go) measures the
// cloud–edge channel: a GlobalManager with its edge hub and many simulated
// LocalControllers (see runEdge).
//
// Each section prints its table and writes its results as JSON under
// _output/bench/. Run it with `make bench`; `-only globalmanager`, `-only
// dijob` or `-only edge` runs one section.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nereid-ml/nereid/hack/localrun"
	"github.com/nereid-ml/nereid/internal/command"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	"github.com/nereid-ml/nereid/test/framework"
)

type options struct {
	kubeconfig string
	only       string
	jobs       int
	heal       int
	respec     int
	out        string
	gmFlags    string // more flags for the section's GlobalManager
	quota      bool
	dijob      dijobOptions
	edge       edgeOptions
}

// result is one measured quantity.
type result struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Goal  string  `json:"goal,omitempty"`
	Note  string  `json:"note,omitempty"`
}

func main() {
	var o options
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: bench [flags]

Measures the GlobalManager, DIJobs and the cloud–edge channel on a fresh local
control plane, each against a ceiling measured in the same run, and prints a
table per section (make bench).

Flags:
`)
		command.PrintFlags(fs)
	}
	o.addFlags(fs)
	_ = command.ParseFlags(fs, os.Args[1:]) // ExitOnError: Parse exits on --help and a bad flag.
	if o.quota {
		quotaJobs = o.jobs
	}
	if o.only != "" && o.only != "globalmanager" && o.only != "dijob" && o.only != "edge" && o.only != "edge-scale" {
		fmt.Fprintf(os.Stderr, "bench: -only %q: want globalmanager, dijob, edge or edge-scale\n", o.only)
		os.Exit(2)
	}
	if o.only == "edge-scale" && o.edge.scaleNodes == 0 {
		fmt.Fprintln(os.Stderr, "bench: -only edge-scale needs -edge-scale-nodes above 0")
		os.Exit(2)
	}
	if err := errors.Join(o.dijob.validate(), o.edge.validate()); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// addFlags adds the bench's flags to fs, each section's included.
func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Use this running cluster instead of starting a fresh local control plane (results are then less comparable).")
	fs.IntVar(&o.jobs, "jobs", 500, "FederatedLearningJobs created at once (each 1 aggregator + 2 training workers + 1 Service).")
	fs.IntVar(&o.heal, "heal", 200, "Worker pods deleted one at a time for the self-heal latency.")
	fs.IntVar(&o.respec, "respec", 100, "Jobs edited one at a time for the respec latency.")
	fs.StringVar(&o.out, "out", "", "JSON file of the GlobalManager section (default _output/bench/globalmanager-<time>.json).")
	fs.StringVar(&o.gmFlags, "gm-flags", "", "More flags for the GlobalManager section's GlobalManager, space-separated (say \"--federatedlearningjob-workers=8\"), to compare settings; the results then describe that GlobalManager, not the default one.")
	fs.BoolVar(&o.quota, "quota", false, "Give the ceiling's, the floor's and the GlobalManager's namespaces a ResourceQuota (pods, services; room for every job): "+
		"all three then pay the API server's quota admission, and the GlobalManager's ratio to them shows what its own admission of jobs under a quota costs.")
	fs.StringVar(&o.only, "only", "", "Run one section only: globalmanager, dijob, edge (its fleet at scale too, unless -edge-scale-nodes 0) or edge-scale (only the fleet at scale); default all, in that order.")
	o.dijob.addFlags(fs)
	o.edge.addFlags(fs)
}

func run(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	external := o.kubeconfig != ""
	stop := func(bool) {}
	defer func() { stop(false) }()
	if external {
		if err := framework.UseCluster(o.kubeconfig); err != nil {
			return err
		}
	} else {
		kc, stopCluster, err := framework.StartCluster(apiServerProfiling, routablePodAddresses, steadyFleet)
		if err != nil {
			return err
		}
		o.kubeconfig, stop = kc, stopCluster
	}
	useCluster(o.kubeconfig, !external)
	kube, sedna := benchClients()

	runs := func(section string) bool { return o.only == "" || o.only == section }
	// One ceiling per run, for every section that creates pods through the
	// GlobalManager, so that their ratios compare with one another.
	var c ceiling
	if runs("globalmanager") || runs("dijob") {
		var err error
		if c, err = measureCeiling(ctx, kube, o.jobs); err != nil {
			return fmt.Errorf("measuring the ceiling: %w", err)
		}
	}
	if runs("globalmanager") {
		floor, err := measureFloor(ctx, kube, sedna, o.jobs)
		if err != nil {
			return fmt.Errorf("measuring the floor: %w", err)
		}
		results, err := benchGlobalManager(ctx, o, kube, sedna, c, floor)
		if err != nil {
			return err
		}
		printTable(results)
		if err := writeJSON(o.out, "globalmanager", results); err != nil {
			return err
		}
	}
	if runs("dijob") {
		if err := runDIJob(ctx, o.dijob, kube, sedna, c); err != nil {
			return err
		}
	}
	if runs("edge") {
		results, err := runEdge(ctx, o.edge, external, kube, sedna)
		if err != nil {
			return fmt.Errorf("edge: %w", err)
		}
		printTable(results)
		if err := writeJSON(o.edge.out, "edge", results); err != nil {
			return err
		}
	}
	if (runs("edge") || o.only == "edge-scale") && o.edge.scaleNodes > 0 {
		// The fleet at scale needs the first one gone: a fresh control
		// plane takes seconds, deleting the first fleet's objects minutes.
		if runs("edge") {
			if external {
				progress("edge at scale: waiting for namespace %s to be gone", edgeNamespace)
				if err := waitNamespaceGone(ctx, kube, edgeNamespace, 15*time.Minute); err != nil {
					return fmt.Errorf("edge at scale: %w", err)
				}
			} else {
				progress("edge at scale: a fresh control plane for %d nodes", o.edge.scaleNodes)
				stop(false)
				stop = func(bool) {}
				kc, stopCluster, err := framework.StartCluster(apiServerProfiling, routablePodAddresses, steadyFleet)
				if err != nil {
					return err
				}
				o.kubeconfig, stop = kc, stopCluster
				useCluster(o.kubeconfig, true)
				kube, sedna = benchClients()
			}
		}
		results, err := runEdge(ctx, o.edge.atScale(), external, kube, sedna)
		if err != nil {
			return fmt.Errorf("edge at scale: %w", err)
		}
		printTable(results)
		if err := writeJSON(o.edge.scaleOut, "edge-scale", results); err != nil {
			return err
		}
	}
	return nil
}

// apiServerProfileTime is how long the API server's CPU profile of a
// measured window runs, from its start: the windows of the default run
// are longer.
const apiServerProfileTime = 5 * time.Second

// benchFile is the path of one of the bench's output files.
func benchFile(name string) string {
	return filepath.Join(framework.RepoRoot(), "_output", "bench", name)
}

// apiServerProfiling is hack/local-up.sh's setting for an API server that
// serves its CPU profile, for a control plane the bench starts itself.
const apiServerProfiling = "NEREID_APISERVER_PROFILING=1"

// routablePodAddresses gives the bench's pods addresses that are not
// loopback: the bench posts as no pod, and the controller-manager's
// EndpointSlice controller refuses loopback addresses and retries, a load
// of the local run's, not of a cluster's, in every measured window.
const routablePodAddresses = "NEREID_POD_CIDR=10.244.0.1/16"

// steadyFleet keeps the bench's kwok nodes, and the LocalControllers' pods
// on them, ready while it measures. kwok renews every node's Lease every 10s,
// as a kubelet does: 980 writes a second at 9,800 nodes, which it cannot keep
// up with on a small machine (about 70 a second on 2 cores), so after
// Kubernetes' grace of 50s the controller-manager took nodes for not ready,
// tainted them and their pods with them, and the DaemonSet's status churned:
// a load of the local run's, not of a cluster's, in every measured window.
const steadyFleet = "NEREID_NODE_MONITOR_GRACE_PERIOD=10m"

// benchClients are the bench's clients of the framework's cluster, with no
// client rate limit: the bench's own client must never be the bottleneck.
func benchClients() (kubernetes.Interface, sednaclient.Interface) {
	cfg := framework.RESTConfig()
	cfg.QPS = -1
	return kubernetes.NewForConfigOrDie(cfg), sednaclient.NewForConfigOrDie(cfg)
}

// startGlobalManager starts the GlobalManager of gm as the local run and
// the tests do (hack/localrun): as the chart's ServiceAccount, with the
// chart's RBAC (its Role in the chart's namespace, which holds the leader
// election Lease, and in its edge hub's namespace when it has one),
// logging to logPath. gm.Kubeconfig is set here.
func startGlobalManager(ctx context.Context, bin, logPath string, gm localrun.GlobalManager) (*framework.Process, error) {
	own := framework.SystemNamespace
	if gm.EdgeHub != nil {
		own = gm.EdgeHub.Namespace
	}
	var err error
	if gm.Kubeconfig, err = framework.NewGlobalManagerKubeconfig(ctx, own); err != nil {
		return nil, fmt.Errorf("the GlobalManager's identity: %w", err)
	}
	p := framework.NewProcess("globalmanager", bin, logPath, gm.Args()...)
	return p, p.Start()
}

// benchGlobalManager measures the GlobalManager's create, self-heal and
// respec against the ceiling; its GlobalManager is stopped when it returns,
// so that it acts on nothing of a later section.
func benchGlobalManager(ctx context.Context, o options, kube kubernetes.Interface, sedna sednaclient.Interface, c, floor ceiling) ([]result, error) {
	results := []result{c.row, floor.row}
	bin, err := framework.BuildBinary("globalmanager")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(framework.RepoRoot(), "_output", "bench", "globalmanager.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(logPath)
	// Default settings but one: only what a local run needs (the chart's
	// identity, its Lease in the chart's namespace, a free health port, its
	// profile served), and no gang scheduling. With it the GlobalManager
	// also makes a PodGroup per job and its pods wait for the scheduler:
	// work the ceiling and the floor do not do.
	gm, err := startGlobalManager(ctx, bin, logPath, localrun.GlobalManager{
		HealthAddress: "127.0.0.1:0", LeaseNamespace: framework.SystemNamespace,
		Extra: append([]string{"--gang-scheduler=none", "--profiling"}, strings.Fields(o.gmFlags)...),
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = gm.Signal(syscall.SIGTERM, 15*time.Second) }()

	const ns = "bench-gm"
	if err := setupNamespace(ctx, kube, sedna, ns); err != nil {
		return nil, err
	}
	watcher, err := newPodWatcher(ctx, kube, ns)
	if err != nil {
		return nil, err
	}
	progress("create: %d FederatedLearningJobs at once, GlobalManager with default settings but --gang-scheduler=none", o.jobs)
	u0, err := sampleUsage(ctx, kube, gm.Pid())
	if err != nil {
		return nil, err
	}
	profiled := profileAPIServer(ctx, kube, apiServerProfileTime, benchFile("apiserver-create-cpu.pb.gz"))
	gmProfiled := profileGlobalManager(ctx, gm.HealthAddress(), apiServerProfileTime, benchFile("globalmanager-create-cpu.pb.gz"))
	took, err := createJobs(ctx, sedna, watcher, ns, o.jobs)
	if err != nil {
		return nil, fmt.Errorf("create: %w (GlobalManager log: %s)", err, logPath)
	}
	u1, err := sampleUsage(ctx, kube, gm.Pid())
	if err != nil {
		return nil, err
	}
	syncs := queueStats(ctx, gm, "federatedlearningjob")
	progress("GlobalManager during create: %s", syncs)
	gmRate := float64(4*o.jobs) / took.Seconds()
	results = append(results,
		result{Name: "GlobalManager: pods+services created", Value: round(gmRate), Unit: "objects/s",
			Note: fmt.Sprintf("%d objects in %s; %s; %s; %s; %s", 4*o.jobs, took.Round(time.Millisecond), describeUsage(u0, u1, took), syncs, profiled(), gmProfiled()) + gmFlagsNote(o.gmFlags) + quotaNote()},
		result{Name: "GlobalManager rate / ceiling", Value: round(gmRate / c.rate), Unit: "ratio", Goal: ">= 0.8"},
		result{Name: "GlobalManager rate / floor", Value: round(gmRate / floor.rate), Unit: "ratio",
			Note: "what the GlobalManager costs beyond the writes its jobs need"},
		result{Name: "GlobalManager CPU during create", Value: round(u1.cpu.gm - u0.cpu.gm), Unit: "CPU-s",
			Note: fmt.Sprintf("%.0f%% of one core over %s", 100*(u1.cpu.gm-u0.cpu.gm)/took.Seconds(), took.Round(time.Millisecond))})

	progress("self-heal: deleting %d worker pods one at a time", o.heal)
	heal, err := measureHeal(ctx, kube, watcher, ns, o.heal)
	if err != nil {
		return nil, fmt.Errorf("self-heal: %w", err)
	}
	results = append(results,
		result{Name: "self-heal latency p50", Value: ms(percentile(heal, 50)), Unit: "ms"},
		result{Name: "self-heal latency p99", Value: ms(percentile(heal, 99)), Unit: "ms", Goal: "< 1000"})

	progress("respec: editing %d jobs one at a time", o.respec)
	respec, err := measureRespec(ctx, sedna, watcher, ns, o.respec)
	if err != nil {
		return nil, fmt.Errorf("respec: %w", err)
	}
	results = append(results,
		result{Name: "respec latency p50", Value: ms(percentile(respec, 50)), Unit: "ms"},
		result{Name: "respec latency p99", Value: ms(percentile(respec, 99)), Unit: "ms", Goal: "< 2000"})

	rss, err := residentMiB(gm.Pid())
	if err != nil {
		return nil, err
	}
	results = append(results, result{Name: "GlobalManager resident memory", Value: round(rss), Unit: "MiB", Goal: "< 150"})

	return results, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// benchWorker and benchConfig are the GlobalManager's default configuration
// of federated jobs (its flags' defaults), with which the ceiling and the
// floor build their objects.
var (
	benchWorker = kinds.Worker{LocalController: common.LCAddress{Port: 9100}, LogLevel: "INFO", DataPathPrefix: "/home/data"}
	benchConfig = federatedlearning.Config{AggregationPort: federatedlearning.DefaultAggregationPort}
)

// benchModelName is the Model every section's jobs name.
const benchModelName = "model"

// benchModel and benchDataset are the Model and the Datasets setupNamespace
// makes, which benchJob names; the edge section makes the same Model.
func benchModel() *sednav1.Model {
	return &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: benchModelName}, Spec: sednav1.ModelSpec{URL: "/model/bench", Format: "pb"}}
}

func benchDataset(i int) *sednav1.Dataset {
	return &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("edge%d", i)},
		Spec: sednav1.DatasetSpec{URL: fmt.Sprintf("/data/%d.txt", i), Format: "txt", NodeName: fmt.Sprintf("edge-%d", i)}}
}

// jobChildren are the objects the GlobalManager makes for job (its 3 worker
// pods and its aggregation Service), built by the GlobalManager's own code
// (federatedlearning.Children), so that the ceiling and the floor create
// the same objects as the GlobalManager: the same labels, environment,
// volumes and owner.
func jobChildren(job *sednav1.FederatedLearningJob) ([]*corev1.Pod, *corev1.Service, error) {
	return federatedlearning.Children(benchWorker, benchConfig, job, benchModel(), nil, []*sednav1.Dataset{benchDataset(0), benchDataset(1)})
}

// ceiling is the rate at which a plain client-go program creates pods and
// services on this control plane, measured once per run, with its row: the
// ceiling itself, or the floor (measureFloor).
type ceiling struct {
	rate float64 // objects/s
	row  result
}

// measureCeiling measures the ceiling with the objects of n
// FederatedLearningJobs (3 pods and 1 Service each).
func measureCeiling(ctx context.Context, kube kubernetes.Interface, n int) (ceiling, error) {
	progress("ceiling: a plain client-go program creates %d pods and %d services as the GlobalManager makes them, without owners (16 goroutines, no client rate limit)", 3*n, n)
	const ns = "bench-ceiling"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return ceiling{}, err
	}
	if err := waitForServiceAccount(ctx, kube, ns); err != nil {
		return ceiling{}, err
	}
	if err := addQuota(ctx, kube, ns); err != nil {
		return ceiling{}, err
	}
	u0, err := sampleUsage(ctx, kube, 0)
	if err != nil {
		return ceiling{}, err
	}
	profiled := profileAPIServer(ctx, kube, apiServerProfileTime, benchFile("apiserver-ceiling-cpu.pb.gz"))
	took, err := createCeilingObjects(ctx, kube, ns, n)
	if err != nil {
		return ceiling{}, err
	}
	u1, err := sampleUsage(ctx, kube, 0)
	if err != nil {
		return ceiling{}, err
	}
	progress("ceiling took %s; removing its namespace", took.Round(time.Millisecond))
	rate := float64(4*n) / took.Seconds()
	return ceiling{rate: rate, row: result{Name: "ceiling: pods+services created", Value: round(rate), Unit: "objects/s",
		Note: fmt.Sprintf("%d objects (as the GlobalManager makes them, without owners) in %s; %s; %s", 4*n, took.Round(time.Millisecond), describeUsage(u0, u1, took), profiled())}}, deleteNamespace(ctx, kube, ns)
}

// createCeilingObjects creates in ns the pods and services of n jobs as fast
// as the API server allows, and returns how long that took.
func createCeilingObjects(ctx context.Context, kube kubernetes.Interface, ns string, n int) (time.Duration, error) {
	work := make(chan func() error)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for f := range work {
				if err := f(); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	// The jobs' objects, built before the clock starts. No job exists, so
	// they have no owner (the garbage collector would delete them); the
	// rest is as the GlobalManager makes them, the UID in the owner labels
	// and the Service's selector a new one per job as a job's would be.
	type objects struct {
		pods    []*corev1.Pod
		service *corev1.Service
	}
	all := make([]objects, n)
	for i := range all {
		job := benchJob(fmt.Sprintf("job-%d", i))
		job.Namespace, job.UID = ns, uuid.NewUUID()
		pods, svc, err := jobChildren(job)
		if err != nil {
			return 0, err
		}
		for _, p := range pods {
			p.OwnerReferences = nil
		}
		svc.OwnerReferences = nil
		all[i] = objects{pods, svc}
	}
	start := time.Now()
	for _, o := range all {
		work <- func() error {
			_, err := kube.CoreV1().Services(ns).Create(ctx, o.service, metav1.CreateOptions{})
			return err
		}
		for _, p := range o.pods {
			work <- func() error {
				_, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				return err
			}
		}
	}
	close(work)
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	return took, nil
}

// measureFloor measures the writes any controller of n FederatedLearningJobs
// must cause, made by a plain client-go program with 16 goroutines: each
// job's own create, its 3 pods and Service (as the GlobalManager makes
// them, owned by the job), and one status write. The
// GlobalManager's rate against it is what the GlobalManager itself costs;
// against the ceiling, what the jobs cost as well.
func measureFloor(ctx context.Context, kube kubernetes.Interface, sedna sednaclient.Interface, n int) (ceiling, error) {
	const ns = "bench-floor"
	progress("floor: a plain client-go program creates %d FederatedLearningJobs, their %d pods and %d services, and writes each job's status once (16 goroutines, no GlobalManager)", n, 3*n, n)
	if err := setupNamespace(ctx, kube, sedna, ns); err != nil {
		return ceiling{}, err
	}
	u0, err := sampleUsage(ctx, kube, 0)
	if err != nil {
		return ceiling{}, err
	}
	profiled := profileAPIServer(ctx, kube, apiServerProfileTime, benchFile("apiserver-floor-cpu.pb.gz"))
	start := time.Now()
	err = createAtOnce(ctx, n, func(ctx context.Context, name string) error {
		job, err := sedna.SednaV1alpha1().FederatedLearningJobs(ns).Create(ctx, benchJob(name), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		pods, svc, err := jobChildren(job)
		if err != nil {
			return err
		}
		if _, err := kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		for _, p := range pods {
			if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		now := metav1.Now()
		job.Status = sednav1.FederatedLearningJobStatus{Phase: sednav1.FLJobPending, StartTime: &now, Active: 3, ObservedGeneration: job.Generation,
			Conditions: []sednav1.JobCondition{{Type: "WorkersCreated", Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now, Reason: "AllCreated", Message: "all 3 workers have a pod"}}}
		_, err = sedna.SednaV1alpha1().FederatedLearningJobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{})
		return err
	})
	took := time.Since(start)
	if err != nil {
		return ceiling{}, err
	}
	u1, err := sampleUsage(ctx, kube, 0)
	if err != nil {
		return ceiling{}, err
	}
	progress("floor took %s; removing its namespace", took.Round(time.Millisecond))
	rate := float64(4*n) / took.Seconds()
	return ceiling{rate: rate, row: result{Name: "floor: jobs' own writes by a plain client", Value: round(rate), Unit: "objects/s",
		Note: fmt.Sprintf("%d pods+services (and %d jobs created, %d status writes) in %s; %s; %s", 4*n, n, n, took.Round(time.Millisecond), describeUsage(u0, u1, took), profiled())}}, deleteNamespace(ctx, kube, ns)
}

// deleteNamespace deletes ns and waits until it is gone, so that its
// teardown does not load what the bench measures next.
func deleteNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	return waitNamespaceGone(ctx, kube, ns, 5*time.Minute)
}

// waitNamespaceGone waits until ns is gone, for at most limit.
func waitNamespaceGone(ctx context.Context, kube kubernetes.Interface, ns string, limit time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, limit, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not gone within %s: %w", ns, limit, err)
	}
	return nil
}

func waitForServiceAccount(ctx context.Context, kube kubernetes.Interface, ns string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// quotaNote says, in a result's note, that the namespaces had quotas.
func quotaNote() string {
	if quotaJobs == 0 {
		return ""
	}
	return fmt.Sprintf("; every namespace (ceiling, floor, GlobalManager) had a ResourceQuota with room for %d jobs (-quota)", 2*quotaJobs)
}

// quotaJobs, when not 0 (-quota), is how many jobs the ResourceQuota of
// each bench namespace has room for.
var quotaJobs int

// addQuota gives ns a ResourceQuota with room for quotaJobs jobs (3 pods
// and 1 Service each, and as much again) and waits until the quota
// controller has counted its usage; nothing without -quota.
func addQuota(ctx context.Context, kube kubernetes.Interface, ns string) error {
	if quotaJobs == 0 {
		return nil
	}
	n := int64(2 * quotaJobs)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
		corev1.ResourcePods: *resource.NewQuantity(3*n, resource.DecimalSI), corev1.ResourceServices: *resource.NewQuantity(n, resource.DecimalSI),
	}}}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "bench", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, pods := q.Status.Used[corev1.ResourcePods]
		_, services := q.Status.Used[corev1.ResourceServices]
		return pods && services, nil
	})
}

func setupNamespace(ctx context.Context, kube kubernetes.Interface, sedna sednaclient.Interface, ns string) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitForServiceAccount(ctx, kube, ns); err != nil {
		return err
	}
	if err := addQuota(ctx, kube, ns); err != nil {
		return err
	}
	if _, err := sedna.SednaV1alpha1().Models(ns).Create(ctx, benchModel(), metav1.CreateOptions{}); err != nil {
		return err
	}
	for i := range 2 {
		if _, err := sedna.SednaV1alpha1().Datasets(ns).Create(ctx, benchDataset(i), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func benchJob(name string) *sednav1.FederatedLearningJob {
	tmpl := func(node string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "worker", Image: "worker:v1", Env: []corev1.EnvVar{{Name: "epochs", Value: "1"}},
		}}}}
	}
	return &sednav1.FederatedLearningJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: sednav1.FederatedLearningJobSpec{
			AggregationWorker: sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: benchModelName}, Template: tmpl("cloud-0")},
			TrainingWorkers: []sednav1.TrainingWorker{
				{Dataset: sednav1.DatasetRef{Name: "edge0"}, Template: tmpl("edge-0")},
				{Dataset: sednav1.DatasetRef{Name: "edge1"}, Template: tmpl("edge-1")},
			},
		},
	}
}

// podWatcher follows the pods and services of the bench namespace.
type podWatcher struct {
	mu       sync.Mutex
	pods     map[string]*corev1.Pod // live pods by name
	services int
	added    map[string]time.Time // when a pod of that name was last added
	changed  chan struct{}
}

func newPodWatcher(ctx context.Context, kube kubernetes.Interface, ns string) (*podWatcher, error) {
	w := &podWatcher{pods: map[string]*corev1.Pod{}, added: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	f := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(ns))
	notify := func() {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
	_, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			p := obj.(*corev1.Pod)
			w.mu.Lock()
			w.pods[p.Name], w.added[p.Name] = p, time.Now()
			w.mu.Unlock()
			notify()
		},
		UpdateFunc: func(_, obj any) {
			p := obj.(*corev1.Pod)
			w.mu.Lock()
			w.pods[p.Name] = p
			w.mu.Unlock()
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			p := obj.(*corev1.Pod)
			w.mu.Lock()
			if cur, ok := w.pods[p.Name]; ok && cur.UID == p.UID {
				delete(w.pods, p.Name)
			}
			w.mu.Unlock()
		},
	})
	if err != nil {
		return nil, err
	}
	_, err = f.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			w.mu.Lock()
			w.services++
			w.mu.Unlock()
			notify()
		},
	})
	if err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return w, nil
}

// waitFor blocks until cond, checked on every change, holds.
func (w *podWatcher) waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		ok := cond()
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-w.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("timed out after %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func createJobs(ctx context.Context, sedna sednaclient.Interface, w *podWatcher, ns string, n int) (time.Duration, error) {
	start := time.Now()
	err := createAtOnce(ctx, n, func(ctx context.Context, name string) error {
		_, err := sedna.SednaV1alpha1().FederatedLearningJobs(ns).Create(ctx, benchJob(name), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return 0, err
	}
	progress("the %d jobs were created in %s", n, time.Since(start).Round(time.Millisecond))
	err = w.waitFor(ctx, 15*time.Minute, func() bool { return len(w.pods) >= 3*n && w.services >= n })
	return time.Since(start), err
}

// runDIJob runs the DIJob section, v2alpha1 jobs then v1alpha1 ones, and
// prints and writes its table.
func runDIJob(ctx context.Context, o dijobOptions, kube kubernetes.Interface, sedna sednaclient.Interface, c ceiling) error {
	results, err := benchDIJob(ctx, o, kube, sedna, c)
	if err != nil {
		return fmt.Errorf("dijob: %w", err)
	}
	if o.v1Jobs > 0 {
		v1, err := benchDIJobV1(ctx, o, kube, sedna)
		if err != nil {
			return fmt.Errorf("dijob v1: %w", err)
		}
		results = append(results, v1...)
	}
	printTable(results)
	return writeJSON(o.out, "dijob", results)
}

// createAtOnce calls create for the jobs job-0 … job-<n-1> from 16
// goroutines and returns the first error.
func createAtOnce(ctx context.Context, n int, create func(ctx context.Context, name string) error) error {
	names := make(chan string)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for name := range names {
				if err := create(ctx, name); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		names <- fmt.Sprintf("job-%d", i)
	}
	close(names)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func measureHeal(ctx context.Context, kube kubernetes.Interface, w *podWatcher, ns string, n int) ([]time.Duration, error) {
	w.mu.Lock()
	var victims []*corev1.Pod
	for _, p := range w.pods {
		if p.Labels[common.LabelWorkerRole] == "training" {
			victims = append(victims, p)
		}
	}
	w.mu.Unlock()
	sort.Slice(victims, func(i, j int) bool { return victims[i].Name < victims[j].Name })
	if len(victims) < n {
		return nil, fmt.Errorf("only %d training pods to delete", len(victims))
	}
	var lat []time.Duration
	for _, v := range victims[:n] {
		if err := kube.CoreV1().Pods(ns).Delete(ctx, v.Name, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
		deleted := time.Now()
		if err := w.waitFor(ctx, time.Minute, func() bool {
			p, ok := w.pods[v.Name]
			return ok && p.UID != v.UID
		}); err != nil {
			return nil, fmt.Errorf("pod %s not replaced: %w", v.Name, err)
		}
		w.mu.Lock()
		lat = append(lat, w.added[v.Name].Sub(deleted))
		w.mu.Unlock()
	}
	return lat, nil
}

func measureRespec(ctx context.Context, sedna sednaclient.Interface, w *podWatcher, ns string, n int) ([]time.Duration, error) {
	var lat []time.Duration
	for i := range n {
		name := fmt.Sprintf("job-%d", i)
		job, err := sedna.SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		old := map[string]bool{}
		w.mu.Lock()
		for pn := range w.pods {
			if strings.HasPrefix(pn, name+"-training-") {
				old[pn] = true
			}
		}
		w.mu.Unlock()
		for j := range job.Spec.TrainingWorkers {
			job.Spec.TrainingWorkers[j].Template.Spec.Containers[0].Env[0].Value = "2"
		}
		if _, err := sedna.SednaV1alpha1().FederatedLearningJobs(ns).Update(ctx, job, metav1.UpdateOptions{}); err != nil {
			return nil, err
		}
		edited := time.Now()
		var newest time.Time
		if err := w.waitFor(ctx, time.Minute, func() bool {
			fresh := 0
			for pn := range w.pods {
				if strings.HasPrefix(pn, name+"-training-") && !old[pn] {
					fresh++
					if w.added[pn].After(newest) {
						newest = w.added[pn]
					}
				}
			}
			return fresh == len(job.Spec.TrainingWorkers)
		}); err != nil {
			return nil, fmt.Errorf("job %s: new-spec workers not created: %w", name, err)
		}
		lat = append(lat, newest.Sub(edited))
	}
	return lat, nil
}

// queueStats summarises the work queue metrics of one of the GlobalManager's
// controllers, read from its /metrics at the address its log names.
func queueStats(ctx context.Context, gm *framework.Process, controller string) string {
	addr := gm.HealthAddress()
	if addr == "" {
		return "no metrics address in its log"
	}
	m, err := scrapeMetrics(ctx, addr)
	if err != nil {
		return err.Error()
	}
	series := func(name string) float64 { return m.Get(name + `{name="` + controller + `"}`) }
	syncs := series("nereid_workqueue_work_duration_seconds_count")
	if syncs == 0 {
		return "no syncs"
	}
	return fmt.Sprintf("%.0f syncs, %.1f ms in queue and %.1f ms of work per sync on average",
		syncs, 1000*series("nereid_workqueue_queue_duration_seconds_sum")/syncs, 1000*series("nereid_workqueue_work_duration_seconds_sum")/syncs)
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(float64(len(s)-1) * p / 100)
	return s[idx]
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func printTable(results []result) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASURE\tVALUE\tUNIT\tGOAL\tNOTE")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\n", r.Name, r.Value, r.Unit, r.Goal, r.Note)
	}
	tw.Flush()
}

// writeJSON writes a section's results to path, by default
// _output/bench/<section>-<time>.json.
func writeJSON(path, section string, results []result) error {
	if path == "" {
		path = filepath.Join(framework.RepoRoot(), "_output", "bench", section+"-"+time.Now().Format("20060102-150405")+".json")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(map[string]any{"time": time.Now().Format(time.RFC3339), "results": results}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwritten to %s\n\n", path)
	return nil
}
