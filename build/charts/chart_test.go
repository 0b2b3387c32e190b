// Package charts_test checks Nereid's Helm chart (build/charts/nereid) with the
// pinned helm, without a cluster: it lints, renders with the default values and
// with others, and refuses wrong values naming them. test/integration's
// chart_test.go validates the rendered objects against a real API server.
package charts_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/test/framework"
)

func TestChartLints(t *testing.T) {
	out, err := framework.Helm(t, "lint", "--strict", framework.ChartDir())
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// clusterScoped are the cluster-scoped kinds the chart may render: objects
// without a namespace, named with nereid.clusterScopedName (the CRDs aside).
var clusterScoped = map[string]bool{
	"CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true, "Namespace": true,
}

// release is a rendered chart, its objects by kind and name.
type release map[string]*unstructured.Unstructured

func render(t *testing.T, namespace string, args ...string) release {
	t.Helper()
	return renderRelease(t, "nereid", namespace, args...)
}

// renderRelease is render for a release of another name.
func renderRelease(t *testing.T, name, namespace string, args ...string) release {
	t.Helper()
	r := release{}
	for _, obj := range framework.ReadManifests(t, framework.RenderRelease(t, name, namespace, args...)) {
		key := obj.GetKind() + "/" + obj.GetName()
		if _, dup := r[key]; dup {
			t.Fatalf("two objects %s", key)
		}
		// di-server is where DI-engine looks: in DI-orchestrator's namespace.
		if !clusterScoped[obj.GetKind()] && obj.GetNamespace() != namespace && key != "Service/di-server" {
			t.Errorf("%s is in namespace %q, not the release's %q", key, obj.GetNamespace(), namespace)
		}
		r[key] = obj
	}
	return r
}

// get decodes the object kind/name into into.
func (r release) get(t *testing.T, kindName string, into any) {
	t.Helper()
	obj, ok := r[kindName]
	if !ok {
		t.Fatalf("no %s among %v", kindName, r.keys())
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		t.Fatalf("decoding %s: %v", kindName, err)
	}
}

func (r release) keys() []string {
	var keys []string
	for k := range r {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// flags returns a container's --name=value arguments by name.
func flags(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, a := range c.Args {
		name, value, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		m[name] = value
	}
	return m
}

func envFrom(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			m[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	return m
}

func TestChartDefaultsInstallAGlobalManagerAndEdgeLocalControllers(t *testing.T) {
	const ns = "nereid-system"
	r := render(t, ns)
	wantKeys := []string{
		"ClusterRole/nereid-system-nereid-globalmanager", "ClusterRoleBinding/nereid-system-nereid-globalmanager", "ConfigMap/nereid-dashboard",
		"CustomResourceDefinition/aggregatorconfigs.diengine.opendilab.org", "CustomResourceDefinition/datasets.sedna.io", "CustomResourceDefinition/dijobs.diengine.opendilab.org", "CustomResourceDefinition/federatedlearningjobs.sedna.io",
		"CustomResourceDefinition/incrementallearningjobs.sedna.io", "CustomResourceDefinition/jointinferenceservices.sedna.io",
		"CustomResourceDefinition/lifelonglearningjobs.sedna.io", "CustomResourceDefinition/models.sedna.io",
		"DaemonSet/nereid-localcontroller", "Deployment/nereid-globalmanager", "PodDisruptionBudget/nereid-globalmanager",
		"Role/nereid-globalmanager", "RoleBinding/nereid-globalmanager",
		"Service/nereid-di-server", "Service/nereid-di-v1-server", "Service/nereid-dijob-conversion", "Service/nereid-edgehub", "Service/nereid-globalmanager-metrics",
		"ServiceAccount/nereid-globalmanager", "ServiceAccount/nereid-localcontroller",
		"ValidatingAdmissionPolicy/nereid-system-nereid-globalmanager-owner-label",
		"ValidatingAdmissionPolicyBinding/nereid-system-nereid-globalmanager-owner-label",
	}
	if diff := cmp.Diff(wantKeys, r.keys()); diff != "" {
		t.Errorf("objects (-want,+got):\n%s", diff)
	}

	gm := checkDefaultGlobalManager(t, r, ns)
	checkDefaultGlobalManagerServices(t, r, gm)
	checkDefaultLocalController(t, r, flags(gm.Spec.Template.Spec.Containers[0])["edge-token-audience"])
	checkDefaultIdentities(t, r)
}

// checkDefaultGlobalManager checks the default GlobalManager Deployment of
// release namespace ns: two replicas, its flags, image, probes, resources
// and placement; it returns the Deployment.
func checkDefaultGlobalManager(t *testing.T, r release, ns string) *appsv1.Deployment {
	t.Helper()
	var gm appsv1.Deployment
	r.get(t, "Deployment/nereid-globalmanager", &gm)
	if gm.Spec.Replicas == nil || *gm.Spec.Replicas != 2 {
		t.Errorf("GlobalManager replicas %v, want 2", gm.Spec.Replicas)
	}
	pod := gm.Spec.Template.Spec
	c := pod.Containers[0]
	wantFlags := map[string]string{
		"leader-elect": "true", "leader-elect-namespace": ns, "leader-elect-name": "nereid-globalmanager",
		"health-address": "0.0.0.0:10350", "edge-address": "0.0.0.0:10351", "edge-namespace": ns,
		"edge-hostnames":              "nereid-edgehub,nereid-edgehub.nereid-system,nereid-edgehub.nereid-system.svc,nereid-edgehub.nereid-system.svc.cluster.local",
		"edge-token-audience":         "nereid-edgehub",
		"edge-service-accounts":       "nereid-system/nereid-localcontroller",
		"edge-daemonset":              "nereid-system/nereid-localcontroller",
		"edge-node-selector":          "node-role.kubernetes.io/edge",
		"lc-port":                     "9100",
		"owner-deployment":            "nereid-globalmanager",
		"v":                           "0",
		"allocator":                   "pack-and-spread",
		"allocator-period":            "1m",
		"edge-link-grace":             "10m",
		"di-server-address":           "0.0.0.0:8081",
		"di-server-url":               "https://nereid-di-server.nereid-system.svc:8081",
		"di-server-tls-secret":        "nereid-di-server-tls",
		"di-server-token-audiences":   "nereid-di-server",
		"di-v1-server-address":        "0.0.0.0:8080",
		"di-v1-server-url":            "nereid-di-v1-server.nereid-system:8080",
		"di-aggregator-config":        "di-system/aggregator-config",
		"dijob-conversion-address":    "0.0.0.0:9443",
		"dijob-conversion-service":    "nereid-system/nereid-dijob-conversion:443",
		"dijob-conversion-tls-secret": "nereid-dijob-conversion-tls",
		"gang-scheduler":              "auto",
		"quota-backfill-limit":        "3",
		"metrics-max-jobs":            "1000",
	}
	if diff := cmp.Diff(wantFlags, flags(c)); diff != "" {
		t.Errorf("GlobalManager flags (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}, envFrom(c)); diff != "" {
		t.Errorf("GlobalManager downward API env (-want,+got):\n%s", diff)
	}
	if c.Image != "ghcr.io/nereid-ml/nereid-globalmanager:"+appVersion(t) {
		t.Errorf("GlobalManager image %q, want the chart's appVersion as tag", c.Image)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "health" {
		t.Errorf("GlobalManager liveness probe %+v, want /healthz on the health port", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("GlobalManager readiness probe %+v, want /readyz (ok on a standby too)", p)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("GlobalManager resources %+v, want requests and limits", c.Resources)
	}
	checkRestricted(t, "GlobalManager", pod)
	if got := nodeAffinityExpressions(pod); !slices.Contains(got, "node-role.kubernetes.io/edge DoesNotExist") {
		t.Errorf("GlobalManager node affinity %v keeps it on edge nodes", got)
	}

	return &gm
}

// checkDefaultGlobalManagerServices checks what selects the GlobalManager's
// Pods of gm: its PodDisruptionBudget, the edge hub's Service (the serving
// replica alone) and the metrics Service.
func checkDefaultGlobalManagerServices(t *testing.T, r release, gm *appsv1.Deployment) {
	t.Helper()
	var pdb policyv1.PodDisruptionBudget
	r.get(t, "PodDisruptionBudget/nereid-globalmanager", &pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}
	if diff := cmp.Diff(gm.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("PodDisruptionBudget selects other Pods than the Deployment (-deployment,+pdb):\n%s", diff)
	}

	var hub corev1.Service
	r.get(t, "Service/nereid-edgehub", &hub)
	wantSelector := map[string]string{"nereid.io/edgehub": "serving"}
	for k, v := range gm.Spec.Selector.MatchLabels {
		wantSelector[k] = v
	}
	if diff := cmp.Diff(wantSelector, hub.Spec.Selector); diff != "" {
		t.Errorf("edge hub Service selector (-want,+got):\n%s", diff)
	}
	if hub.Spec.Type != corev1.ServiceTypeClusterIP || hub.Spec.Ports[0].Port != 10351 || hub.Spec.Ports[0].NodePort != 0 {
		t.Errorf("edge hub Service %s port %+v, want ClusterIP on 10351", hub.Spec.Type, hub.Spec.Ports[0])
	}
	// The conversion webhook, like the hub, is served by the leader alone.
	var conversion corev1.Service
	r.get(t, "Service/nereid-dijob-conversion", &conversion)
	if diff := cmp.Diff(wantSelector, conversion.Spec.Selector); diff != "" {
		t.Errorf("DIJob conversion Service selector (-want,+got):\n%s", diff)
	}
	if conversion.Spec.Type != corev1.ServiceTypeClusterIP || conversion.Spec.Ports[0].Port != 443 || conversion.Spec.Ports[0].TargetPort.String() != "dijob-convert" {
		t.Errorf("DIJob conversion Service %s port %+v, want ClusterIP 443 to the container's dijob-convert", conversion.Spec.Type, conversion.Spec.Ports[0])
	}
	var metrics corev1.Service
	r.get(t, "Service/nereid-globalmanager-metrics", &metrics)
	if diff := cmp.Diff(gm.Spec.Selector.MatchLabels, metrics.Spec.Selector); diff != "" || metrics.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("metrics Service %s selects (-deployment,+service):\n%s", metrics.Spec.Type, diff)
	}
}

// checkDefaultLocalController checks the default LocalController DaemonSet:
// on edge nodes, host network, no API token, its flags, its projected token
// of the hub's audience hubAudience, its CA, store and node paths.
func checkDefaultLocalController(t *testing.T, r release, hubAudience string) {
	t.Helper()
	var lc appsv1.DaemonSet
	r.get(t, "DaemonSet/nereid-localcontroller", &lc)
	lp := lc.Spec.Template.Spec
	lcc := lp.Containers[0]
	if !lp.HostNetwork || lp.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("LocalController hostNetwork %v dnsPolicy %s, want true and ClusterFirstWithHostNet", lp.HostNetwork, lp.DNSPolicy)
	}
	if lp.AutomountServiceAccountToken == nil || *lp.AutomountServiceAccountToken || lp.ServiceAccountName != "nereid-localcontroller" {
		t.Errorf("LocalController Pod automounts an API token (%v) or runs as %q", lp.AutomountServiceAccountToken, lp.ServiceAccountName)
	}
	if diff := cmp.Diff(map[string]string{"node-role.kubernetes.io/edge": ""}, lp.NodeSelector); diff != "" {
		t.Errorf("LocalController nodeSelector (-want,+got):\n%s", diff)
	}
	if !slices.ContainsFunc(lp.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == "node-role.kubernetes.io/edge" && tol.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("LocalController tolerations %+v do not tolerate the edge taint", lp.Tolerations)
	}
	wantLCFlags := map[string]string{
		"node-name": "$(NODE_NAME)", "gm-address": "nereid-edgehub.nereid-system.svc:10351",
		"ca-file": "/etc/nereid/edgehub-ca/ca.crt", "token-file": "/var/run/secrets/nereid.io/edgehub/token",
		"data-dir": "/var/lib/nereid", "node-root": "/host", "worker-address": "$(HOST_IP):9100",
		"health-address": "127.0.0.1:9101", "v": "0", "allowed-paths": "/data,/model,/models,/output",
	}
	if diff := cmp.Diff(wantLCFlags, flags(lcc)); diff != "" {
		t.Errorf("LocalController flags (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"NODE_NAME": "spec.nodeName", "HOST_IP": "status.hostIP"}, envFrom(lcc)); diff != "" {
		t.Errorf("LocalController downward API env (-want,+got):\n%s", diff)
	}
	if lcc.Image != "ghcr.io/nereid-ml/nereid-localcontroller:"+appVersion(t) {
		t.Errorf("LocalController image %q, want the chart's appVersion as tag", lcc.Image)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range lcc.VolumeMounts {
		mounts[m.Name] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range lp.Volumes {
		volumes[v.Name] = v
	}
	tok := volumes[mounts["edgehub-token"].Name]
	if m := mounts["edgehub-token"]; m.MountPath != "/var/run/secrets/nereid.io/edgehub" || tok.Projected == nil ||
		tok.Projected.Sources[0].ServiceAccountToken == nil || tok.Projected.Sources[0].ServiceAccountToken.Path != "token" {
		t.Fatalf("LocalController token mount %+v volume %+v, want a projected token at /var/run/secrets/nereid.io/edgehub/token", m, tok)
	}
	if aud := tok.Projected.Sources[0].ServiceAccountToken.Audience; aud != hubAudience {
		t.Errorf("LocalController token audience %q, the hub's --edge-token-audience %q", aud, hubAudience)
	}
	if ca := volumes["edgehub-ca"]; ca.ConfigMap == nil || ca.ConfigMap.Name != "nereid-edgehub-ca" || mounts["edgehub-ca"].MountPath+"/ca.crt" != wantLCFlags["ca-file"] {
		t.Errorf("LocalController CA volume %+v mounted at %q, want ConfigMap nereid-edgehub-ca holding --ca-file", ca, mounts["edgehub-ca"].MountPath)
	}
	if d := volumes["data"]; d.HostPath == nil || d.HostPath.Path != "/var/lib/nereid" || mounts["data"].MountPath != wantLCFlags["data-dir"] {
		t.Errorf("LocalController store volume %+v, want hostPath /var/lib/nereid at --data-dir", d)
	}
	// Only the allowed paths of the node are mounted, each at its place
	// under --node-root; not the node's whole /.
	if _, ok := volumes["node-root"]; ok {
		t.Errorf("the node's whole / is mounted into the LocalController, with allowedPaths set")
	}
	for i, p := range strings.Split(wantLCFlags["allowed-paths"], ",") {
		name := fmt.Sprintf("node-path-%d", i)
		if v := volumes[name]; v.HostPath == nil || v.HostPath.Path != p || mounts[name].MountPath != wantLCFlags["node-root"]+p {
			t.Errorf("LocalController volume %s %+v mounted at %q, want hostPath %s at %s%s", name, v, mounts[name].MountPath, p, wantLCFlags["node-root"], p)
		}
	}
	// Sedna's model hot update folders, which the LocalController writes
	// deployed models into, whatever the allowed paths (found on real
	// nodes: without it an incremental learning job never deploys).
	if v := volumes["model-hot-update"]; v.HostPath == nil || v.HostPath.Path != "/var/lib/sedna/model-hot-update" ||
		mounts["model-hot-update"].MountPath != wantLCFlags["node-root"]+"/var/lib/sedna/model-hot-update" || mounts["model-hot-update"].ReadOnly {
		t.Errorf("LocalController hot update volume %+v mounted %+v, want hostPath /var/lib/sedna/model-hot-update at its place under --node-root, writable", v, mounts["model-hot-update"])
	}
	if p := lcc.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "127.0.0.1" || p.HTTPGet.Port.IntValue() != 9101 {
		t.Errorf("LocalController liveness probe %+v, want /healthz on 127.0.0.1:9101", p)
	}
}

// checkDefaultIdentities checks the ServiceAccounts and bindings: the
// LocalController's mounts no API token, and every binding grants the
// GlobalManager's ServiceAccount alone.
func checkDefaultIdentities(t *testing.T, r release) {
	t.Helper()
	var lcSA corev1.ServiceAccount
	r.get(t, "ServiceAccount/nereid-localcontroller", &lcSA)
	if lcSA.AutomountServiceAccountToken == nil || *lcSA.AutomountServiceAccountToken {
		t.Errorf("LocalController ServiceAccount automountServiceAccountToken %v, want false", lcSA.AutomountServiceAccountToken)
	}
	for key, obj := range r {
		if obj.GetKind() != "RoleBinding" && obj.GetKind() != "ClusterRoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding // a ClusterRoleBinding decodes alike
		r.get(t, key, &b)
		for _, s := range b.Subjects {
			if s.Name != "nereid-globalmanager" {
				t.Errorf("%s grants %s %s, want only the GlobalManager's ServiceAccount", key, s.Kind, s.Name)
			}
		}
	}
}

// TestChartReleasesOfOneNameInTwoNamespacesKeepTheirOwnClusterObjects: the
// cluster-scoped objects of release "nereid" in team-a and of release
// "nereid" in team-b have different names, each starting with its release's
// namespace, so that installing the second neither fails nor takes over the
// first's; each ClusterRoleBinding binds its own release's ClusterRole to its
// own namespace's ServiceAccount, and each admission policy binding its own
// release's policy. The CRDs alone are shared: they define the API, one per
// cluster.
func TestChartReleasesOfOneNameInTwoNamespacesKeepTheirOwnClusterObjects(t *testing.T) {
	renderedBy := map[string]string{} // a cluster-scoped kind/name: the namespace of the release that renders it
	for _, ns := range []string{"team-a", "team-b"} {
		// DI-engine looks for one di-server in a cluster: one release makes it.
		var args []string
		if ns == "team-b" {
			args = []string{"--set", "globalManager.dijob.v1Server.diServer.enabled=false"}
		}
		r := render(t, ns, args...)
		for _, want := range []string{"ClusterRole/" + ns + "-nereid-globalmanager", "ClusterRoleBinding/" + ns + "-nereid-globalmanager"} {
			if _, ok := r[want]; !ok {
				t.Errorf("the release in %s renders no %s", ns, want)
			}
		}
		for key, obj := range r {
			if !clusterScoped[obj.GetKind()] || obj.GetKind() == "CustomResourceDefinition" {
				continue
			}
			if other, dup := renderedBy[key]; dup {
				t.Errorf("the releases in %s and %s both render %s", other, ns, key)
			}
			renderedBy[key] = ns
			if !strings.HasPrefix(obj.GetName(), ns+"-") && obj.GetKind() != "Namespace" {
				t.Errorf("%s of the release in %s is not named after its namespace", key, ns)
			}
			switch obj.GetKind() {
			case "ClusterRoleBinding":
				var b rbacv1.ClusterRoleBinding
				r.get(t, key, &b)
				want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "nereid-globalmanager", Namespace: ns}}
				if diff := cmp.Diff(want, b.Subjects); diff != "" {
					t.Errorf("%s of the release in %s binds (-want,+got):\n%s", key, ns, diff)
				}
				if _, ok := r["ClusterRole/"+b.RoleRef.Name]; !ok || b.RoleRef.Kind != "ClusterRole" {
					t.Errorf("%s of the release in %s binds %s %s, not its release's ClusterRole", key, ns, b.RoleRef.Kind, b.RoleRef.Name)
				}
			case "ValidatingAdmissionPolicyBinding":
				policy, _, _ := unstructured.NestedString(obj.Object, "spec", "policyName")
				if _, ok := r["ValidatingAdmissionPolicy/"+policy]; !ok {
					t.Errorf("%s of the release in %s binds policy %q, not its release's", key, ns, policy)
				}
			}
		}
	}
}

// TestChartClusterObjectNamesAreValidWithTheLongestNames: the longest
// namespace (63 characters) and release name (53, Helm's limit) still give
// cluster-scoped names the API server takes (DNS subdomains).
func TestChartClusterObjectNamesAreValidWithTheLongestNames(t *testing.T) {
	ns := strings.Repeat("n", 63)
	var seen int
	for key, obj := range renderRelease(t, strings.Repeat("r", 53), ns) {
		// di-system is DI-orchestrator's name, which DI-engine looks in.
		if !clusterScoped[obj.GetKind()] || obj.GetKind() == "CustomResourceDefinition" || key == "Namespace/di-system" {
			continue
		}
		seen++
		if errs := validation.IsDNS1123Subdomain(obj.GetName()); len(errs) > 0 {
			t.Errorf("%s: %v", key, errs)
		}
		if !strings.HasPrefix(obj.GetName(), ns+"-") {
			t.Errorf("%s is not named after the release namespace %s", key, ns)
		}
	}
	if seen == 0 {
		t.Fatal("no cluster-scoped object rendered: nothing checked")
	}
}

// checkRestricted fails unless the Pod meets the restricted Pod Security
// Standard at Pod and container level.
func checkRestricted(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s Pod securityContext %+v, want runAsNonRoot and seccomp RuntimeDefault", what, psc)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s container %s securityContext %+v is not restricted", what, c.Name, sc)
		}
	}
}

func nodeAffinityExpressions(pod corev1.PodSpec) []string {
	var out []string
	if pod.Affinity == nil || pod.Affinity.NodeAffinity == nil || pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	for _, term := range pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			out = append(out, e.Key+" "+string(e.Operator))
		}
	}
	return out
}

func appVersion(t *testing.T) string {
	t.Helper()
	out, err := framework.Helm(t, "show", "chart", framework.ChartDir())
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(out), &c); err != nil || c.AppVersion == "" {
		t.Fatalf("reading appVersion from helm show chart: %v\n%s", err, out)
	}
	return c.AppVersion
}

