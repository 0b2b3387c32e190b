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

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/test/framework"
)

// installRelease is the release TestInstall makes; its objects are named
// after it.
const installRelease = "install"

// testInstallWithHelmRunsTheFederatedExampleThroughTheChartsIdentities
// installs the chart with helm into a namespace of its own. kwok runs what it
// asks for: the GlobalManager's two Pods on cloud nodes, one LocalController
// Pod on each edge node and none elsewhere. The real GlobalManager and
// LocalControllers then run as those Pods (the chart's ServiceAccounts, tokens
// bound to the chart's Pods, the Deployment's own arguments), and the
// federated learning example runs to Succeeded through them. helm upgrade with
// a changed value rolls the Pods; helm uninstall leaves nothing of Nereid but
// the CRDs and the user's objects.
func testInstallWithHelmRunsTheFederatedExampleThroughTheChartsIdentities(t *testing.T) {
	ns := framework.Namespace(t)
	uninstalled := installChart(t, ns)
	gmPods, lcPods, edgeNodes, onNode := releasePods(t, ns)
	gm, edgeAddr := startReleaseGlobalManager(t, ns, gmPods[0])
	lcs := startReleaseLocalControllers(t, ns, gm, edgeAddr, edgeNodes, onNode)
	runFederatedExample(t, ns, lcs)
	upgradeRollsPods(t, ns, map[string][]*corev1.Pod{"globalmanager": gmPods, "localcontroller": lcPods})
	uninstallLeavesNothing(t, ns, uninstalled, gm, lcs)
}

// installChart installs the chart with helm into ns, as release
// installRelease, and returns what uninstalls it at the end unless the test
// did: call it once the test has.
func installChart(t *testing.T, ns string) (uninstalled func()) {
	t.Helper()
	// The release's GlobalManager makes children here, under the release's
	// own owner-label policy, kept to this namespace so that it lets other
	// tests' GlobalManagers be; the tests' policy leaves it alone.
	if _, err := framework.Kubectl(t, "label", "namespace", ns, framework.OwnOwnerLabelPolicy+"=true"); err != nil {
		t.Fatal(err)
	}
	if out, err := framework.Helm(t, "install", installRelease, framework.ChartDir(), "--namespace", ns,
		"--set-json", `ownerLabelPolicy.namespaceSelector={"matchLabels":{"kubernetes.io/metadata.name":"`+ns+`"}}`); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			_, _ = framework.Helm(t, "uninstall", installRelease, "--namespace", ns)
		}
	})
	return func() { done = true }
}

// releasePods waits for the release's Pods in ns: the GlobalManager's two
// on cloud nodes, and one LocalController Pod on each edge node (edgeNodes)
// and none elsewhere, by node (onNode).
func releasePods(t *testing.T, ns string) (gmPods, lcPods []*corev1.Pod, edgeNodes []string, onNode map[string]*corev1.Pod) {
	t.Helper()
	edgeNodes = nodesWithRole(t, true)
	gmPods = chartPods(t, ns, "globalmanager", 2)
	for _, p := range gmPods {
		if slices.Contains(edgeNodes, p.Spec.NodeName) {
			t.Errorf("GlobalManager Pod %s runs on edge node %s", p.Name, p.Spec.NodeName)
		}
	}
	lcPods = chartPods(t, ns, "localcontroller", len(edgeNodes))
	onNode = map[string]*corev1.Pod{}
	for _, p := range lcPods {
		onNode[p.Spec.NodeName] = p
	}
	if got := sets.List(sets.KeySet(onNode)); !slices.Equal(got, edgeNodes) {
		t.Fatalf("LocalController Pods on %v, want one on each edge node %v and none elsewhere", got, edgeNodes)
	}
	return gmPods, lcPods, edgeNodes, onNode
}

// startReleaseGlobalManager runs the real GlobalManager as gmPod, the first
// of the release's GlobalManager Pods in ns, with its Deployment's
// arguments (addresses on loopback, and managing only ns), until it serves
// its edge hub; it returns the process and the hub's address.
func startReleaseGlobalManager(t *testing.T, ns string, gmPod *corev1.Pod) (*framework.Process, string) {
	t.Helper()
	kube := framework.KubeClient(t)
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
		"--health-address":    "127.0.0.1:0",
		"--edge-address":      edgeAddr,
		"--di-server-address": "127.0.0.1:0",
		// Not the Pod's 0.0.0.0:9443: other processes run on this machine.
		"--dijob-conversion-address": "127.0.0.1:0",
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
	// With the chart's ClusterRole, it points the DIJob CRD at the
	// release's conversion Service, with its CA.
	framework.Eventually(t, 30*time.Second, "the DIJob CRD pointing at the release's conversion webhook", func(ctx context.Context) (bool, error) {
		cc, err := dijobConversionClientConfig(ctx, t)
		if err != nil {
			return false, err
		}
		return cc.Service.Namespace == ns && cc.Service.Name == installRelease+"-nereid-dijob-conversion" && len(cc.CABundle) > 0, nil
	})
	return gm, edgeAddr
}

