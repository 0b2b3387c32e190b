package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/test/framework"
)

const diExample = "cartpole-dqn"

// applyDIJobExample applies examples/dijob/dijob.yaml in ns.
func applyDIJobExample(t *testing.T, ns string) {
	t.Helper()
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", filepath.Join(example("dijob"), "dijob.yaml")); err != nil {
		t.Fatalf("applying the example: %v\n%s", err, out)
	}
}

// waitForDIJob waits until the job has a status for its current generation
// that satisfies cond, and returns it.
func waitForDIJob(t *testing.T, ns, name, what string, cond func(*div2.DIJob) bool) *div2.DIJob {
	t.Helper()
	var job *div2.DIJob
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("DIJob %s: %s", name, what), func(ctx context.Context) (bool, error) {
		var err error
		job, err = framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return job.Status.ObservedGeneration == job.Generation && cond(job), nil
	})
	return job
}

func diPhaseIs(phase div2.Phase) func(*div2.DIJob) bool {
	return func(j *div2.DIJob) bool { return j.Status.Phase == phase }
}

// setPodPhase reports a pod's end as its kubelet would.
func setPodPhase(t *testing.T, ns, name string, phase corev1.PodPhase, message string) {
	t.Helper()
	kube := framework.KubeClient(t)
	pod, err := kube.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase, pod.Status.Message = phase, message
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("setting pod %s %s: %v", name, phase, err)
	}
}

// diPods are the job's live pods, by name.
func diPods(ctx context.Context, t *testing.T, ns string, job *div2.DIJob) (map[string]*corev1.Pod, error) {
	return livePods(ctx, t, ns, job)
}