// TestChartWithoutTheReplicasAPI: dijob.server.enabled=false serves no API:
// no flag, no port, no Service.
func TestChartWithoutTheReplicasAPI(t *testing.T) {
	r := render(t, "nereid-system", "--set", "globalManager.dijob.server.enabled=false", "--set", "globalManager.dijob.allocator=none")
	if _, ok := r["Service/nereid-di-server"]; ok {
		t.Error("the replicas API's Service is rendered with the API off")
	}
	var gm appsv1.Deployment
	r.get(t, "Deployment/nereid-globalmanager", &gm)
	f := flags(gm.Spec.Template.Spec.Containers[0])
	if _, ok := f["di-server-address"]; ok || f["allocator"] != "none" {
		t.Errorf("flags with the API off and no allocator: %v", f)
	}
}

func TestChartValuesReachTheObjects(t *testing.T) {
	const ns = "ml-edge"
	r := render(t, ns,
		"--set", "globalManager.replicas=3",
		"--set", "globalManager.edgeHub.service.type=NodePort",
		"--set", "globalManager.edgeHub.service.nodePort=31443",
		"--set", "globalManager.edgeHub.hostnames={hub.example.com,203.0.113.7}",
		"--set", "globalManager.edgeHub.tokenAudience=my-hub",
		"--set", "globalManager.image.registry=registry.example.com:5000",
		"--set", "globalManager.image.tag=dev-1",
		"--set", "globalManager.gangScheduler=volcano",
		"--set", "localController.image.repository=team/lc",
		"--set", "localController.gmAddress=203.0.113.7:31443",
		"--set", "localController.workerPort=9200",
		"--set", "localController.tolerations[0].operator=Exists",
		"--set", "localController.nodeSelector.kubeedge=yes",
	)
	var gm appsv1.Deployment
	r.get(t, "Deployment/nereid-globalmanager", &gm)
	c := gm.Spec.Template.Spec.Containers[0]
	if *gm.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *gm.Spec.Replicas)
	}
	if c.Image != "registry.example.com:5000/nereid-ml/nereid-globalmanager:dev-1" {
		t.Errorf("GlobalManager image %q", c.Image)
	}
	f := flags(c)
	want := map[string]string{
		"edge-namespace": ns, "leader-elect-namespace": ns, "edge-service-accounts": ns + "/nereid-localcontroller",
		"edge-daemonset":      ns + "/nereid-localcontroller",
		"edge-hostnames":      "nereid-edgehub,nereid-edgehub.ml-edge,nereid-edgehub.ml-edge.svc,nereid-edgehub.ml-edge.svc.cluster.local,hub.example.com,203.0.113.7",
		"edge-token-audience": "my-hub", "lc-port": "9200", "gang-scheduler": "volcano",
		// The hub accepts the nodes the LocalControllers run on.
		"edge-node-selector": "kubeedge=yes,node-role.kubernetes.io/edge",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("GlobalManager --%s=%q, want %q", k, f[k], v)
		}
	}
	var hub corev1.Service
	r.get(t, "Service/nereid-edgehub", &hub)
	if hub.Spec.Type != corev1.ServiceTypeNodePort || hub.Spec.Ports[0].NodePort != 31443 {
		t.Errorf("edge hub Service %s nodePort %d, want NodePort 31443", hub.Spec.Type, hub.Spec.Ports[0].NodePort)
	}
	var lc appsv1.DaemonSet
	r.get(t, "DaemonSet/nereid-localcontroller", &lc)
	lp := lc.Spec.Template.Spec
	lf := flags(lp.Containers[0])
	if lf["gm-address"] != "203.0.113.7:31443" || lf["worker-address"] != "$(HOST_IP):9200" {
		t.Errorf("LocalController --gm-address=%s --worker-address=%s", lf["gm-address"], lf["worker-address"])
	}
	if img := lp.Containers[0].Image; img != "ghcr.io/team/lc:"+appVersion(t) {
		t.Errorf("LocalController image %q", img)
	}
	// A list given replaces the default one: this one tolerates every taint.
	if diff := cmp.Diff([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}, lp.Tolerations); diff != "" {
		t.Errorf("LocalController tolerations (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"node-role.kubernetes.io/edge": "", "kubeedge": "yes"}, lp.NodeSelector); diff != "" {
		t.Errorf("LocalController nodeSelector (-want,+got):\n%s", diff)
	}
	if aud := lp.Volumes[0].Projected.Sources[0].ServiceAccountToken.Audience; aud != "my-hub" {
		t.Errorf("LocalController token audience %q, want the hub's my-hub", aud)
	}
}