// startReleaseLocalControllers runs a real LocalController for each of
// edgeNodes as its node's Pod of the release (onNode), trusting the CA the
// GlobalManager gm published in the ConfigMap the DaemonSet mounts.
func startReleaseLocalControllers(t *testing.T, ns string, gm *framework.Process, edgeAddr string, edgeNodes []string, onNode map[string]*corev1.Pod) map[string]*framework.LocalController {
	t.Helper()
	kube := framework.KubeClient(t)
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
	return lcs
}

// runFederatedExample runs the federated learning example in ns to
// Succeeded through the LocalControllers lcs, the test playing the
// kubelet.
func runFederatedExample(t *testing.T, ns string, lcs map[string]*framework.LocalController) {
	t.Helper()
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
		framework.EndPod(t, ns, p.Name, corev1.PodSucceeded)
	}
	waitForPhase(t, ns, flJob, sednav1.FLJobSucceeded)
}

// upgradeRollsPods runs helm upgrade with a changed value and waits until
// every Pod of the release (before, by component) is replaced by one with
// the new value.
func upgradeRollsPods(t *testing.T, ns string, before map[string][]*corev1.Pod) {
	t.Helper()
	// helm upgrade with a changed value rolls the Pods.
	if out, err := framework.Helm(t, "upgrade", installRelease, framework.ChartDir(), "--namespace", ns, "--reuse-values",
		"--set", "globalManager.logLevel=2", "--set", "localController.logLevel=2"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	for component, before := range before {
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
}

// uninstallLeavesNothing runs helm uninstall, then stops the processes that
// ran as the release's Pods (gm, lcs), and checks that nothing of Nereid
// stays in ns but the CRDs and the user's objects.
func uninstallLeavesNothing(t *testing.T, ns string, uninstalled func(), gm *framework.Process, lcs map[string]*framework.LocalController) {
	t.Helper()
	// helm uninstall, and the Pods' processes end: nothing of Nereid stays but
	// the CRDs and the user's objects. (Before, the check finds what it looks for.)
	if before, err := nereidLeftovers(t.Context(), t, ns); err != nil || len(before) < 12 {
		t.Fatalf("before the uninstall the check finds only %v (%v): it would not see leftovers", before, err)
	}
	if out, err := framework.Helm(t, "uninstall", installRelease, "--namespace", ns, "--wait", "--timeout=2m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	uninstalled()
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
	if _, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(t.Context(), flJob, metav1.GetOptions{}); err != nil {
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
	release := "app.kubernetes.io/instance=" + installRelease
	// The cluster-wide objects are named after the release namespace too
	// (the chart's nereid.clusterScopedName).
	clusterName := ns + "-" + installRelease + "-nereid-globalmanager"
	checks := []struct {
		gvr             schema.GroupVersionResource
		namespaced      bool
		selector, named string // what is looked for: by label, by name, or all
	}{
		{gvr: corev1.SchemeGroupVersion.WithResource("pods"), namespaced: true, selector: release},
		{gvr: corev1.SchemeGroupVersion.WithResource("services"), namespaced: true, selector: release},
		{gvr: corev1.SchemeGroupVersion.WithResource("serviceaccounts"), namespaced: true, selector: release},
		{gvr: appsv1.SchemeGroupVersion.WithResource("deployments"), namespaced: true, selector: release},
		{gvr: appsv1.SchemeGroupVersion.WithResource("daemonsets"), namespaced: true, selector: release},
		{gvr: policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), namespaced: true, selector: release},
		{gvr: rbacv1.SchemeGroupVersion.WithResource("roles"), namespaced: true, selector: release},
		{gvr: rbacv1.SchemeGroupVersion.WithResource("rolebindings"), namespaced: true, selector: release},
		{gvr: coordinationv1.SchemeGroupVersion.WithResource("leases"), namespaced: true},
		{gvr: corev1.SchemeGroupVersion.WithResource("secrets"), namespaced: true, named: edgehub.TLSSecretName},
		{gvr: corev1.SchemeGroupVersion.WithResource("secrets"), namespaced: true, named: installRelease + "-nereid-di-server-tls"},
		{gvr: corev1.SchemeGroupVersion.WithResource("secrets"), namespaced: true, named: installRelease + "-nereid-dijob-conversion-tls"},
		{gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), namespaced: true, named: edgehub.CAConfigMapName},
		{gvr: corev1.SchemeGroupVersion.WithResource("configmaps"), namespaced: true, selector: release}, // the Grafana dashboard
		{gvr: rbacv1.SchemeGroupVersion.WithResource("clusterroles"), named: clusterName},
		{gvr: rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"), named: clusterName},
		{gvr: admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies"), named: clusterName + "-owner-label"},
		{gvr: admissionregistrationv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings"), named: clusterName + "-owner-label"},
	}
	client := dynamicClient(t)
	var left []string
	for _, c := range checks {
		var res dynamic.ResourceInterface = client.Resource(c.gvr)
		if c.namespaced {
			res = client.Resource(c.gvr).Namespace(ns)
		}
		list, err := res.List(ctx, metav1.ListOptions{LabelSelector: c.selector})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", c.gvr.Resource, err)
		}
		for _, obj := range list.Items {
			if c.named == "" || obj.GetName() == c.named {
				left = append(left, c.gvr.Resource+"/"+obj.GetName())
			}
		}
	}
	slices.Sort(left)
	return left, nil
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