func TestDIJobRunsItsTasksThroughSucceeded(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns, "--di-server-url", "http://nereid-di-server.nereid-system:8081")
	applyDIJobExample(t, ns)
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	if job.Status.Replicas != 4 || job.Status.ReadyReplicas != 4 || job.Status.TaskStatus["collector"][corev1.PodRunning] != 2 {
		t.Errorf("status replicas %d ready %d tasks %v, want 4, 4 and 2 collectors running", job.Status.Replicas, job.Status.ReadyReplicas, job.Status.TaskStatus)
	}
	if len(job.Status.Allocation) != 4 || slices.Contains(job.Status.Allocation, "") {
		t.Errorf("status.allocation %v, want the node of each of the 4 replicas", job.Status.Allocation)
	}
	pods, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"cartpole-dqn-learner-0", "cartpole-dqn-collector-0", "cartpole-dqn-collector-1", "cartpole-dqn-evaluator-0"}
	var fqdns []string
	for _, n := range names {
		fqdns = append(fqdns, n+".di-cartpole-dqn."+ns+".svc.cluster.local")
	}
	for rank, n := range names {
		p := pods[n]
		if p == nil {
			t.Fatalf("no pod %s; pods %v", n, keys(pods))
		}
		env := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		want := map[string]string{
			"DI_JOB_ID": ns + "/cartpole-dqn", "DI_RANK": fmt.Sprint(rank), "DI_NODES": strings.Join(fqdns, ","),
			"DI_LEARNER_NODES": fqdns[0], "DI_COLLECTOR_NODES": fqdns[1] + "," + fqdns[2], "DI_EVALUATOR_NODES": fqdns[3],
			"DI_SERVER_URL": "http://nereid-di-server.nereid-system:8081",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s=%q, want %q", n, k, env[k], v)
			}
		}
		if p.Spec.Hostname != n || p.Spec.Subdomain != "di-cartpole-dqn" || p.Labels[dijob.LabelJob] != "cartpole-dqn" ||
			p.Annotations[dijob.AnnotationRank] != fmt.Sprint(rank) {
			t.Errorf("%s: hostname %q subdomain %q labels %v annotations %v", n, p.Spec.Hostname, p.Spec.Subdomain, p.Labels, p.Annotations)
		}
	}
	svc, err := framework.KubeClient(t).CoreV1().Services(ns).Get(t.Context(), "di-cartpole-dqn", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the headless Service: %v", err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Ports[0].Port != dijob.Port {
		t.Errorf("Service %s: clusterIP %q port %d, want headless on %d", svc.Name, svc.Spec.ClusterIP, svc.Spec.Ports[0].Port, dijob.Port)
	}
	if out, err := framework.Kubectl(t, "get", "dijob", "-n", ns, diExample); err != nil || !strings.Contains(out, "Running") {
		t.Errorf("kubectl get dijob: %v\n%s", err, out)
	}

	// The learner and the evaluator decide: once both succeeded the job has,
	// and cleanPodPolicy Running deletes the collectors still running.
	setPodPhase(t, ns, "cartpole-dqn-learner-0", corev1.PodSucceeded, "")
	job = waitForDIJob(t, ns, diExample, "still Running with the evaluator at work", func(j *div2.DIJob) bool {
		return j.Status.TaskStatus["learner"][corev1.PodSucceeded] == 1
	})
	if job.Status.Phase != div2.JobRunning {
		t.Fatalf("with the evaluator running the job is %s, want Running", job.Status.Phase)
	}
	setPodPhase(t, ns, "cartpole-dqn-evaluator-0", corev1.PodSucceeded, "")
	job = waitForDIJob(t, ns, diExample, "Succeeded", diPhaseIs(div2.JobSucceeded))
	if job.Status.CompletionTimestamp == nil {
		t.Error("a Succeeded job has no completionTimestamp")
	}
	framework.Eventually(t, 30*time.Second, "the collectors deleted, the finished pods kept", func(ctx context.Context) (bool, error) {
		pods, err := diPods(ctx, t, ns, job)
		return err == nil && len(pods) == 2 && pods["cartpole-dqn-learner-0"] != nil && pods["cartpole-dqn-evaluator-0"] != nil, err
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// oneLearner is a job of one learner task, with a backoff limit.
func oneLearner(name string, backoffLimit int) map[string]any {
	m := dijobManifest(name, map[string]any{"type": "learner", "template": podTemplate()})
	m.Object["spec"].(map[string]any)["backoffLimit"] = int64(backoffLimit)
	return m.Object
}

func TestDIJobRestartsAfterAFailedPodUntilItsBackoffLimit(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyDIJobExample(t, ns)
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	if _, err := framework.Kubectl(t, "patch", "dijob", "-n", ns, diExample, "--type=merge", "-p", `{"spec":{"backoffLimit":1}}`); err != nil {
		t.Fatal(err)
	}
	job = waitForDIJob(t, ns, diExample, "the new backoffLimit seen", diPhaseIs(div2.JobRunning))
	before, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	setPodPhase(t, ns, "cartpole-dqn-collector-1", corev1.PodFailed, "the environment crashed")
	job = waitForDIJob(t, ns, diExample, "restarted once", func(j *div2.DIJob) bool { return j.Status.Restarts == 1 })
	framework.Eventually(t, 60*time.Second, "every pod made again and running", func(ctx context.Context) (bool, error) {
		after, err := diPods(ctx, t, ns, job)
		if err != nil || len(after) != 4 {
			return false, err
		}
		for n, p := range after {
			if p.UID == before[n].UID || p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	})
	job = waitForDIJob(t, ns, diExample, "Running again", diPhaseIs(div2.JobRunning))
	if job.Status.Restarts != 1 {
		t.Errorf("restarts %d after one failure, want 1", job.Status.Restarts)
	}
	var sawRestarting bool
	for _, c := range job.Status.Conditions {
		if c.Type == div2.ConditionType(div2.JobRestarting) && strings.Contains(c.Message, "cartpole-dqn-collector-1 failed: the environment crashed") {
			sawRestarting = true
		}
	}
	if !sawRestarting {
		t.Errorf("no Restarting condition naming the failed pod: %+v", job.Status.Conditions)
	}

	// The limit spent: the next failure fails the job, and it stays failed.
	setPodPhase(t, ns, "cartpole-dqn-learner-0", corev1.PodFailed, "diverged")
	job = waitForDIJob(t, ns, diExample, "Failed", diPhaseIs(div2.JobFailed))
	var failed *div2.JobCondition
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == div2.ConditionType(div2.JobFailed) {
			failed = &job.Status.Conditions[i]
		}
	}
	if failed == nil || failed.Reason != "BackoffLimitExceeded" || !strings.Contains(failed.Message, "learner-0 failed: diverged") ||
		!strings.Contains(failed.Message, "the job restarted 1 times, as many as its backoffLimit (1) allows") {
		t.Errorf("Failed condition %+v, want BackoffLimitExceeded naming the pod and the limit", failed)
	}
	// The other phases' conditions no longer say what held then.
	for _, c := range job.Status.Conditions {
		if c.Type == div2.ConditionType(div2.JobRunning) && (c.Status != corev1.ConditionFalse || !strings.HasPrefix(c.Message, "the job left this phase for Failed; it said: ")) {
			t.Errorf("Running condition %+v on a failed job, want False saying the job left it", c)
		}
	}
	if out, err := framework.Kubectl(t, "describe", "dijob", "-n", ns, diExample); err != nil || !strings.Contains(out, "BackoffLimitExceeded") && !strings.Contains(out, "backoffLimit") {
		t.Errorf("kubectl describe does not tell why the job failed: %v\n%s", err, out)
	}
	framework.Eventually(t, 30*time.Second, "the running pods cleaned, none made", func(ctx context.Context) (bool, error) {
		pods, err := diPods(ctx, t, ns, job)
		return err == nil && len(pods) == 1 && pods["cartpole-dqn-learner-0"] != nil, err
	})
}

func TestDIJobRecreatesAPodDeletedByHandOnceAndCascadesItsDeletion(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyDIJobExample(t, ns)
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	before, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	victim := before["cartpole-dqn-collector-0"]
	framework.DeletePodByHand(t, ns, victim.Name)
	framework.Eventually(t, 60*time.Second, "the deleted collector back, running, the others untouched", func(ctx context.Context) (bool, error) {
		after, err := diPods(ctx, t, ns, job)
		if err != nil || len(after) != 4 {
			return false, err
		}
		for n, p := range after {
			if (n == victim.Name) == (p.UID == before[n].UID) {
				return false, nil
			}
		}
		return after[victim.Name].Status.Phase == corev1.PodRunning, nil
	})
	job = waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	if job.Status.Restarts != 0 {
		t.Errorf("a pod deleted by hand counted as a restart: restarts %d", job.Status.Restarts)
	}
	// The replacement's event is recorded after its pod is made: wait for
	// it, then check there is no third.
	var created int
	framework.Eventually(t, 30*time.Second, "the replacement's SuccessfulCreate event", func(context.Context) (bool, error) {
		created = framework.CountEvents(t, ns, job.UID, "SuccessfulCreate", victim.Name)
		return created >= 2, nil
	})
	if created != 2 {
		t.Errorf("%d events created pod %s, want 2 (the first pod and its one replacement)", created, victim.Name)
	}

	// Deleting the job deletes what it owns.
	if out, err := framework.Kubectl(t, "delete", "-n", ns, "dijob", diExample, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	kube := framework.KubeClient(t)
	framework.Eventually(t, 60*time.Second, "the garbage collector to remove the pods and the Service", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "diengine/job=" + diExample})
		if err != nil {
			return false, err
		}
		_, err = kube.CoreV1().Services(ns).Get(ctx, "di-"+diExample, metav1.GetOptions{})
		return len(pods.Items) == 0 && apierrors.IsNotFound(err), nil
	})
}

