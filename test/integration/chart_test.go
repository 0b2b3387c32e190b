package integration

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/test/framework"
)

// updateRBAC rewrites test/rbac/ from what the API server says instead of
// comparing with it: go test ./test/integration -run TestChartRBAC -update-rbac
var updateRBAC = flag.Bool("update-rbac", false, "rewrite test/rbac/*.txt from the API server's answers")

// nonDefaultValues is a release unlike the default one in every value that
// changes which objects or fields are rendered.
var nonDefaultValues = []string{
	"--set", "globalManager.replicas=3",
	"--set", "globalManager.edgeHub.service.type=NodePort",
	"--set", "globalManager.edgeHub.service.nodePort=31443",
	"--set", "globalManager.edgeHub.hostnames={hub.example.com,203.0.113.7}",
	"--set", "globalManager.podDisruptionBudget.maxUnavailable=2",
	"--set", "globalManager.image.registry=registry.example.com:5000",
	"--set", "globalManager.image.tag=dev-1",
	"--set", "localController.image.repository=team/localcontroller",
	"--set", "localController.gmAddress=203.0.113.7:31443",
	"--set", "localController.tolerations[0].operator=Exists",
	"--set", "localController.nodeRootReadOnly=true",
	"--set", "imagePullSecrets={regcred}",
}

// testChartObjectsAreValidForTheAPIServer sends every object the chart renders,
// with the default values and with others, and every object of the plain
// manifests build/deploy/nereid.yaml, to the API server as a server-side dry
// run: its validation and admission (schemas, Pod specs, RBAC rules) accept
// them all. The CRDs are applied first, for real, from the chart's crds/.
func testChartObjectsAreValidForTheAPIServer(t *testing.T) {
	crds := filepath.Join(framework.ChartDir(), "crds")
	if _, err := framework.Kubectl(t, "apply", "-f", crds); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "-f", crds); err != nil {
		t.Fatal(err)
	}

	ns := framework.Namespace(t)
	for name, args := range map[string][]string{"default values": nil, "other values": nonDefaultValues} {
		t.Run(name, func(t *testing.T) {
			dryRun(t, framework.RenderChart(t, ns, args...))
		})
	}
	t.Run("plain manifests", func(t *testing.T) {
		manifests := filepath.Join(framework.RepoRoot(), "build", "deploy", "nereid.yaml")
		// A dry run creates no namespace, so the objects in nereid-system need
		// it to exist already; it stays (the tests' GlobalManagers' identity
		// lives there).
		if err := framework.EnsureSystemNamespace(t); err != nil {
			t.Fatal(err)
		}
		dryRun(t, manifests)
	})
}

