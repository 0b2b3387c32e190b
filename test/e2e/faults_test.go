package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nereid-ml/nereid/test/framework"
)

// The faults every job is put through on real pods: a pod deleted by hand
// comes back (self-healing), a deleted job takes its pods with it (cascade).

// deletePod deletes pod ns/name by hand, as `kubectl delete pod` does.
func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	if err := framework.KubeClient(t).CoreV1().Pods(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitRemade waits until pod ns/name, deleted by hand, is made again (a pod
// of that name with another UID than gone) and Ready, and returns it.
func waitRemade(t *testing.T, ns, name string, gone types.UID) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, 90*time.Second, "pod "+name+" made again and Ready", func(ctx context.Context) (bool, error) {
		p, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		if p.UID == gone || p.DeletionTimestamp != nil {
			return false, nil
		}
		pod = p
		return podReady(p), nil
	})
	return pod
}

// podReady says whether p's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// waitPodsGone waits until namespace ns has no pod that selector selects:
// a deleted job's.
func waitPodsGone(t *testing.T, ns, selector string) {
	t.Helper()
	framework.Eventually(t, 90*time.Second, "the job's pods gone", func(ctx context.Context) (bool, error) {
		pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(pods.Items) == 0, err
	})
}

// waitGone waits until none of pods is left: each gone, or another pod by
// now of its name.
func waitGone(t *testing.T, ns string, pods []corev1.Pod) {
	t.Helper()
	framework.Eventually(t, 90*time.Second, "the pods gone", func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil && got.UID == p.UID {
				return false, nil
			} else if err != nil && !apierrors.IsNotFound(err) {
				return false, err
			}
		}
		return true, nil
	})
}
