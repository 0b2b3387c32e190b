package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/test/framework"
)

// installRelease is the release TestInstall makes; its objects are named
// after it.
const installRelease = "install"

// TestInstallWithHelmRunsTheFederatedExampleThroughTheChartsIdentities
// installs the chart with helm into a namespace of its own. kwok runs what it
// asks for: the GlobalManager's two Pods on cloud nodes, one LocalController
// Pod on each edge node and none elsewhere. The real GlobalManager and
// LocalControllers then run as those Pods (the chart's ServiceAccounts, tokens
// bound to the chart's Pods, the Deployment's own arguments), and the
// federated learning example runs to Succeeded through them. helm upgrade with
// a changed value rolls the Pods; helm uninstall leaves nothing of Nereid but
// the CRDs and the user's objects.
func TestInstallWithHelmRunsTheFederatedExampleThroughTheChartsIdentities(t *testing.T) {
	ns := framework.Namespace(t)
	kube := framework.KubeClient(t)
	if out, err := framework.Helm(t, "install", installRelease, framework.ChartDir(), "--namespace", ns); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_, _ = framework.Helm(t, "uninstall", installRelease, "--namespace", ns)
		}
	})

	edgeNodes := nodesWithRole(t, true)
	gmPods := chartPods(t, ns, "globalmanager", 2)
	for _, p := range gmPods {
		if slices.Contains(edgeNodes, p.Spec.NodeName) {
			t.Errorf("GlobalManager Pod %s runs on edge node %s", p.Name, p.Spec.NodeName)
		}
	}
	lcPods := chartPods(t, ns, "localcontroller", len(edgeNodes))
	onNode := map[string]*corev1.Pod{}
	for _, p := range lcPods {
		onNode[p.Spec.NodeName] = p
	}
	if got := sets.List(sets.KeySet(onNode)); !slices.Equal(got, edgeNodes) {
		t.Fatalf("LocalController Pods on %v, want one on each edge node %v and none elsewhere", got, edgeNodes)
	}

	// The GlobalManager, as the first of its Pods, with its Deployment's
	// arguments (addresses on loopback, and managing only this namespace).
	gmPod := gmPods[0]
	deploy, err := kube.AppsV1().Deployments(ns).Get(t.Context(), installRelease+"-nereid-globalmanager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token, err := framework.NewBoundToken(t.Context(), kube, gmPod, "")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := framework.WriteTokenKubeconfig(installRelease+"-globalmanager", token)
	if err != nil {
		t.Fatal(err)
	}
	edgeAddr := "127.0.0.1:" + strconv.Itoa(framework.FreePort(t))
	args := withArgs(deploy.Spec.Template.Spec.Containers[0].Args, map[string]string{
		"--health-address": "127.0.0.1:0",
		"--edge-address":   edgeAddr,
	})
	args = append(args, "--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name="+gmPod.Name, "--pod-namespace="+ns, "-v=2")
	gm := framework.NewProcess("globalmanager", framework.Binary(t, "globalmanager"), filepath.Join(t.TempDir(), "globalmanager.log"), args...)
	if err := gm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		gm.Stop(t)
		if t.Failed() {
			t.Logf("the GlobalManager's log:\n%s", gm.Log())
		}
	})
	waitServing(t, ns, gmPod.Name, true)

	// Each LocalController, as its node's Pod, trusting the CA the
	// GlobalManager published in the ConfigMap the DaemonSet mounts.
	var ca string
	framework.Eventually(t, 30*time.Second, "the hub's CA ConfigMap", func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, edgehub.CAConfigMapName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		ca = cm.Data[edgehub.CAKey]
		return ca != "", err
	})
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, []byte(ca), 0o600); err != nil {
		t.Fatal(err)
	}
	hub := &framework.EdgeHub{Process: gm, Address: edgeAddr, CAFile: caFile}
	lcs := map[string]*framework.LocalController{}
	for _, node := range edgeNodes {
		token, err := framework.NewBoundToken(t.Context(), kube, onNode[node], edgehub.DefaultTokenAudience)
		if err != nil {
			t.Fatal(err)
		}
		lcs[node] = framework.StartLocalController(t, hub, node, framework.WriteToken(t, node, token))
	}

	// The federated learning example, through them.
	job := applyFederatedExample(t, ns)
	worker := trainingWorkerOn(t, ns, job, "edge-0")
	postUntilKnown(t, lcs["edge-0"], ns, worker, 1)
	waitForReports(t, ns, "edge-0", 1)
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Labels[common.LabelWorkerRole] != "aggregation" {
			continue
		}
		// kwok keeps pods Running: the test plays the kubelet.
		p = p.DeepCopy()
		p.Status.Phase = corev1.PodSucceeded
		if _, err := kube.CoreV1().Pods(ns).UpdateStatus(t.Context(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitForPhase(t, ns, flJob, sednav1.FLJobSucceeded)

	// helm upgrade with a changed value rolls the Pods.
	if out, err := framework.Helm(t, "upgrade", installRelease, framework.ChartDir(), "--namespace", ns, "--reuse-values",
		"--set", "globalManager.logLevel=2", "--set", "localController.logLevel=2"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	for component, before := range map[string][]*corev1.Pod{"globalmanager": gmPods, "localcontroller": lcPods} {
		framework.Eventually(t, 90*time.Second, "the "+component+" Pods to roll", func(ctx context.Context) (bool, error) {
			now, err := listChartPods(ctx, t, ns, component)
			if err != nil || len(now) != len(before) {
				return false, err
			}
			for _, p := range now {
				if slices.ContainsFunc(before, func(b *corev1.Pod) bool { return b.UID == p.UID }) || !slices.Contains(p.Spec.Containers[0].Args, "-v=2") {
					return false, nil
				}
			}
			return true, nil
		})
	}

	// helm uninstall, and the Pods' processes end: nothing of Nereid stays but
	// the CRDs and the user's objects.
	if out, err := framework.Helm(t, "uninstall", installRelease, "--namespace", ns, "--wait", "--timeout=2m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	uninstalled = true
	for _, lc := range lcs {
		lc.Stop(t)
	}
	gm.Stop(t)
	framework.Eventually(t, 90*time.Second, "nothing of Nereid left in "+ns, func(ctx context.Context) (bool, error) {
		left, err := nereidLeftovers(ctx, t, ns)
		if len(left) > 0 {
			t.Logf("left: %v", left)
		}
		return len(left) == 0, err
	})
	if _, err := sednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(t.Context(), flJob, metav1.GetOptions{}); err != nil {
		t.Errorf("the user's job after uninstall: %v", err)
	}
	if _, err := framework.Kubectl(t, "get", "crd", "federatedlearningjobs.sedna.io"); err != nil {
		t.Errorf("the CRDs after uninstall: %v", err)
	}
}

// nodesWithRole lists the cluster's edge nodes (edge) or its other nodes,
// sorted.
func nodesWithRole(t *testing.T, edge bool) []string {
	t.Helper()
	nodes, err := framework.KubeClient(t).CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		if _, ok := n.Labels["node-role.kubernetes.io/edge"]; ok == edge {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// chartPods waits until the release's Pods of component are n, bound to
// nodes and Running, and returns them.
func chartPods(t *testing.T, ns, component string, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("%d %s Pods running", n, component), func(ctx context.Context) (bool, error) {
		var err error
		pods, err = listChartPods(ctx, t, ns, component)
		if err != nil || len(pods) != n {
			return false, err
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	})
	return pods
}

func listChartPods(ctx context.Context, t *testing.T, ns, component string) ([]*corev1.Pod, error) {
	list, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + installRelease + ",app.kubernetes.io/component=" + component,
	})
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, &list.Items[i])
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// nereidLeftovers lists what of Nereid is still in ns or cluster-wide: the
// release's objects, and what the GlobalManager made (its Leases, the hub's
// Secret and CA ConfigMap).
func nereidLeftovers(ctx context.Context, t *testing.T, ns string) ([]string, error) {
	kube := framework.KubeClient(t)
	var left []string
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + installRelease}
	name := installRelease + "-nereid-globalmanager"
	checks := map[string]func() (int, error){
		"Pods": func() (int, error) {
			l, err := kube.CoreV1().Pods(ns).List(ctx, sel)
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"Deployments": func() (int, error) {
			l, err := kube.AppsV1().Deployments(ns).List(ctx, sel)
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"DaemonSets": func() (int, error) {
			l, err := kube.AppsV1().DaemonSets(ns).List(ctx, sel)
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"Services": func() (int, error) {
			l, err := kube.CoreV1().Services(ns).List(ctx, sel)
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"ServiceAccounts": func() (int, error) {
			l, err := kube.CoreV1().ServiceAccounts(ns).List(ctx, sel)
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"PodDisruptionBudgets": func() (int, error) {
			l, err := kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, sel)
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"Roles": func() (int, error) {
			l, err := kube.RbacV1().Roles(ns).List(ctx, sel)
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"RoleBindings": func() (int, error) {
			l, err := kube.RbacV1().RoleBindings(ns).List(ctx, sel)
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"Leases": func() (int, error) {
			l, err := kube.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			return lenOr(l, err, func() int { return len(l.Items) })
		},
		"ClusterRole": func() (int, error) { return found(kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})) },
		"ClusterRoleBinding": func() (int, error) {
			return found(kube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}))
		},
		"the hub's Secret": func() (int, error) {
			return found(kube.CoreV1().Secrets(ns).Get(ctx, edgehub.TLSSecretName, metav1.GetOptions{}))
		},
		"the hub's CA ConfigMap": func() (int, error) {
			return found(kube.CoreV1().ConfigMaps(ns).Get(ctx, edgehub.CAConfigMapName, metav1.GetOptions{}))
		},
	}
	for what, count := range checks {
		n, err := count()
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", what, err)
		}
		if n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, what))
		}
	}
	slices.Sort(left)
	return left, nil
}

func lenOr[L any](_ L, err error, n func() int) (int, error) {
	if err != nil {
		return 0, err
	}
	return n(), nil
}

func found[O any](_ O, err error) (int, error) {
	if apierrors.IsNotFound(err) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	return 1, nil
}

// withArgs is args with the flags in set given those values, as --flag=value.
func withArgs(args []string, set map[string]string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := set[name]; ok {
			a = name + "=" + v
		}
		out = append(out, a)
	}
	return out
}