// TestChartCanRunALocalControllerOnEveryNode is Sedna's placement: no
// nodeSelector, every taint tolerated, and a hub that accepts every node.
func TestChartCanRunALocalControllerOnEveryNode(t *testing.T) {
	r := render(t, "nereid-system", "--set", "localController.everyNode=true")
	var lc appsv1.DaemonSet
	r.get(t, "DaemonSet/nereid-localcontroller", &lc)
	lp := lc.Spec.Template.Spec
	if len(lp.NodeSelector) != 0 {
		t.Errorf("LocalController nodeSelector %v, want none", lp.NodeSelector)
	}
	if diff := cmp.Diff([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}, lp.Tolerations); diff != "" {
		t.Errorf("LocalController tolerations (-want,+got):\n%s", diff)
	}
	var gm appsv1.Deployment
	r.get(t, "Deployment/nereid-globalmanager", &gm)
	if f, ok := flags(gm.Spec.Template.Spec.Containers[0])["edge-node-selector"]; !ok || f != "" {
		t.Errorf("GlobalManager --edge-node-selector=%q (set: %v), want it empty: every node", f, ok)
	}
	// An explicit rule wins.
	r = render(t, "nereid-system", "--set", "localController.everyNode=true", "--set", "globalManager.edgeHub.edgeNodeSelector=zone=a")
	r.get(t, "Deployment/nereid-globalmanager", &gm)
	if f := flags(gm.Spec.Template.Spec.Containers[0])["edge-node-selector"]; f != "zone=a" {
		t.Errorf("GlobalManager --edge-node-selector=%q, want the value given, zone=a", f)
	}
}

