package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nereid-ml/nereid/hack/localrun"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/pkg/plugin/playworker"
)

// diJobName is the job of examples/dijob/dijob.yaml.
const diJobName = "cartpole-dqn"

// runDIJob runs examples/dijob/dijob.yaml: it waits for the job to run, shows
// what a DI-engine user and worker see, then plays the workers' end: the
// learner and the evaluator succeed, the job with them, and cleanPodPolicy
// deletes the collectors still running.
func runDIJob(outDir, ns string, pause time.Duration) error {
	if err := withoutRealNodes(outDir, "demo-dijob"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := start(ctx, outDir, ns, "dijob/"+diJobName, "examples/dijob/dijob.yaml", nil)
	if err != nil {
		return err
	}
	say("waiting for the GlobalManager to place the replicas and run them (kubectl get dijob -n %s -w)", ns)
	job, err := waitDIJob(ctx, d, ns, 2*time.Minute, func(j *div2.DIJob) bool { return j.Status.Phase == div2.JobRunning })
	if err != nil {
		return fmt.Errorf("the job did not reach Running: %w", err)
	}
	say("job %s Running: %d replicas, placed by the allocator on %v (status.allocation, in rank order)", diJobName, job.Status.Replicas, job.Status.Allocation)
	if err := kubectl(ctx, d, "get", "dijob", "-n", ns, diJobName); err != nil {
		return err
	}
	if err := kubectl(ctx, d, "get", "pods", "-n", ns, "-l", dijob.LabelJob+"="+diJobName, "-o",
		"custom-columns=NAME:.metadata.name,TASK:.metadata.labels.diengine/task-name,DI_RANK:.spec.containers[0].env[?(@.name==\"DI_RANK\")].value,"+
			"NODE:.spec.nodeName,STATUS:.status.phase,IP:.status.podIP"); err != nil {
		return err
	}
	pods, err := diPods(ctx, d, ns)
	if err != nil {
		return err
	}
	showEnv(pods)
	say("the headless Service that gives each replica its DNS name <pod>.%s.%s.svc.cluster.local:", dijob.ServiceName(diJobName), ns)
	if err := kubectl(ctx, d, "get", "service", "-n", ns, dijob.ServiceName(diJobName), "-o", "wide"); err != nil {
		return err
	}
	if err := showReplicas(ctx, d, pods[0]); err != nil {
		return err
	}

	// Play the workers: the learner trains, then the evaluator judges.
	var collectors []string
	for _, p := range pods {
		if p.Labels[dijob.LabelTaskType] == string(div2.TaskTypeCollector) {
			collectors = append(collectors, p.Name)
		}
	}
	say("kwok runs the pods but never ends them; the demo plays their kubelet and marks the learner, then the evaluator, Succeeded")
	for _, typ := range []div2.TaskType{div2.TaskTypeLearner, div2.TaskTypeEvaluator} {
		time.Sleep(pause)
		for _, p := range pods {
			if p.Labels[dijob.LabelTaskType] != string(typ) {
				continue
			}
			if err := playworker.FinishPod(ctx, d.kube, p.Namespace, p.Name, corev1.PodSucceeded); err != nil {
				return err
			}
			say("%s: its container exited 0; pod Succeeded (written as its kubelet would)", p.Name)
		}
		if typ == div2.TaskTypeLearner {
			job, err = waitDIJob(ctx, d, ns, time.Minute, func(j *div2.DIJob) bool {
				return j.Status.TaskStatus[string(typ)][corev1.PodSucceeded] > 0
			})
			if err != nil {
				return err
			}
			say("job %s still %s with the learner done (pods by task: %s): the evaluator decides too", diJobName, job.Status.Phase, taskPhases(job))
		}
	}
	job, err = waitDIJob(ctx, d, ns, time.Minute, func(j *div2.DIJob) bool { return j.Status.Phase == div2.JobSucceeded })
	if err != nil {
		return fmt.Errorf("the job did not succeed: %w", err)
	}
	say("job %s Succeeded: %s", diJobName, conditionMessage(job))
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err = diPods(ctx, d, ns)
		return err == nil && len(pods) == 2, nil
	}); err != nil {
		return fmt.Errorf("the collectors were not deleted: %w", err)
	}
	say("cleanPodPolicy %s deleted the collectors still running (%s); the finished pods stay for their logs:", job.Spec.CleanPodPolicy, strings.Join(collectors, ", "))
	if err := kubectl(ctx, d, "get", "pods", "-n", ns, "-l", dijob.LabelJob+"="+diJobName); err != nil {
		return err
	}
	return kubectl(ctx, d, "get", "dijob", "-n", ns, diJobName)
}

