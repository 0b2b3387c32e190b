package playworker

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// KwokNodeAnnotation marks the nodes kwok manages (value KwokNodeValue),
// as kwok's own tooling and make local-up register them: no kubelet runs
// their pods, so nothing else writes a finished pod's status.
const (
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	KwokNodeValue      = "fake"
)

// RequireKwokNode says why the pods of node must not be finished by hand:
// on a real node the kubelet owns a pod's status and would overwrite (or be
// contradicted by) a status written by anyone else.
func RequireKwokNode(ctx context.Context, kube kubernetes.Interface, node string) error {
	if node == "" {
		return fmt.Errorf("the pod is on no node yet, so no kubelet or kwok would finish it")
	}
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s to see whether it is a kwok node: %w", node, err)
	}
	if n.Annotations[KwokNodeAnnotation] != KwokNodeValue {
		return fmt.Errorf("node %s is not a kwok node (no annotation %s=%s): its kubelet owns its pods' status, so --finish marks only the local run's pods finished",
			node, KwokNodeAnnotation, KwokNodeValue)
	}
	return nil
}

// FinishPod writes what a kubelet writes when a pod's containers exit: with
// phase Succeeded, exit code 0 (Completed); with Failed, exit code 1
// (Error). It writes on the pod as it is now: kwok writes the same status
// (Running, ready), so a write on a copy read earlier is retried on a
// conflict.
func FinishPod(ctx context.Context, kube kubernetes.Interface, ns, name string, phase corev1.PodPhase) error {
	if phase != corev1.PodSucceeded && phase != corev1.PodFailed {
		return fmt.Errorf("a finished pod is Succeeded or Failed, not %q", phase)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		finished(p, phase, metav1.Now())
		_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("marking %s/%s %s: %w", ns, name, phase, err)
	}
	return nil
}

// finished changes p's status into that of a pod finished in phase at now.
func finished(p *corev1.Pod, phase corev1.PodPhase, now metav1.Time) {
	code, reason := int32(0), "Completed"
	if phase == corev1.PodFailed {
		code, reason = 1, "Error"
	}
	p.Status.Phase = phase
	for i := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[i]
		started := now
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: now}}
		cs.Ready = false
	}
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.Reason, c.LastTransitionTime = corev1.ConditionFalse, "PodCompleted", now
		}
	}
}
