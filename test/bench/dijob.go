package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nereid-ml/nereid/hack/localrun"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	dilisters "github.com/nereid-ml/nereid/pkg/client/listers/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
	"github.com/nereid-ml/nereid/test/framework"
)

// dijobOptions are the DIJob section's settings.
type dijobOptions struct {
	// v1Jobs is how many v1alpha1 DIJobs the section's v1 part creates.
	v1Jobs int
	jobs   int
	out    string
}

const (
	dijobNamespace = "bench-dijob"
	// diReplicas is the pods of one bench DIJob: 1 learner, 4 collectors,
	// 1 evaluator.
	diReplicas = 6
	// maxDIJobs is as many bench DIJobs as the local run's kwok nodes hold
	// (1k cpu and 1Ti memory each): 1.5 cpu and 1.5Gi a job on cloud-0.
	maxDIJobs = 600
)

func (o *dijobOptions) addFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.jobs, "dijobs", 200, fmt.Sprintf("DIJobs created at once in the DIJob section (each 1 learner + 4 collectors + 1 evaluator + 1 headless Service; at most %d, what the kwok nodes hold).", maxDIJobs))
	fs.IntVar(&o.v1Jobs, "dijobs-v1", 100, fmt.Sprintf("v1alpha1 DIJobs created at once in the DIJob section's v1 part (a coordinator each, which then asks the v1 replicas server for %d collectors and %d learner; at most %d; 0 skips the v1 part).", v1Collectors, v1Learners, maxDIJobs))
	fs.StringVar(&o.out, "dijob-out", "", "JSON file of the DIJob section (default _output/bench/dijob-<time>.json).")
}

func (o dijobOptions) validate() error {
	if o.v1Jobs < 0 || o.v1Jobs > maxDIJobs {
		return fmt.Errorf("-dijobs-v1 must be 0..%d: the bench's replicas must fit the kwok nodes", maxDIJobs)
	}
	if o.jobs < 1 || o.jobs > maxDIJobs {
		return fmt.Errorf("-dijobs must be 1..%d: the bench's replicas must fit the kwok nodes", maxDIJobs)
	}
	return nil
}

