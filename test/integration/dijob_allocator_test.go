package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/test/framework"
)

// allocPool adds kwok nodes of 4 cpu for one test, labelled (with extra
// labels too) and tainted so that only that test's pods use them, and
// removes them after it.
func allocPool(t *testing.T, pool string, extra map[string]string, names ...string) (selector map[string]string, tolerations []corev1.Toleration) {
	t.Helper()
	return allocPoolOf(t, pool, extra, nil, names...)
}

// allocPoolOf is allocPool of nodes that also have the resources more.
func allocPoolOf(t *testing.T, pool string, extra map[string]string, more corev1.ResourceList, names ...string) (selector map[string]string, tolerations []corev1.Toleration) {
	t.Helper()
	kube := framework.KubeClient(t)
	for _, name := range names {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      common.MergeLabels(extra, map[string]string{"kubernetes.io/hostname": name, "type": "kwok", "nereid.io/test-pool": pool})},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nereid.io/test-pool", Value: pool, Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110"),
			}},
		}
		for k, v := range more {
			node.Status.Allocatable[k] = v
		}
		node.Status.Capacity = node.Status.Allocatable
		if _, err := kube.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("nodes %v Ready and schedulable", names), func(ctx context.Context) (bool, error) {
		for _, name := range names {
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			ready := false
			for _, c := range n.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready || len(n.Spec.Taints) != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	return map[string]string{"nereid.io/test-pool": pool}, poolTolerations(pool)
}

// poolTolerations are how pods reach the nodes of an allocPool, made or
// still to be made.
func poolTolerations(pool string) []corev1.Toleration {
	return []corev1.Toleration{{Key: "nereid.io/test-pool", Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}}
}

// poolTask is a task of the pool, requesting cpu.
func poolTask(typ div2.TaskType, name, cpu string, selector map[string]string, tolerations []corev1.Toleration) div2.Task {
	return div2.Task{Type: typ, Name: name, Replicas: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeSelector: selector, Tolerations: tolerations,
		Containers: []corev1.Container{{Name: "di-container", Image: "opendilab/ding:nightly",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
	}}}
}

// TestDIJobAllocatorMovesAPreemptibleJobWhenAnotherFinishes: job a (not
// preemptible) fills most of one node, so the preemptible job b is split
// over two; when a finishes, the allocator gathers b on one node (Rescheduling,
// reschedules 1), and a is never moved.
func TestDIJobAllocatorMovesAPreemptibleJobWhenAnotherFinishes(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	pool := "alloc-" + ns[len(ns)-5:]
	selector, tolerations := allocPool(t, pool, nil, pool+"-1", pool+"-2")
	framework.StartGlobalManager(t, ns, "--allocator-period", "2s")
	jobs := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns)
	a := &div2.DIJob{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: div2.DIJobSpec{Tasks: []div2.Task{
		poolTask(div2.TaskTypeLearner, "", "3", selector, tolerations)}}}
	if _, err := jobs.Create(t.Context(), a, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a = waitForDIJob(t, ns, "a", "Running", diPhaseIs(div2.JobRunning))
	if !slices.Equal(a.Status.Allocation, []string{pool + "-1"}) {
		t.Fatalf("job a placed on %v, want [%s-1] (the first of two empty nodes)", a.Status.Allocation, pool)
	}
	b := &div2.DIJob{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: div2.DIJobSpec{Preemptible: true, Tasks: []div2.Task{
		poolTask(div2.TaskTypeLearner, "", "1", selector, tolerations),
		poolTask(div2.TaskTypeNone, "replay", "3", selector, tolerations)}}}
	if _, err := jobs.Create(t.Context(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b = waitForDIJob(t, ns, "b", "Running", diPhaseIs(div2.JobRunning))
	if want := []string{pool + "-1", pool + "-2"}; !slices.Equal(b.Status.Allocation, want) {
		t.Fatalf("job b placed on %v, want %v: its learner packed beside a, its replay where 3 cpu are free", b.Status.Allocation, want)
	}
	if b.Status.Reschedules != 0 {
		t.Fatalf("job b moved while a runs: reschedules %d", b.Status.Reschedules)
	}

	setPodPhase(t, ns, "a-learner-0", corev1.PodSucceeded, "")
	waitForDIJob(t, ns, "a", "Succeeded", diPhaseIs(div2.JobSucceeded))
	b = waitForDIJob(t, ns, "b", "moved and Running again", func(j *div2.DIJob) bool {
		return j.Status.Reschedules == 1 && j.Status.Phase == div2.JobRunning
	})
	if len(b.Status.Allocation) != 2 || b.Status.Allocation[0] != b.Status.Allocation[1] {
		t.Errorf("job b after the move is on %v, want both replicas on one node", b.Status.Allocation)
	}
	var sawRescheduling bool
	for _, c := range b.Status.Conditions {
		sawRescheduling = sawRescheduling || c.Type == div2.ConditionType(div2.JobRescheduling)
	}
	if !sawRescheduling {
		t.Errorf("no Rescheduling condition on the moved job: %+v", b.Status.Conditions)
	}
	a, err := jobs.Get(t.Context(), "a", metav1.GetOptions{})
	if err != nil || a.Status.Reschedules != 0 {
		t.Errorf("job a (not preemptible): reschedules %d, %v; want 0", a.Status.Reschedules, err)
	}
}
