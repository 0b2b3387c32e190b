package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/pkg/plugin/playworker"
)

// The v1 example: examples/dijob-v1, its AggregatorConfig (applied with the
// namespace it names) and its job.
const (
	diJobV1Name      = "cartpole-dqn-v1"
	diJobV1Dir       = "examples/dijob-v1"
	diJobV1AGConfig  = diJobV1Dir + "/00-aggregatorconfig.yaml"
	diJobV1Manifest  = diJobV1Dir + "/10-dijob.yaml"
	v1DemoTimeout    = 5 * time.Minute
	v1CoordinatorFor = 2 * time.Minute
	v1StepFor        = time.Minute
)

// runDIJobV1 runs examples/dijob-v1 and plays its coordinator, as DI-engine's
// v1 coordinator speaks to DI-orchestrator v0.2's server: it asks for 2
// collectors and a learner, lists them, reports a collector failed, gives
// one back, then ends; the job succeeds with its coordinator. Every wait is
// bounded, and the demo stops within v1DemoTimeout whatever happens.
func runDIJobV1(outDir, ns string, pause time.Duration) error {
	if err := withoutRealNodes(outDir, "demo-dijob-v1"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), v1DemoTimeout)
	defer cancel()
	d, err := start(ctx, outDir, ns, "dijob/"+diJobV1Name, diJobV1Manifest, applyAggregatorConfig(ctx))
	if err != nil {
		return err
	}
	coordinator, err := waitForCoordinator(ctx, d, ns)
	if err != nil {
		return err
	}
	env := envOf(*coordinator, coordinated.EnvServerURL)
	if env == "" {
		return fmt.Errorf("the coordinator %s has no %s: the GlobalManager serves no v1 replicas server (make local-up serves one with --di-v1-server-url)",
			coordinator.Name, coordinated.EnvServerURL)
	}
	c := v1Coordinator{server: v1ServerURL(env), namespace: ns, name: coordinator.Name, client: playworker.ClientFrom(coordinator.Status.PodIP), retryFor: 30 * time.Second}
	say("playing the coordinator %s: its %s=%s, speaking from its address %s (the v1 server takes a coordinator's calls from there)",
		coordinator.Name, coordinated.EnvServerURL, env, coordinator.Status.PodIP)
	if err := playCoordinator(ctx, d, c); err != nil {
		return err
	}
	time.Sleep(pause)
	if err := playworker.FinishPod(ctx, d.kube, ns, coordinator.Name, corev1.PodSucceeded); err != nil {
		return err
	}
	say("%s: its container exited 0; pod Succeeded (written as its kubelet would)", coordinator.Name)
	job, err := waitDIJobV1(ctx, d, ns, v1StepFor, func(j *div1.DIJob) bool { return j.Status.Phase == div1.JobSucceeded })
	if err != nil {
		return fmt.Errorf("waiting for job %s/%s to be Succeeded in v1alpha1 once its coordinator succeeded: %w", ns, diJobV1Name, err)
	}
	say("job %s Succeeded (read in v1alpha1): %s", diJobV1Name, replicaStatus(job))
	if err := kubectl(ctx, d, "get", "pods", "-n", ns, "-l", coordinated.LabelJobName+"="+diJobV1Name); err != nil {
		return err
	}
	return kubectl(ctx, d, "get", "dijobs.v1alpha1.diengine.opendilab.org", "-n", ns, diJobV1Name)
}

// applyAggregatorConfig applies the example's AggregatorConfig with the
// namespace it names (kubectl apply -n refuses another one).
func applyAggregatorConfig(ctx context.Context) func(*demoRun) error {
	return func(d *demoRun) error {
		say("applying %s (the cluster's AggregatorConfig, in di-system)", diJobV1AGConfig)
		apply := exec.CommandContext(ctx, kubectlPath(), "--kubeconfig", d.kubeconfig, "apply", "-f", diJobV1AGConfig)
		apply.Stdout, apply.Stderr = os.Stdout, os.Stderr
		if err := apply.Run(); err != nil {
			return fmt.Errorf("kubectl apply -f %s: %w", diJobV1AGConfig, err)
		}
		return nil
	}
}