func TestChartRefusesWrongValuesNamingThem(t *testing.T) {
	for name, tc := range map[string]struct {
		set      string
		wantName string // what helm must say: the key at fault
	}{
		"service type not a type":        {set: "globalManager.edgeHub.service.type=External", wantName: "at '/globalManager/edgeHub/service/type'"},
		"no replicas":                    {set: "globalManager.replicas=0", wantName: "at '/globalManager/replicas'"},
		"allocator not a policy":         {set: "globalManager.dijob.allocator=random", wantName: "at '/globalManager/dijob/allocator'"},
		"grace not a duration":           {set: "globalManager.dijob.edgeLinkGrace=ten minutes", wantName: "at '/globalManager/dijob/edgeLinkGrace'"},
		"replicas not a number":          {set: "globalManager.replicas=two", wantName: "at '/globalManager/replicas'"},
		"misspelt key":                   {set: "globalManager.replica=3", wantName: "at '/globalManager': additional properties 'replica' not allowed"},
		"nodePort out of range":          {set: "globalManager.edgeHub.service.nodePort=80", wantName: "at '/globalManager/edgeHub/service/nodePort'"},
		"pull policy not a policy":       {set: "localController.image.pullPolicy=Sometimes", wantName: "at '/localController/image/pullPolicy'"},
		"worker port not a port":         {set: "localController.workerPort=70000", wantName: "at '/localController/workerPort'"},
		"gm address without a port":      {set: "localController.gmAddress=hub.example.com", wantName: "at '/localController/gmAddress'"},
		"extra argument not a flag":      {set: "globalManager.extraArgs={verbose}", wantName: "at '/globalManager/extraArgs/0'"},
		"data dir not absolute":          {set: "localController.dataDir=var/lib/nereid", wantName: "at '/localController/dataDir'"},
		"unknown top-level key":          {set: "globalmanager.replicas=3", wantName: "additional properties 'globalmanager' not allowed"},
		"empty token audience":           {set: "globalManager.edgeHub.tokenAudience=", wantName: "at '/globalManager/edgeHub/tokenAudience'"},
		"hostname holding two names":     {set: "globalManager.edgeHub.hostnames={a.example.com\\,b.example.com}", wantName: "at '/globalManager/edgeHub/hostnames/0'"},
		"node root read-only as text":    {set: "localController.nodeRootReadOnly=maybe", wantName: "at '/localController/nodeRootReadOnly'"},
		"gang scheduler not a mode":      {set: "globalManager.gangScheduler=yunikorn", wantName: "at '/globalManager/gangScheduler'"},
		"disruption budget of nothing":   {set: "globalManager.podDisruptionBudget.maxUnavailable=0", wantName: "at '/globalManager/podDisruptionBudget/maxUnavailable'"},
		"no job's gauges":                {set: "globalManager.metricsMaxJobs=0", wantName: "at '/globalManager/metricsMaxJobs'"},
		"scrape interval not a duration": {set: "metrics.serviceMonitor.interval=often", wantName: "at '/metrics/serviceMonitor/interval'"},
		"fill ratio above 1":             {set: "metrics.prometheusRule.outboxFillRatio=80", wantName: "at '/metrics/prometheusRule/outboxFillRatio'"},
		"link down for no minutes":       {set: "metrics.prometheusRule.edgeLinkDownMinutes=0", wantName: "at '/metrics/prometheusRule/edgeLinkDownMinutes'"},
		"dashboard label not a key":      {set: "metrics.grafanaDashboard.labelKey=grafana dashboard", wantName: "at '/metrics/grafanaDashboard/labelKey'"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := framework.Helm(t, "template", "nereid", framework.ChartDir(), "--set", tc.set)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded; want it refused", tc.set)
			}
			// What helm said, without the command line that the error repeats.
			_, said, _ := strings.Cut(err.Error(), "stderr:\n")
			if !strings.Contains(said, "values don't meet the specifications of the schema") || !strings.Contains(said, tc.wantName) {
				t.Errorf("helm template --set %s: want the schema's refusal saying %q; helm said:\n%s", tc.set, tc.wantName, said)
			}
		})
	}
}