// benchDIJob measures the DIJob controller on a GlobalManager with its
// default settings (the allocator on), managing only the section's
// namespace so that an earlier section's jobs are not its work:
//
//   - create: o.jobs DIJobs at once; time until all their pods and headless
//     Services exist, against the ceiling c (objects/s, pods and Services,
//     as the GlobalManager section's row);
//   - running: time until every job is Running (the scheduler binds each pod
//     to the node the allocator chose, kwok runs it);
//   - the GlobalManager's CPU during the create and its memory at the end.
//
// It deletes its namespace, and waits until it is gone, before it returns.
func benchDIJob(ctx context.Context, o dijobOptions, kube kubernetes.Interface, sedna sednaclient.Interface, c ceiling) (results []result, err error) {
	const ns = dijobNamespace
	n := o.jobs
	bin, err := framework.BuildBinary("globalmanager")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(framework.RepoRoot(), "_output", "bench", "globalmanager-dijob.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	_ = os.Remove(logPath)

	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	defer func() {
		progress("dijob: removing namespace %s", ns)
		err = errors.Join(err, deleteNamespace(context.WithoutCancel(ctx), kube, ns))
	}()
	if err := waitForServiceAccount(ctx, kube, ns); err != nil {
		return nil, err
	}
	gm, err := startGlobalManager(ctx, bin, logPath, localrun.GlobalManager{
		Namespace: ns, HealthAddress: "127.0.0.1:0", LeaseNamespace: framework.SystemNamespace,
		Extra: []string{"--profiling"},
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = gm.Signal(syscall.SIGTERM, 15*time.Second) }()
	// It may wait for the leader election Lease an earlier section's
	// GlobalManager held; the clock starts once it acts.
	if err := waitReady(ctx, gm, time.Minute); err != nil {
		return nil, fmt.Errorf("%w (GlobalManager log: %s)", err, logPath)
	}
	pods, err := newPodWatcher(ctx, kube, ns)
	if err != nil {
		return nil, err
	}
	jobs, err := watchDIJobs(ctx, sedna, ns)
	if err != nil {
		return nil, err
	}

	progress("dijob: %d DIJobs of 1 learner + 4 collectors + 1 evaluator at once, GlobalManager with default settings (allocator pack-and-spread)", n)
	u0, err := sampleUsage(ctx, kube, gm.Pid())
	if err != nil {
		return nil, err
	}
	gmProfiled := profileGlobalManager(ctx, gm.HealthAddress(), apiServerProfileTime, benchFile("globalmanager-dijob-create-cpu.pb.gz"))
	start := time.Now()
	if err := createAtOnce(ctx, n, func(ctx context.Context, name string) error {
		_, err := sedna.DiengineV2alpha1().DIJobs(ns).Create(ctx, benchDIJobSpec(name), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	progress("dijob: the %d jobs were created in %s", n, time.Since(start).Round(time.Millisecond))
	if err := pods.waitFor(ctx, 10*time.Minute, func() bool { return len(pods.pods) >= diReplicas*n && pods.services >= n }); err != nil {
		return nil, fmt.Errorf("create: %w; %s (GlobalManager log: %s)", err, phases(jobs), logPath)
	}
	took := time.Since(start)
	u1, err := sampleUsage(ctx, kube, gm.Pid())
	if err != nil {
		return nil, err
	}
	queue := queueStats(ctx, gm, "dijob")
	progress("dijob: all pods and Services in %s; GlobalManager during create: %s", took.Round(time.Millisecond), queue)

	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		return countPhase(jobs, div2.JobRunning) == n, nil
	}); err != nil {
		return nil, fmt.Errorf("waiting for every job Running: %w; %s (GlobalManager log: %s)", err, phases(jobs), logPath)
	}
	running := time.Since(start)
	rss, err := residentMiB(gm.Pid())
	if err != nil {
		return nil, err
	}

	objects := (diReplicas + 1) * n
	rate := float64(objects) / took.Seconds()
	return []result{
		c.row,
		result{Name: "DIJob GlobalManager: pods+services created", Value: round(rate), Unit: "objects/s",
			Note: fmt.Sprintf("%d pods and %d Services in %s; %s", diReplicas*n, n, took.Round(time.Millisecond), describeUsage(u0, u1, took))},
		result{Name: "DIJob GlobalManager: pods created", Value: round(float64(diReplicas*n) / took.Seconds()), Unit: "pods/s",
			Note: fmt.Sprintf("%d DIJobs of 1 learner + 4 collectors + 1 evaluator, each placed by the allocator", n)},
		result{Name: "DIJob GlobalManager rate / ceiling", Value: round(rate / c.rate), Unit: "ratio", Goal: ">= 0.8",
			Note: "objects/s against the ceiling row, measured once in this run"},
		result{Name: "DIJob GlobalManager CPU during create", Value: round(u1.cpu.gm - u0.cpu.gm), Unit: "CPU-s",
			Note: fmt.Sprintf("%.0f%% of one core over %s; %s; %.0f DIJob status writes; %s", 100*(u1.cpu.gm-u0.cpu.gm)/took.Seconds(), took.Round(time.Millisecond),
				queue, u1.writes["dijobs/status"]-u0.writes["dijobs/status"], gmProfiled())},
		result{Name: "DIJobs all Running", Value: round(running.Seconds()), Unit: "s",
			Note: fmt.Sprintf("from the first create; kube-scheduler binds each pod to its allocated node, kwok runs it; placed on %s", placements(jobs))},
		result{Name: "DIJob GlobalManager resident memory", Value: round(rss), Unit: "MiB",
			Note: "it caches every pod and node of the cluster for the allocator"},
	}, nil
}

// benchDIJobSpec is a DIJob as DI-engine's distributed DQN runs it: a
// learner and an evaluator in the cloud, 4 collectors on the edge pool (the
// allocator spreads them over edge-0 and edge-1). Its requests, 1.5 cpu and
// 1.5Gi on cloud-0 and 1 cpu and 1Gi on each edge node, let the local run's
// kwok nodes (1k cpu, 1Ti memory, 1M pods each) hold maxDIJobs of them.
func benchDIJobSpec(name string) *div2.DIJob {
	task := func(typ div2.TaskType, replicas int32, cpu, memory string, edge bool) div2.Task {
		spec := corev1.PodSpec{Containers: []corev1.Container{{
			Name: "di-container", Image: "opendilab/ding:nightly",
			Command: []string{"ditask", "--package", ".", "--main", "cartpole_dqn.main", "--parallel-workers", "1", "--topology", "mesh"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
			}},
		}}}
		if edge {
			spec.NodeSelector = map[string]string{allocator.EdgeNodeLabel: ""}
		}
		return div2.Task{Type: typ, Replicas: replicas, Template: corev1.PodTemplateSpec{Spec: spec}}
	}
	return &div2.DIJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: div2.DIJobSpec{Tasks: []div2.Task{
			task(div2.TaskTypeLearner, 1, "1", "1Gi", false),
			task(div2.TaskTypeCollector, 4, "500m", "512Mi", true),
			task(div2.TaskTypeEvaluator, 1, "500m", "512Mi", false),
		}},
	}
}

// waitReady waits until the GlobalManager's /readyz says its controllers act.
func waitReady(ctx context.Context, gm *framework.Process, timeout time.Duration) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		addr := gm.HealthAddress()
		if addr == "" {
			return false, nil
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("the GlobalManager was not ready within %s: %w", timeout, err)
	}
	return nil
}