// waitForCoordinator waits for the job's coordinator pod, which the
// GlobalManager makes, to run with an address.
func waitForCoordinator(ctx context.Context, d *demoRun, ns string) (*corev1.Pod, error) {
	name := coordinated.CoordinatorName(diJobV1Name)
	say("waiting for the GlobalManager to start the coordinator %s (kubectl get dijobs.v1alpha1.diengine.opendilab.org -n %s -w)", name, ns)
	var pod *corev1.Pod
	var last error
	// Each read has the demo's context, not the poll's: one cut short by
	// the poll's deadline would hide what the last answer said.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, v1CoordinatorFor, true, func(context.Context) (bool, error) {
		p, err := d.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if pod, last = p, err; err != nil {
			return false, nil
		}
		return pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "", nil
	})
	if err != nil {
		switch {
		case apierrors.IsNotFound(last):
			last = errors.New("there is no such pod")
		case last == nil:
			last = fmt.Errorf("it is %s with address %q", pod.Status.Phase, pod.Status.PodIP)
		}
		return nil, fmt.Errorf("waiting %s for the coordinator pod %s/%s to run with an address (the GlobalManager's v1 operator makes it; its log: %s): %v",
			v1CoordinatorFor, ns, name, filepath.Join(d.outDir, "logs", "globalmanager.log"), last)
	}
	if err := isCoordinatorOf(pod, diJobV1Name); err != nil {
		return nil, err
	}
	say("coordinator %s Running on %s at %s (labels %s=%s, %s=%s)", pod.Name, pod.Spec.NodeName, pod.Status.PodIP,
		coordinated.LabelJobName, diJobV1Name, coordinated.LabelReplicaType, coordinated.Coordinator)
	return pod, nil
}

// isCoordinatorOf says why pod is not job's coordinator, as DI-orchestrator
// labelled it, if it is not.
func isCoordinatorOf(pod *corev1.Pod, job string) error {
	if pod.Labels[coordinated.LabelJobName] != job || pod.Labels[coordinated.LabelReplicaType] != coordinated.Coordinator {
		return fmt.Errorf("pod %s/%s is not job %s's coordinator: labels %s=%q, %s=%q", pod.Namespace, pod.Name, job,
			coordinated.LabelJobName, pod.Labels[coordinated.LabelJobName], coordinated.LabelReplicaType, pod.Labels[coordinated.LabelReplicaType])
	}
	return nil
}

// playCoordinator makes the coordinator's calls, printing each answer.
func playCoordinator(ctx context.Context, d *demoRun, c v1Coordinator) error {
	collectors := v1Resources{Replicas: 2, CPUs: "1", GPUs: "0", Memory: "1Gi"}
	learners := v1Resources{Replicas: 1, CPUs: "1", GPUs: "0", Memory: "1Gi"}
	say("POST %s%s: 2 collectors and 1 learner, as its init_replicas_request asks", c.server, replicasPath)
	made, r, err := c.ask(ctx, collectors, learners)
	if err != nil {
		return err
	}
	if len(made.Collectors) != 2 || len(made.Learners) != 1 {
		return fmt.Errorf("POST %s answered %d collectors and %d learners, want 2 and 1: %+v", replicasPath, len(made.Collectors), len(made.Learners), made)
	}
	showV1Answer(r, made)
	if err := kubectl(ctx, d, "get", "pods", "-n", c.namespace, "-l", coordinated.LabelJobName+"="+diJobV1Name, "-o",
		"custom-columns=NAME:.metadata.name,TYPE:.metadata.labels.replica-type,NODE:.spec.nodeName,STATUS:.status.phase,IP:.status.podIP"); err != nil {
		return err
	}
	say("GET %s%s?namespace=%s&coordinator=%s: the replicas it knows of", c.server, replicasPath, c.namespace, c.name)
	if _, err := waitForV1Replicas(ctx, c, 2, 1); err != nil {
		return err
	}
	lost := podNameOf(made.Collectors[0])
	say("POST %s%s/failed: the coordinator lost %s (its pod name, cut from the URL as DI-engine does); the server makes it again", c.server, replicasPath, lost)
	again, r, err := c.failed(ctx, []string{lost}, nil)
	if err != nil {
		return err
	}
	showV1Answer(r, again)
	say("DELETE %s%s: the coordinator gives back 1 collector", c.server, replicasPath)
	deleted, r, err := c.release(ctx, 1, 0)
	if err != nil {
		return err
	}
	if len(deleted.Collectors) != 1 {
		return fmt.Errorf("DELETE %s answered %d collectors deleted, want 1: %+v", replicasPath, len(deleted.Collectors), deleted)
	}
	showV1Answer(r, deleted)
	say("GET again: 1 collector and the learner are left")
	_, err = waitForV1Replicas(ctx, c, 1, 1)
	return err
}