// A value is a value: a string with a newline and YAML after it stays one
// scalar of the object, never more fields of it.
func TestChartValuesCannotAddFields(t *testing.T) {
	const injected = "x\n      hostPID: true"
	r := render(t, "nereid-system",
		"--set", "globalManager.priorityClassName="+injected,
		"--set", "localController.priorityClassName="+injected,
		"--set", "localController.dataDir=/var/lib/nereid\n          - name: sock",
	)
	var gm appsv1.Deployment
	r.get(t, "Deployment/nereid-globalmanager", &gm)
	if gm.Spec.Template.Spec.HostPID || gm.Spec.Template.Spec.PriorityClassName != injected {
		t.Errorf("GlobalManager hostPID %t, priorityClassName %q: a value added a field", gm.Spec.Template.Spec.HostPID, gm.Spec.Template.Spec.PriorityClassName)
	}
	var lc appsv1.DaemonSet
	r.get(t, "DaemonSet/nereid-localcontroller", &lc)
	if lc.Spec.Template.Spec.HostPID || len(lc.Spec.Template.Spec.Volumes) != 8 {
		t.Errorf("LocalController hostPID %t, %d volumes: a value added a field", lc.Spec.Template.Spec.HostPID, len(lc.Spec.Template.Spec.Volumes))
	}
}