// dryRun applies the objects of path as a server-side dry run and fails unless
// the API server accepts every one.
func dryRun(t *testing.T, path string) {
	t.Helper()
	objs := framework.ReadManifests(t, path)
	out, err := framework.Kubectl(t, "apply", "--dry-run=server", "-f", path)
	if err != nil {
		t.Fatalf("the API server refuses objects of %s: %v", path, err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(objs) {
		t.Errorf("kubectl answered for %d objects of %d:\n%s", len(lines), len(objs), out)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, "(server dry run)") {
			t.Errorf("not a server dry run: %s", l)
		}
	}
}

// TestChartRBAC installs the chart's ServiceAccounts and RBAC objects on the
// API server and compares what `kubectl auth can-i --list` says each
// ServiceAccount may do in the release namespace with test/rbac/<name>.txt, so
// that a permission added to the chart shows in review. The LocalController
// may do nothing beyond what every ServiceAccount may: exactly what the
// namespace's default ServiceAccount, bound to nothing, may do.
func TestChartRBAC(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	// A release of its own name: the default release's ClusterRole is what
	// the tests' GlobalManagers run with.
	const release = "rbac-test"
	rendered := framework.ReadManifests(t, framework.RenderRelease(t, release, ns))
	var rbac []any
	var clusterRoles, clusterRoleBindings []string
	for _, obj := range rendered {
		switch obj.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding":
			rbac = append(rbac, obj.Object)
		}
		switch obj.GetKind() {
		case "ClusterRole":
			clusterRoles = append(clusterRoles, obj.GetName())
		case "ClusterRoleBinding":
			clusterRoleBindings = append(clusterRoleBindings, obj.GetName())
		}
	}
	if len(rbac) != 6 {
		t.Fatalf("the chart renders %d ServiceAccounts and RBAC objects, want 6 (2 ServiceAccounts, the GlobalManager's ClusterRole, Role and their bindings)", len(rbac))
	}
	path := filepath.Join(t.TempDir(), "rbac.yaml")
	writeList(t, path, rbac)
	if _, err := framework.Kubectl(t, "apply", "-f", path); err != nil {
		t.Fatal(err)
	}
	// The namespace takes its own objects; the cluster-wide ones go here.
	// t.Context() is canceled before cleanups run; the deletions must still go out.
	cleanupCtx := context.WithoutCancel(t.Context())
	rbacClient := framework.KubeClient(t).RbacV1()
	t.Cleanup(func() {
		for _, name := range clusterRoleBindings {
			if err := rbacClient.ClusterRoleBindings().Delete(cleanupCtx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting the ClusterRoleBinding %s: %v", name, err)
			}
		}
		for _, name := range clusterRoles {
			if err := rbacClient.ClusterRoles().Delete(cleanupCtx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting the ClusterRole %s: %v", name, err)
			}
		}
	})

	canI := func(sa string) string {
		t.Helper()
		out, err := framework.Kubectl(t, "auth", "can-i", "--list", "-n", ns, "--as=system:serviceaccount:"+ns+":"+sa)
		if err != nil {
			t.Fatal(err)
		}
		// The rules come in the order the authorizer met the bindings, which
		// is not stable: sort the verbs of each line, then the lines below the
		// header.
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		for i, l := range lines {
			if open := strings.LastIndex(l, "["); open >= 0 && strings.HasSuffix(l, "]") {
				verbs := strings.Fields(l[open+1 : len(l)-1])
				slices.Sort(verbs)
				lines[i] = l[:open+1] + strings.Join(verbs, " ") + "]"
			}
		}
		slices.Sort(lines[1:])
		return strings.Join(lines, "\n") + "\n"
	}
	for _, name := range []string{"nereid-globalmanager", "nereid-localcontroller"} {
		got := canI(release + "-" + name)
		golden := filepath.Join(framework.RepoRoot(), "test", "rbac", name+".txt")
		if *updateRBAC {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (write it with -update-rbac)", err)
		}
		if diff := cmp.Diff(string(want), got); diff != "" {
			t.Errorf("what %s may do differs from %s; if the change is meant, run go test ./test/integration -run TestChartRBAC -update-rbac and review the diff (-want,+got):\n%s", name, golden, diff)
		}
	}
	if diff := cmp.Diff(canI("default"), canI(release+"-nereid-localcontroller")); diff != "" {
		t.Errorf("the LocalController may do more than a ServiceAccount bound to nothing (-unbound,+localcontroller):\n%s", diff)
	}
}