// countEventsOfType counts the events of an object of a type (Normal, Warning).
func countEventsOfType(t *testing.T, ns string, uid types.UID, eventType string) int {
	t.Helper()
	n := 0
	for _, e := range framework.Events(t, ns, uid) {
		if e.Type == eventType {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// waitForEvents waits until the object uid has, for each reason, an event
// whose message names name: the GlobalManager writes its events after the
// status that made them, not with it.
func waitForEvents(t *testing.T, ns string, uid types.UID, name string, reasons ...string) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("events %v naming %s", reasons, name), func(context.Context) (bool, error) {
		for _, reason := range reasons {
			if framework.CountEvents(t, ns, uid, reason, name) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

func TestDIJobScalesByEditAndByKubectlScale(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyDIJobExample(t, ns)
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	before, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	want := func(names ...string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			pods, err := diPods(ctx, t, ns, job)
			return err == nil && slices.Equal(keys(pods), names), err
		}
	}
	// Collectors 2 → 4 by a patch of the task, as kubectl edit writes it.
	if out, err := framework.Kubectl(t, "patch", "dijob", "-n", ns, diExample, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/tasks/1/replicas","value":4}]`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	framework.Eventually(t, 60*time.Second, "collectors 2 and 3 added", want("cartpole-dqn-collector-0", "cartpole-dqn-collector-1",
		"cartpole-dqn-collector-2", "cartpole-dqn-collector-3", "cartpole-dqn-evaluator-0", "cartpole-dqn-learner-0"))
	job = waitForDIJob(t, ns, diExample, "Running with 6 replicas", func(j *div2.DIJob) bool {
		return j.Status.Phase == div2.JobRunning && j.Status.Replicas == 6
	})
	after, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for n, p := range before {
		if after[n].UID != p.UID {
			t.Errorf("scaling up replaced pod %s", n)
		}
	}
	// Down to 1: the highest ranks go.
	if out, err := framework.Kubectl(t, "patch", "dijob", "-n", ns, diExample, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/tasks/1/replicas","value":1}]`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	framework.Eventually(t, 60*time.Second, "collectors 1, 2 and 3 removed", want("cartpole-dqn-collector-0", "cartpole-dqn-evaluator-0", "cartpole-dqn-learner-0"))

	// kubectl scale, through the scale subresource, on a job of one task;
	// refused on a job of several, naming the field.
	if _, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Create(t.Context(), toDIJob(t, oneLearner("solo", 3)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	solo := waitForDIJob(t, ns, "solo", "Running", diPhaseIs(div2.JobRunning))
	if out, err := framework.Kubectl(t, "scale", "-n", ns, "dijob/solo", "--replicas=3"); err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	framework.Eventually(t, 60*time.Second, "three learners", func(ctx context.Context) (bool, error) {
		pods, err := diPods(ctx, t, ns, solo)
		return err == nil && slices.Equal(keys(pods), []string{"solo-learner-0", "solo-learner-1", "solo-learner-2"}), err
	})
	waitForDIJob(t, ns, "solo", "3 replicas", func(j *div2.DIJob) bool { return j.Status.Replicas == 3 })
	if out, err := framework.Kubectl(t, "get", "--subresource=scale", "-n", ns, "dijob/solo", "-o", "jsonpath={.spec.replicas}/{.status.replicas}"); err != nil || out != "3/3" {
		t.Errorf("the scale subresource reads %q (%v), want 3/3", out, err)
	}
	// Scaled, the task's own replicas no longer decide: an edit of them alone
	// is refused, not silently ignored; removing spec.replicas with it works.
	out, err := framework.Kubectl(t, "patch", "dijob", "-n", ns, "solo", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/tasks/0/replicas","value":2}]`)
	if err == nil || !strings.Contains(out+err.Error(), "spec.replicas (set by kubectl scale)") {
		t.Errorf("a patch of tasks[0].replicas of a scaled job: %v\n%s; want a refusal naming spec.replicas", err, out)
	}
	if out, err := framework.Kubectl(t, "patch", "dijob", "-n", ns, "solo", "--type=json",
		"-p", `[{"op":"remove","path":"/spec/replicas"},{"op":"replace","path":"/spec/tasks/0/replicas","value":2}]`); err != nil {
		t.Fatalf("removing spec.replicas with the task's edit: %v\n%s", err, out)
	}
	framework.Eventually(t, 60*time.Second, "two learners", func(ctx context.Context) (bool, error) {
		pods, err := diPods(ctx, t, ns, solo)
		return err == nil && slices.Equal(keys(pods), []string{"solo-learner-0", "solo-learner-1"}), err
	})
	out, err = framework.Kubectl(t, "scale", "-n", ns, "dijob/"+diExample, "--replicas=3")
	if err == nil || !strings.Contains(out+err.Error(), "spec.replicas") {
		t.Errorf("kubectl scale on a job of three tasks: %v\n%s; want a refusal naming spec.replicas", err, out)
	}
}

func toDIJob(t *testing.T, obj map[string]any) *div2.DIJob {
	t.Helper()
	job := &div2.DIJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, job); err != nil {
		t.Fatal(err)
	}
	return job
}

// edgeCollectors is the example with its collectors on edge nodes.
func edgeCollectors(t *testing.T, ns string) *div2.DIJob {
	t.Helper()
	job := &div2.DIJob{}
	obj := framework.ReadManifest(t, filepath.Join(example("dijob"), "dijob.yaml"), "DIJob")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace = ns
	job.Spec.Tasks[1].Template.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/edge": ""}
	return job
}

func TestDIJobAllocatorPlacesCollectorsOnTheEdgeAndRefusesWhatDoesNotFit(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	if _, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Create(t.Context(), edgeCollectors(t, ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	// Learner and evaluator packed in the cloud pool (cloud-0, the only
	// cloud node), the two collectors spread over the two edge nodes.
	alloc := job.Status.Allocation
	if len(alloc) != 4 || alloc[0] != "cloud-0" || alloc[3] != "cloud-0" || !strings.HasPrefix(alloc[1], "edge-") || !strings.HasPrefix(alloc[2], "edge-") || alloc[1] == alloc[2] {
		t.Errorf("status.allocation %v, want [cloud-0 edge-x edge-y cloud-0] with the collectors on different edge nodes", alloc)
	}
	pods, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		rank := p.Annotations[dijob.AnnotationRank]
		if p.Spec.NodeName != p.Annotations[dijob.AnnotationNode] {
			t.Errorf("pod %s (rank %s) runs on %q, allocated %q", p.Name, rank, p.Spec.NodeName, p.Annotations[dijob.AnnotationNode])
		}
	}

	// A job asking more cpu than any node has stays Pending, saying so, and
	// makes no pod.
	big := oneLearner("too-big", 3)
	big["spec"].(map[string]any)["tasks"].([]any)[0].(map[string]any)["template"] = map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
		"name": "di-container", "image": "opendilab/ding:nightly", "resources": map[string]any{"requests": map[string]any{"cpu": "100000"}},
	}}}}
	if _, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Create(t.Context(), toDIJob(t, big), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tooBig := waitForDIJob(t, ns, "too-big", "Pending for want of cpu", func(j *div2.DIJob) bool {
		return j.Status.Phase == div2.JobPending && strings.Contains(conditionOf(j, div2.JobPending), "needs cpu 100k")
	})
	if pods, err := diPods(t.Context(), t, ns, tooBig); err != nil || len(pods) != 0 {
		t.Errorf("a job that does not fit has pods %v (%v)", keys(pods), err)
	}
	// Events are recorded once the status that explains them is written.
	framework.Eventually(t, 10*time.Second, "an event saying why the job waits", func(context.Context) (bool, error) {
		return framework.CountEvents(t, ns, tooBig.UID, "Pending", "needs cpu") > 0, nil
	})
	// Why it is pending, in kubectl get: its REASON column.
	if out, err := framework.Kubectl(t, "get", "dijob", "too-big", "-n", ns); err != nil || !strings.Contains(out, "REASON") || !strings.Contains(out, "InsufficientResources") {
		t.Errorf("kubectl get dijob too-big (%v):\n%s\nwant REASON InsufficientResources", err, out)
	}
}

func conditionOf(j *div2.DIJob, phase div2.Phase) string {
	for _, c := range j.Status.Conditions {
		if c.Type == div2.ConditionType(phase) {
			return c.Message
		}
	}
	return ""
}

// TestDIJobScaledOnItsFirstTaskKeepsRanksUniqueAndDINodesAgree is
// DI-orchestrator's sample-atari-dqn-dist (a learner, an evaluator, two
// collectors) with its first task scaled: the new learner takes the next
// free rank, no running pod's rank moves, and every pod's DI_NODES names the
// same pod at each index it lists, each pod at its own DI_RANK.
func TestDIJobScaledOnItsFirstTaskKeepsRanksUniqueAndDINodesAgree(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	task := func(typ string, replicas int64) map[string]any {
		return map[string]any{"type": typ, "replicas": replicas, "template": podTemplate()}
	}
	atari := dijobManifest("atari-dqn-dist", task("learner", 1), task("evaluator", 1), task("collector", 2))
	if _, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Create(t.Context(), toDIJob(t, atari.Object), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitForDIJob(t, ns, "atari-dqn-dist", "Running", diPhaseIs(div2.JobRunning))
	before, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := framework.Kubectl(t, "patch", "dijob", "-n", ns, "atari-dqn-dist", "--type=json",
		"-p", `[{"op":"replace","path":"/spec/tasks/0/replicas","value":2}]`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	waitForDIJob(t, ns, "atari-dqn-dist", "Running with 5 replicas", func(j *div2.DIJob) bool {
		return j.Status.Phase == div2.JobRunning && j.Status.Replicas == 5
	})
	after, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 5 {
		t.Fatalf("pods %v, want 5", keys(after))
	}
	for n, p := range before {
		if after[n].UID != p.UID || after[n].Annotations[dijob.AnnotationRank] != p.Annotations[dijob.AnnotationRank] {
			t.Errorf("scaling the learners replaced pod %s or moved its rank", n)
		}
	}
	ranks := map[string]string{}
	lists := map[string][]string{}
	for n, p := range after {
		env := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if other, ok := ranks[env["DI_RANK"]]; ok {
			t.Errorf("pods %s and %s both have DI_RANK %s", other, n, env["DI_RANK"])
		}
		ranks[env["DI_RANK"]] = n
		lists[n] = strings.Split(env["DI_NODES"], ",")
		rank, _ := strconv.Atoi(env["DI_RANK"])
		if rank >= len(lists[n]) || !strings.HasPrefix(lists[n][rank], n+".") {
			t.Errorf("pod %s has DI_RANK %d, but its DI_NODES %v names another there", n, rank, lists[n])
		}
	}
	if got := ranks["4"]; got != "atari-dqn-dist-learner-1" {
		t.Errorf("DI_RANK 4 is %q, want the new learner (after the 4 running pods)", got)
	}
	for a, la := range lists {
		for b, lb := range lists {
			n := min(len(la), len(lb))
			if !slices.Equal(la[:n], lb[:n]) {
				t.Errorf("the DI_NODES of %s and %s disagree:\n%v\n%v", a, b, la, lb)
			}
		}
	}
}