// TestChartReplicasAPIOverPlainHTTP: dijob.server.tls=false serves plain
// HTTP: the URL says http, no certificate Secret is named or granted.
func TestChartReplicasAPIOverPlainHTTP(t *testing.T) {
	r := render(t, "nereid-system", "--set", "globalManager.dijob.server.tls=false")
	var gm appsv1.Deployment
	r.get(t, "Deployment/nereid-globalmanager", &gm)
	f := flags(gm.Spec.Template.Spec.Containers[0])
	if _, ok := f["di-server-tls-secret"]; ok || f["di-server-url"] != "http://nereid-di-server.nereid-system.svc:8081" {
		t.Errorf("flags with tls off: %v", f)
	}
	var role rbacv1.Role
	r.get(t, "Role/nereid-globalmanager", &role)
	for _, rule := range role.Rules {
		if slices.Contains(rule.ResourceNames, "nereid-di-server-tls") {
			t.Errorf("the Role grants the replicas API's Secret with tls off: %+v", rule)
		}
	}
}

// TestChartOwnerLabelPolicy: the policy leaves out the requests of the
// release's own GlobalManager (and of the extra writers), and
// ownerLabelPolicy.enabled=false renders none.
func TestChartOwnerLabelPolicy(t *testing.T) {
	r := render(t, "ml-edge")
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	r.get(t, "ValidatingAdmissionPolicy/ml-edge-nereid-globalmanager-owner-label", &vap)
	writers := func() string {
		i := slices.IndexFunc(vap.Spec.MatchConditions, func(c admissionregistrationv1.MatchCondition) bool { return c.Name == "not-global-manager" })
		if i < 0 {
			t.Fatalf("the policy has no matchCondition not-global-manager: %+v", vap.Spec.MatchConditions)
		}
		return vap.Spec.MatchConditions[i].Expression
	}
	if got, want := writers(), `!(request.userInfo.username in ["system:serviceaccount:ml-edge:nereid-globalmanager"])`; got != want {
		t.Errorf("the policy's GlobalManager is %s, want %s", got, want)
	}
	if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", vap.Spec.FailurePolicy)
	}
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	r.get(t, "ValidatingAdmissionPolicyBinding/ml-edge-nereid-globalmanager-owner-label", &binding)
	if binding.Spec.PolicyName != vap.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v, want Deny on %s", binding.Spec, vap.Name)
	}
	// Another release's GlobalManager, and the namespaces guarded.
	two := render(t, "ml-edge", "--set-json", `ownerLabelPolicy.extraWriters=["system:serviceaccount:other:nereid-globalmanager"]`,
		"--set-json", `ownerLabelPolicy.namespaceSelector={"matchLabels":{"team":"ml"}}`)
	two.get(t, "ValidatingAdmissionPolicy/ml-edge-nereid-globalmanager-owner-label", &vap)
	if want := `["system:serviceaccount:ml-edge:nereid-globalmanager","system:serviceaccount:other:nereid-globalmanager"]`; !strings.Contains(writers(), want) {
		t.Errorf("with extraWriters the policy allows %s, want %s", writers(), want)
	}
	two.get(t, "ValidatingAdmissionPolicyBinding/ml-edge-nereid-globalmanager-owner-label", &binding)
	if ms := binding.Spec.MatchResources; ms == nil || ms.NamespaceSelector == nil || ms.NamespaceSelector.MatchLabels["team"] != "ml" {
		t.Errorf("the binding's matchResources %+v, want the namespaceSelector team=ml", ms)
	}
	off := render(t, "ml-edge", "--set", "ownerLabelPolicy.enabled=false")
	for key := range off {
		if strings.HasPrefix(key, "ValidatingAdmissionPolicy") {
			t.Errorf("%s rendered with the policy off", key)
		}
	}
}