// watchDIJobs starts a watch of the DIJobs of ns until ctx is done and
// returns their lister once it has listed them.
func watchDIJobs(ctx context.Context, sedna sednaclient.Interface, ns string) (dilisters.DIJobNamespaceLister, error) {
	f := sednainformers.NewSharedInformerFactoryWithOptions(sedna, 0, sednainformers.WithNamespace(ns))
	inf := f.Diengine().V2alpha1().DIJobs()
	lister := inf.Lister()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("watching the DIJobs of %s: %w", ns, ctx.Err())
	}
	return lister.DIJobs(ns), nil
}

func countPhase(jobs dilisters.DIJobNamespaceLister, phase div2.Phase) int {
	all, _ := jobs.List(labels.Everything())
	n := 0
	for _, j := range all {
		if j.Status.Phase == phase {
			n++
		}
	}
	return n
}

// phases says how many jobs are in each phase and, for a job not Running,
// what its condition says (an allocator that found no room names what is
// missing there).
func phases(jobs dilisters.DIJobNamespaceLister) string {
	all, _ := jobs.List(labels.Everything())
	count := map[div2.Phase]int{}
	var example string
	for _, j := range all {
		count[j.Status.Phase]++
		if j.Status.Phase == div2.JobRunning || example != "" {
			continue
		}
		for _, c := range j.Status.Conditions {
			if c.Status == corev1.ConditionTrue {
				example = fmt.Sprintf("; %s is %s: %s", j.Name, c.Type, c.Message)
			}
		}
	}
	var parts []string
	for p, k := range count {
		if p == "" {
			p = "no phase yet"
		}
		parts = append(parts, fmt.Sprintf("%s %d", p, k))
	}
	sort.Strings(parts)
	return "jobs: " + strings.Join(parts, ", ") + example
}

// placements counts the replicas the allocator placed on each node, from the
// jobs' status.allocation.
func placements(jobs dilisters.DIJobNamespaceLister) string {
	all, _ := jobs.List(labels.Everything())
	count := map[string]int{}
	for _, j := range all {
		for _, node := range j.Status.Allocation {
			count[node]++
		}
	}
	var parts []string
	for node, k := range count {
		parts = append(parts, fmt.Sprintf("%s %d", node, k))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