// TestGlobalManagerPodMeetsTheRestrictedPodSecurityStandard creates a Pod from
// the GlobalManager Deployment's template, as a dry run, in a namespace whose
// Pod Security admission enforces the restricted standard: the API server
// accepts it.
func TestGlobalManagerPodMeetsTheRestrictedPodSecurityStandard(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	client := framework.KubeClient(t)
	nsObj, err := client.CoreV1().Namespaces().Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if _, err := client.CoreV1().Namespaces().Update(t.Context(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	var gm appsv1.Deployment
	var lc appsv1.DaemonSet
	for _, obj := range framework.ReadManifests(t, framework.RenderChart(t, ns)) {
		var into any
		switch obj.GetKind() {
		case "Deployment":
			into = &gm
		case "DaemonSet":
			into = &lc
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	if gm.Name == "" || lc.Name == "" {
		t.Fatal("no GlobalManager Deployment or LocalController DaemonSet in the chart")
	}
	// The ServiceAccount admission plugin wants the Pod's ServiceAccount to exist.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: gm.Spec.Template.Spec.ServiceAccountName}}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "globalmanager", Labels: gm.Spec.Template.Labels}, Spec: gm.Spec.Template.Spec}
	if _, err := client.CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("a GlobalManager Pod is refused where the restricted standard is enforced: %v", err)
	}
	// The check can fail: the LocalController's Pod (host network and paths,
	// root) is refused there.
	lcPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "localcontroller"}, Spec: lc.Spec.Template.Spec}
	lcPod.Spec.ServiceAccountName = sa.Name
	_, err = client.CoreV1().Pods(ns).Create(t.Context(), lcPod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a LocalController Pod where the restricted standard is enforced: %v; want it refused by PodSecurity", err)
	}
}

// writeList writes objects as a YAML List that kubectl reads.
func writeList(t *testing.T, path string, items []any) {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// monitoringCRDs are minimal CustomResourceDefinitions of the Prometheus
// Operator's ServiceMonitor and PrometheusRule: their kinds served, their
// contents not checked.
var monitoringCRDs = monitoringCRD("servicemonitors", "servicemonitor", "ServiceMonitor") + "---\n" +
	monitoringCRD("prometheusrules", "prometheusrule", "PrometheusRule")

// monitoringCRD is a minimal CustomResourceDefinition of a
// monitoring.coreos.com/v1 kind that keeps whatever it is given.
func monitoringCRD(plural, singular, kind string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {plural: %[1]s, singular: %[2]s, kind: %[3]s, listKind: %[3]sList}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, plural, singular, kind)
}

// testHelmInstallMakesMonitoringObjectsWhereTheirKindsAreServed installs
// the chart with helm where the API server serves the Prometheus Operator's
// ServiceMonitor and PrometheusRule: helm finds them in discovery, and the
// release has both, the ServiceMonitor selecting the release's metrics
// Service and no other. (build/charts checks that neither is rendered where
// they are not served.)
func testHelmInstallMakesMonitoringObjectsWhereTheirKindsAreServed(t *testing.T) {
	crds := filepath.Join(t.TempDir(), "monitoring-crds.yaml")
	if err := os.WriteFile(crds, []byte(monitoringCRDs), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Kubectl(t, "apply", "-f", crds); err != nil {
		t.Fatal(err)
	}
	// Later tests' releases need not make them.
	t.Cleanup(func() { _, _ = framework.Kubectl(t, "delete", "--ignore-not-found", "--wait=false", "-f", crds) })
	framework.Eventually(t, time.Minute, "discovery to serve ServiceMonitor and PrometheusRule", func(context.Context) (bool, error) {
		list, err := framework.KubeClient(t).Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		if err != nil {
			return false, nil // not yet
		}
		var kinds []string
		for _, r := range list.APIResources {
			kinds = append(kinds, r.Kind)
		}
		return slices.Contains(kinds, "ServiceMonitor") && slices.Contains(kinds, "PrometheusRule"), nil
	})

	ns := framework.Namespace(t)
	const release = "monitoring-test"
	// Its owner-label policy off: it would guard every namespace, the
	// other tests' too.
	if out, err := framework.Helm(t, "install", release, framework.ChartDir(), "--namespace", ns, "--skip-crds",
		"--set", "ownerLabelPolicy.enabled=false"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = framework.Helm(t, "uninstall", release, "--namespace", ns) })

	got, err := framework.Kubectl(t, "get", "servicemonitors,prometheusrules", "-n", ns,
		"-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	want := "ServiceMonitor/monitoring-test-nereid-globalmanager\nPrometheusRule/monitoring-test-nereid-globalmanager\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the release's ServiceMonitors and PrometheusRules (-want,+got):\n%s", diff)
	}
	selector, err := framework.Kubectl(t, "get", "servicemonitor", "monitoring-test-nereid-globalmanager", "-n", ns,
		"-o", `go-template={{range $k, $v := .spec.selector.matchLabels}}{{$k}}={{$v}},{{end}}`)
	if err != nil {
		t.Fatal(err)
	}
	selected, err := framework.Kubectl(t, "get", "services", "-n", ns, "-l", strings.TrimSuffix(selector, ","), "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("service/monitoring-test-nereid-globalmanager-metrics\n", selected); diff != "" {
		t.Errorf("Services the ServiceMonitor selects (-want,+got):\n%s", diff)
	}
}

// testPlainManifestsApplyAgainAfterTheGlobalManagerPointsTheDIJobCRD: the
// CRDs of the plain manifests build/deploy/nereid.yaml apply again, as
// docs/install.md says, after a GlobalManager pointed the DIJob CRD's
// conversion webhook at itself. At a loopback URL, as on the local run: the
// client-side apply puts the file's Service in the URL's place (the API
// server refuses a webhook with both), and the server-side apply names the
// GlobalManager's url as a conflict, which --force-conflicts takes over. At
// the manifests' Service, as in a cluster: both applies succeed and keep the
// CA the GlobalManager wrote.
func testPlainManifestsApplyAgainAfterTheGlobalManagerPointsTheDIJobCRD(t *testing.T) {
	ns := framework.Namespace(t)
	crds := plainManifestsCRDs(t)
	atTheManifestsService := func(cc webhookClientConfig) bool {
		return cc.URL == "" && cc.Service.Namespace == framework.SystemNamespace && cc.Service.Name == "nereid-dijob-conversion"
	}
	startAtURL := func() *framework.Process {
		gm := framework.StartGlobalManager(t, ns, "--edge-namespace", ns, framework.DIJobConversion)
		waitForTheConversionWebhook(t, ns)
		return gm
	}

	gm := startAtURL()
	if out, err := framework.Kubectl(t, "apply", "-f", crds); err != nil {
		t.Fatalf("client-side apply over the local run's URL: %v\n%s", err, out)
	}
	checkTheDIJobCRDPointing(t, ns, "at the manifests' Service after the client-side apply", atTheManifestsService)
	gm.Stop(t)

	gm = startAtURL()
	_, err := framework.Kubectl(t, "apply", "--server-side", "-f", crds)
	if err == nil || !strings.Contains(err.Error(), "conflict") || !strings.Contains(err.Error(), ".spec.conversion.webhook.clientConfig.url") {
		t.Errorf("server-side apply over the local run's URL: %v; want a conflict naming .spec.conversion.webhook.clientConfig.url", err)
	}
	if out, err := framework.Kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", crds); err != nil {
		t.Fatalf("server-side apply --force-conflicts over the local run's URL: %v\n%s", err, out)
	}
	checkTheDIJobCRDPointing(t, ns, "at the manifests' Service after the server-side apply", atTheManifestsService)
	gm.Stop(t)

	framework.StartGlobalManager(t, ns, "--edge-namespace", ns, "--dijob-conversion-address=127.0.0.1:0",
		"--dijob-conversion-service="+framework.SystemNamespace+"/nereid-dijob-conversion:443")
	waitForTheDIJobCRDPointing(t, ns, "at the manifests' Service", atTheManifestsService)
	for _, apply := range [][]string{{"apply"}, {"apply", "--server-side"}} {
		if out, err := framework.Kubectl(t, append(apply, "-f", crds)...); err != nil {
			t.Fatalf("kubectl %s over the GlobalManager's Service: %v\n%s", strings.Join(apply, " "), err, out)
		}
		checkTheDIJobCRDPointing(t, ns, "at the manifests' Service after kubectl "+strings.Join(apply, " "), atTheManifestsService)
	}
}

// plainManifestsCRDs writes the CustomResourceDefinitions of the plain
// manifests, as the file spells them, to a file of their own and returns
// its path: the test applies them alone, for the rest would act on the
// whole cluster.
func plainManifestsCRDs(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(framework.PlainManifests())
	if err != nil {
		t.Fatal(err)
	}
	var crds []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if strings.Contains(doc, "\nkind: CustomResourceDefinition\n") {
			crds = append(crds, doc)
		}
	}
	if len(crds) == 0 {
		t.Fatalf("no CustomResourceDefinition in %s", framework.PlainManifests())
	}
	path := filepath.Join(t.TempDir(), "crds.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(crds, "\n---\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
