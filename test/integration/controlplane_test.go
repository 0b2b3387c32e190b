package integration

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/test/framework"
)

// edgeRoleLabel marks the edge nodes that hack/local-up.sh registers.
const edgeRoleLabel = "node-role.kubernetes.io/edge"

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Parallel(8)))
}

// TestControlPlaneSchedulesPodsOnEdgeNodes proves the scheduler and kwok are real: pods
// that ask for an edge node are placed on one by the scheduler (nodeName is left empty)
// and kwok moves them to Running.
func TestControlPlaneSchedulesPodsOnEdgeNodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := framework.Namespace(t)
	client := framework.KubeClient(t)

	edgeNodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: edgeRoleLabel})
	if err != nil {
		t.Fatalf("listing edge nodes: %v", err)
	}
	if len(edgeNodes.Items) == 0 {
		t.Fatalf("no node is labelled %s", edgeRoleLabel)
	}
	isEdge := map[string]bool{}
	for _, n := range edgeNodes.Items {
		isEdge[n.Name] = true
	}

	// Several pods, so that a selector the scheduler ignored would show up as a pod on
	// the cloud node.
	const pods = 3
	for i := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "edge-worker-"},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{edgeRoleLabel: ""},
				Containers:   []corev1.Container{{Name: "worker", Image: "example.invalid/worker:v1"}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %d: %v", i, err)
		}
	}

	list := &corev1.PodList{}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range list.Items {
				t.Logf("pod %s: node %q, phase %s, conditions %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			}
		}
	})
	framework.Eventually(t, 30*time.Second, strconv.Itoa(pods)+" pods to be scheduled and Running", func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		list = l
		running := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == pods, nil
	})
	for _, p := range list.Items {
		if !isEdge[p.Spec.NodeName] {
			t.Errorf("pod %s runs on node %q, want one of the edge nodes %v", p.Name, p.Spec.NodeName, isEdge)
		}
	}
}

// TestGarbageCollectorCascadesDeletion proves the controller-manager's garbage collector
// runs: deleting an owner deletes its dependents, with either propagation policy.
func TestGarbageCollectorCascadesDeletion(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		propagation metav1.DeletionPropagation
	}{
		"background": {propagation: metav1.DeletePropagationBackground},
		"foreground": {propagation: metav1.DeletePropagationForeground},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			ns := framework.Namespace(t)
			configMaps := framework.KubeClient(t).CoreV1().ConfigMaps(ns)

			owner, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("creating the owner: %v", err)
			}
			child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: "child",
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion:         "v1",
					Kind:               "ConfigMap",
					Name:               owner.Name,
					UID:                owner.UID,
					Controller:         new(true),
					BlockOwnerDeletion: new(true),
				}},
			}}
			if _, err := configMaps.Create(ctx, child, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the child: %v", err)
			}

			if err := configMaps.Delete(ctx, owner.Name, metav1.DeleteOptions{PropagationPolicy: &tc.propagation}); err != nil {
				t.Fatalf("deleting the owner: %v", err)
			}
			for _, name := range []string{child.Name, owner.Name} {
				framework.Eventually(t, 30*time.Second, "ConfigMap "+name+" deleted", func(ctx context.Context) (bool, error) {
					_, err := configMaps.Get(ctx, name, metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						return true, nil
					}
					return false, err
				})
			}
		})
	}
}