// TestChartV1Server: dijob.v1Server.enabled, the default, serves the v1
// replicas server (flags, port, Service) and grants it the
// AggregatorConfigs' cache; off, none of it, the grant included.
func TestChartV1Server(t *testing.T) {
	grantsAggregatorConfigs := func(r release) bool {
		var role rbacv1.ClusterRole
		r.get(t, "ClusterRole/ml-nereid-globalmanager", &role)
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "aggregatorconfigs") {
				if !slices.Equal(rule.Verbs, []string{"list", "watch"}) {
					t.Errorf("the AggregatorConfigs rule grants %v, want list and watch", rule.Verbs)
				}
				return true
			}
		}
		return false
	}

	off := render(t, "ml", "--set", "globalManager.dijob.v1Server.enabled=false")
	var gm appsv1.Deployment
	off.get(t, "Deployment/nereid-globalmanager", &gm)
	if _, ok := flags(gm.Spec.Template.Spec.Containers[0])["di-v1-server-address"]; ok {
		t.Error("--di-v1-server-address with dijob.v1Server.enabled=false")
	}
	if _, ok := off["Service/nereid-di-v1-server"]; ok || grantsAggregatorConfigs(off) {
		t.Error("the v1 server's Service or its grant rendered with the server off")
	}

	on := render(t, "ml", "--set", "globalManager.dijob.v1Server.port=8090",
		"--set", "globalManager.dijob.v1Server.aggregatorConfig=ml/agconfig",
		"--set", "globalManager.dijob.v1Server.diServer.enabled=false") // DI-engine's di-server is at 8080
	on.get(t, "Deployment/nereid-globalmanager", &gm)
	c := gm.Spec.Template.Spec.Containers[0]
	want := map[string]string{"di-v1-server-address": "0.0.0.0:8090", "di-v1-server-url": "nereid-di-v1-server.ml:8090", "di-aggregator-config": "ml/agconfig"}
	f := flags(c)
	for k, v := range want {
		if f[k] != v {
			t.Errorf("--%s=%q, want %q", k, f[k], v)
		}
	}
	if !slices.Contains(c.Ports, corev1.ContainerPort{Name: "di-v1-server", ContainerPort: 8090, Protocol: corev1.ProtocolTCP}) {
		t.Errorf("container ports %v lack di-v1-server 8090", c.Ports)
	}
	var svc corev1.Service
	on.get(t, "Service/nereid-di-v1-server", &svc)
	if p := svc.Spec.Ports[0]; p.Port != 8090 || p.TargetPort.StrVal != "di-v1-server" || svc.Spec.Selector["nereid.io/edgehub"] != "serving" {
		t.Errorf("the v1 server's Service: %+v, want port 8090 to the leader's di-v1-server", svc.Spec)
	}
	if !grantsAggregatorConfigs(on) {
		t.Error("the v1 server on, and no grant of the AggregatorConfigs it caches")
	}
}