// waitForV1Replicas GETs the replicas until the server lists that many
// collectors and learners (its pod cache follows the changes), for at most
// v1StepFor, and prints the answer.
func waitForV1Replicas(ctx context.Context, c v1Coordinator, collectors, learners int) (v1Replicas, error) {
	var got v1Replicas
	var r diResponse
	var last error
	// Each read has the demo's context, not the poll's: one cut short by
	// the poll's deadline would hide what the last answer said.
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, v1StepFor, true, func(context.Context) (bool, error) {
		g, rr, err := c.replicas(ctx)
		got, r, last = g, rr, err
		return last == nil && len(got.Collectors) == collectors && len(got.Learners) == learners, nil
	})
	if err != nil {
		if last == nil {
			last = fmt.Errorf("the last answer listed %d collectors and %d learners: %+v", len(got.Collectors), len(got.Learners), got)
		}
		return got, fmt.Errorf("waiting %s for GET %s to list %d collectors and %d learners: %v", v1StepFor, replicasPath, collectors, learners, last)
	}
	showV1Answer(r, got)
	return got, nil
}

// showV1Answer prints an answer of the v1 server.
func showV1Answer(r diResponse, data v1Replicas) {
	say("answered %q:", r.Message)
	fmt.Printf("  collectors: %s\n  learners:   %s\n\n", orNone(data.Collectors), orNone(data.Learners))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// waitDIJobV1 waits until the job, read in v1alpha1, satisfies cond; on a
// timeout it says where the job is.
func waitDIJobV1(ctx context.Context, d *demoRun, ns string, timeout time.Duration, cond func(*div1.DIJob) bool) (*div1.DIJob, error) {
	var job *div1.DIJob
	var last error
	// Each read has the demo's context, not the poll's: one cut short by
	// the poll's deadline would hide what the last answer said.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		j, err := d.sedna.DiengineV1alpha1().DIJobs(ns).Get(ctx, diJobV1Name, metav1.GetOptions{})
		if last = err; err == nil {
			job = j
		}
		return last == nil && cond(job), nil
	})
	switch {
	case err == nil:
		return job, nil
	case last != nil || job == nil:
		return nil, fmt.Errorf("%w; the last read failed: %v", err, last)
	default:
		return nil, fmt.Errorf("%w; after %s it is %q: %s", err, timeout, job.Status.Phase, replicaStatus(job))
	}
}

// replicaStatus is status.replicaStatus as "Collector: 1 active, 2
// succeeded; …", in the replica types' order.
func replicaStatus(job *div1.DIJob) string {
	var parts []string
	for _, typ := range []div1.ReplicaType{div1.ReplicaTypeCoordinator, div1.ReplicaTypeCollector, div1.ReplicaTypeLearner, div1.ReplicaTypeAggregator} {
		if s := job.Status.ReplicaStatus[typ]; s != nil {
			parts = append(parts, fmt.Sprintf("%s: %d active, %d succeeded, %d failed", typ, s.Active, s.Succeeded, s.Failed))
		}
	}
	if len(parts) == 0 {
		return "no replica status"
	}
	return strings.Join(parts, "; ")
}