// showReplicas calls the replicas HTTP API as worker's DI-engine would:
// GET /v2alpha1/job/<namespace>.<name>/replicas at its DI_SERVER_URL,
// trusting the CA of its DI_SERVER_CA_FILE and presenting the token of its
// DI_SERVER_TOKEN_FILE. kwok mounts no volumes, so the demo takes the CA
// from the pod's annotation and asks the API server for the token the
// kubelet would project: the pod's ServiceAccount's, for the API's
// audience, bound to the pod.
func showReplicas(ctx context.Context, d *demoRun, worker corev1.Pod) error {
	base := envOf(worker, "DI_SERVER_URL")
	if base == "" {
		return fmt.Errorf("%s has no DI_SERVER_URL: the GlobalManager serves no replicas API (make local-up serves it unless NEREID_DI_SERVER_PORT=0)", worker.Name)
	}
	var token string
	if audience := serverTokenAudience(worker); audience != "" {
		var err error
		if token, err = localrun.BoundToken(ctx, d.kube, &worker, audience, 10*time.Minute); err != nil {
			return err
		}
	}
	client, err := trustingClient(worker.Annotations[dijob.AnnotationServerCA])
	if err != nil {
		return fmt.Errorf("%s: %w", worker.Name, err)
	}
	call := diCall{method: http.MethodGet, url: fmt.Sprintf("%s/v2alpha1/job/%s.%s/replicas", base, worker.Namespace, diJobName), token: token}
	say("the replicas HTTP API, as %s calls it (DI_SERVER_URL, its CA and a token bound to the pod): GET %s", worker.Name, call.url)
	r, err := call.do(ctx, client, 30*time.Second)
	if err != nil {
		return err
	}
	var replicas []string
	if err := json.Unmarshal(r.Data, &replicas); err != nil {
		return fmt.Errorf("GET %s: data is not a list of addresses: %s", call.url, r.Data)
	}
	say("answered %q; the job's replicas, ip:port in rank order:", r.Message)
	for _, a := range replicas {
		fmt.Printf("  %s\n", a)
	}
	fmt.Println()
	return nil
}

// serverTokenAudience is the audience of the replicas API's token that pod's
// projected volumes hold, "" if none does (the API then takes the API
// server's audience).
func serverTokenAudience(pod corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && t.Audience != "" {
				return t.Audience
			}
		}
	}
	return ""
}

// waitDIJob waits until the job has a status of its current generation
// that satisfies cond; on a timeout it says where the job is.
func waitDIJob(ctx context.Context, d *demoRun, ns string, timeout time.Duration, cond func(*div2.DIJob) bool) (*div2.DIJob, error) {
	var job *div2.DIJob
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		j, err := d.sedna.DiengineV2alpha1().DIJobs(ns).Get(ctx, diJobName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		job = j
		return j.Status.ObservedGeneration == j.Generation && cond(j), nil
	})
	if err != nil && job != nil {
		return nil, fmt.Errorf("%w; it is %q: %s", err, job.Status.Phase, conditionMessage(job))
	}
	return job, err
}

// conditionMessage is the message of the job's current condition, which
// says why it is where it is (an allocator that finds no room says what is
// missing there).
func conditionMessage(job *div2.DIJob) string {
	// The condition of the job's phase: Scheduled and Admitted are True too
	// and say other things.
	for _, c := range job.Status.Conditions {
		if c.Type == div2.ConditionType(job.Status.Phase) && c.Status == corev1.ConditionTrue {
			return c.Message
		}
	}
	return "no condition yet"
}

// taskPhases is status.taskStatus as "collector: Running 2; learner: Succeeded 1".
func taskPhases(job *div2.DIJob) string {
	var parts []string
	for task, phases := range job.Status.TaskStatus {
		var counts []string
		for phase, n := range phases {
			counts = append(counts, fmt.Sprintf("%s %d", phase, n))
		}
		sort.Strings(counts)
		parts = append(parts, task+": "+strings.Join(counts, ", "))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// diPods are the job's pods that are not being deleted, in rank order.
func diPods(ctx context.Context, d *demoRun, ns string) ([]corev1.Pod, error) {
	list, err := d.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: dijob.LabelJob + "=" + diJobName})
	if err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	rank := func(p corev1.Pod) int {
		r, _ := strconv.Atoi(p.Annotations[dijob.AnnotationRank])
		return r
	}
	sort.Slice(pods, func(i, j int) bool { return rank(pods[i]) < rank(pods[j]) })
	return pods, nil
}

// showEnv prints the DI_* environment the replicas start with: DI_RANK
// differs, DI_JOB_ID, DI_NODES and DI_<TASK>_NODES are the same in every pod.
func showEnv(pods []corev1.Pod) {
	say("what DI-engine's workers read from their environment:")
	for _, p := range pods {
		fmt.Printf("  %-26s DI_RANK=%s\n", p.Name, envOf(p, "DI_RANK"))
	}
	fmt.Println("  and in every pod:")
	for _, e := range pods[0].Spec.Containers[0].Env {
		if e.Name == "DI_JOB_ID" {
			fmt.Printf("    %s=%s\n", e.Name, e.Value)
		}
		if strings.HasPrefix(e.Name, "DI_") && strings.HasSuffix(e.Name, "_NODES") {
			fmt.Printf("    %s=\n      %s\n", e.Name, strings.ReplaceAll(e.Value, ",", ",\n      "))
		}
	}
}

func envOf(p corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// kubectl runs kubectl on the local run and prints the command and its output.
func kubectl(ctx context.Context, d *demoRun, args ...string) error {
	fmt.Printf("$ kubectl %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, kubectlPath(), append([]string{"--kubeconfig", d.kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	fmt.Println()
	return nil
}

// withoutRealNodes fails, saying why, when the local run has real nodes: the
// DIJob demos play their workers from this machine as kwok's pods, which
// speak to the GlobalManager from their loopback addresses, and with real
// nodes it runs in their cluster network, where those addresses are not
// theirs (the v1 server takes a coordinator by its address) and the replicas
// API's URL is the gateway's.
func withoutRealNodes(outDir, demo string) error {
	real, err := localrun.ReadRealCluster(outDir)
	if err != nil || real == nil {
		return err
	}
	return fmt.Errorf("make %s plays kwok's pods, and this run has real nodes (%s), whose network the GlobalManager is in: "+
		"run it on a run without them (make local-down; make local-up), or make demo-real for DI-orchestrator's mock on the real nodes",
		demo, strings.Join(real.Nodes, " "))
}