// DI-engine prefers its config's system_addr, di-server.di-system:8080 in
// every DI-orchestrator v0.2 sample, over KUBERNETES_SERVER_URL: the chart
// makes that name, an ExternalName of the v1 server's Service, where the
// namespace is (a rendering reads no cluster: with createNamespace), and
// with createNamespace the namespace, which helm uninstall keeps.
func TestChartServesTheV1ServerWhereDIEngineLooks(t *testing.T) {
	if _, ok := render(t, "ml")["Service/di-server"]; ok {
		t.Error("di-server rendered without its namespace: a rendering cannot know it exists")
	}
	r := render(t, "ml", "--set", "globalManager.dijob.v1Server.diServer.createNamespace=true")
	var svc corev1.Service
	r.get(t, "Service/di-server", &svc)
	if svc.Namespace != "di-system" || svc.Spec.Type != corev1.ServiceTypeExternalName ||
		svc.Spec.ExternalName != "nereid-di-v1-server.ml.svc.cluster.local" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("di-server: %s/%s %+v, want an ExternalName in di-system of nereid-di-v1-server.ml.svc.cluster.local at 8080",
			svc.Namespace, svc.Name, svc.Spec)
	}
	var ns corev1.Namespace
	r.get(t, "Namespace/di-system", &ns)
	if ns.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("namespace di-system annotations %v: helm uninstall would delete it and all it holds", ns.Annotations)
	}

	own := render(t, "ml", "--set", "globalManager.dijob.v1Server.diServer.createNamespace=true",
		"--set", "globalManager.dijob.v1Server.diServer.namespace=di",
		"--set", "globalManager.dijob.v1Server.diServer.clusterDomain=example.org")
	own.get(t, "Service/di-server", &svc)
	if svc.Namespace != "di" || svc.Spec.ExternalName != "nereid-di-v1-server.ml.svc.example.org" {
		t.Errorf("di-server %s with %s, want it in di naming example.org", svc.Namespace, svc.Spec.ExternalName)
	}
	for what, args := range map[string][]string{
		"the alias off":  {"--set", "globalManager.dijob.v1Server.diServer.enabled=false", "--set", "globalManager.dijob.v1Server.diServer.createNamespace=true"},
		"the server off": {"--set", "globalManager.dijob.v1Server.enabled=false", "--set", "globalManager.dijob.v1Server.diServer.createNamespace=true"},
	} {
		if _, ok := render(t, "ml", args...)["Service/di-server"]; ok {
			t.Errorf("di-server rendered with %s", what)
		}
	}
	_, err := framework.Helm(t, "template", "nereid", framework.ChartDir(), "--namespace", "ml", "--set", "globalManager.dijob.v1Server.port=8090",
		"--set", "globalManager.dijob.v1Server.diServer.createNamespace=true")
	if err == nil || !strings.Contains(err.Error(), "needs globalManager.dijob.v1Server.port 8080") {
		t.Errorf("another port with the alias on: %v; want a refusal naming the port", err)
	}
}
