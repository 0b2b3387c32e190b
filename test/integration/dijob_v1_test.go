package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/register"
	"github.com/nereid-ml/nereid/pkg/globalmanager/selfcert"
	"github.com/nereid-ml/nereid/test/framework"
)

var (
	dijobsV1          = div1.SchemeGroupVersion.WithResource("dijobs")
	aggregatorConfigs = div1.SchemeGroupVersion.WithResource("aggregatorconfigs")
)

// webhookClientConfig is what the test reads of the DIJob CRD's
// spec.conversion.webhook.clientConfig.
type webhookClientConfig struct {
	URL     string `json:"url"`
	Service struct {
		Namespace, Name string
	} `json:"service"`
	CABundle []byte `json:"caBundle"`
}

func dijobConversionClientConfig(ctx context.Context, t *testing.T) (webhookClientConfig, error) {
	var crd struct {
		Spec struct {
			Conversion struct {
				Strategy string
				Webhook  struct {
					ClientConfig webhookClientConfig `json:"clientConfig"`
				}
			}
		}
	}
	raw, err := conversion.RESTCRD{Client: framework.KubeClient(t).Discovery().RESTClient()}.Get(ctx)
	if err != nil {
		return webhookClientConfig{}, err
	}
	if err := json.Unmarshal(raw, &crd); err != nil {
		return webhookClientConfig{}, err
	}
	return crd.Spec.Conversion.Webhook.ClientConfig, nil
}

// TestDIJobV1alpha1IsServedBesideV2alpha1: with the GlobalManager's
// conversion webhook, DI-orchestrator v0.2.2's v1alpha1 samples apply as
// they are; both versions read the same objects; a v2 job read in v1alpha1
// and written back is unchanged; the v1 job gets no pods from the v2
// controller; a bad v1 field is refused naming it; examples/dijob-v1
// applies as its header says.
func TestDIJobV1alpha1IsServedBesideV2alpha1(t *testing.T) {
	compat := framework.DIv1alpha1Compat(t)
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns, "--edge-namespace", ns, framework.DIJobConversion)
	waitForTheConversionWebhook(t, ns)
	jobNames := applyV1alpha1Samples(t, ns, compat)
	startV2JobBeside(t, ns)
	checkBothVersionsList(t, ns, append(jobNames, "tasks"))
	checkV1JobReadsBackAsApplied(t, ns, compat)
	checkV2JobUnchangedThroughV1alpha1(t, ns)
	checkInvalidV1FieldsRefused(t, ns)
	checkTheV1ExampleApplies(t, ns)
	checkTheGlobalManagerPatchesOnlyThatCRD(t)
}

// The GlobalManager points the CRD at its loopback URL, with the CA of
// the certificate it keeps in its Secret.
func waitForTheConversionWebhook(t *testing.T, ns string) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, "the DIJob CRD pointing at the GlobalManager's webhook with its CA", func(ctx context.Context) (bool, error) {
		cc, err := dijobConversionClientConfig(ctx, t)
		if err != nil {
			return false, err
		}
		secret, err := framework.KubeClient(t).CoreV1().Secrets(ns).Get(ctx, register.DefaultConversionTLSSecret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		return strings.HasPrefix(cc.URL, "https://127.0.0.1:") && strings.HasSuffix(cc.URL, conversion.Path) &&
			string(cc.CABundle) == string(secret.Data[selfcert.CAKey]), nil
	})
}

// DI-orchestrator's samples, as they are but for the namespace.
func applyV1alpha1Samples(t *testing.T, ns, compat string) []string {
	t.Helper()
	var samples []any
	var jobNames []string
	for _, f := range []string{"agconfig.yaml", "dijob-cartpole.yaml", "dijob-qbert.yaml"} {
		for _, obj := range framework.ReadManifests(t, filepath.Join(compat, "samples", f)) {
			obj.SetNamespace(ns)
			samples = append(samples, obj.Object)
			if obj.GetKind() == "DIJob" {
				jobNames = append(jobNames, obj.GetName())
			}
		}
	}
	path := filepath.Join(t.TempDir(), "samples.yaml")
	writeList(t, path, samples)
	// The API server takes the new clientConfig within moments of the patch.
	framework.Eventually(t, 30*time.Second, "kubectl apply of DI-orchestrator's v1alpha1 samples", func(context.Context) (bool, error) {
		out, err := framework.Kubectl(t, "apply", "-f", path)
		if err != nil {
			t.Logf("kubectl apply: %v\n%s", err, out)
		}
		return err == nil, nil
	})
	if _, err := dynamicClient(t).Resource(aggregatorConfigs).Namespace(ns).Get(t.Context(), "aggregator-config", metav1.GetOptions{}); err != nil {
		t.Errorf("the AggregatorConfig sample: %v", err)
	}
	return jobNames
}

// A v2 job beside them, which the v2 controller runs.
func startV2JobBeside(t *testing.T, ns string) {
	t.Helper()
	v2job := dijobManifest("tasks", map[string]any{"type": "learner", "template": podTemplate()})
	if _, err := dynamicClient(t).Resource(dijobs).Namespace(ns).Create(t.Context(), v2job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the v2 job's pod", func(ctx context.Context) (bool, error) {
		pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) > 0, err
	})
}

// Both versions list the same jobs.
func checkBothVersionsList(t *testing.T, ns string, want []string) {
	t.Helper()
	names := func(resource string) []string {
		out, err := framework.Kubectl(t, "get", resource, "-n", ns, "-o", "jsonpath={.items[*].metadata.name}")
		if err != nil {
			t.Fatalf("kubectl get %s: %v\n%s", resource, err, out)
		}
		got := strings.Fields(out)
		slices.Sort(got)
		return got
	}
	want = slices.Clone(want)
	slices.Sort(want)
	for _, r := range []string{"dijobs.v1alpha1.diengine.opendilab.org", "dijobs.v2alpha1.diengine.opendilab.org"} {
		if diff := cmp.Diff(want, names(r)); diff != "" {
			t.Errorf("kubectl get %s (-want,+got):\n%s", r, diff)
		}
	}
}

// The v1 job reads back in v1alpha1 as applied, with the default of
// DI-orchestrator's webhook; in v2alpha1 it is marked v1, a task per
// template.
func checkV1JobReadsBackAsApplied(t *testing.T, ns, compat string) {
	t.Helper()
	cartpole := framework.ReadManifest(t, filepath.Join(compat, "samples", "dijob-cartpole.yaml"), "DIJob")
	got, err := dynamicClient(t).Resource(dijobsV1).Namespace(ns).Get(t.Context(), "cartpole-dqn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.GetAnnotations()[conversion.AnnotationV2]; ok {
		t.Errorf("the v1 job read in v1alpha1 carries %s: %v", conversion.AnnotationV2, got.GetAnnotations())
	}
	for _, field := range [][]string{{"spec", "group"}, {"spec", "cleanPodPolicy"}, {"spec", "volumes"}, {"spec", "coordinator", "template", "spec", "containers"}} {
		w, _, _ := unstructured.NestedFieldNoCopy(cartpole.Object, field...)
		g, _, _ := unstructured.NestedFieldNoCopy(got.Object, field...)
		// Quantities come back as strings ("3"), as from any typed API, and
		// the schema's defaults are filled in (a port's protocol TCP).
		if diff := cmp.Diff(withPortProtocol(normalized(t, w)), normalized(t, g)); diff != "" {
			t.Errorf("%s of the v1 job read back (-applied,+read):\n%s", strings.Join(field, "."), diff)
		}
	}
	asV2, err := dynamicClient(t).Resource(dijobs).Namespace(ns).Get(t.Context(), "cartpole-dqn", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := asV2.GetAnnotations()[conversion.AnnotationV1]; !ok {
		t.Errorf("the v1 job read in v2alpha1 is not marked %s: %v", conversion.AnnotationV1, asV2.GetAnnotations())
	}
	tasks, _, _ := unstructured.NestedSlice(asV2.Object, "spec", "tasks")
	if len(tasks) != 3 {
		t.Errorf("the v1 job in v2alpha1 has %d tasks, want 3 (coordinator, collector, learner)", len(tasks))
	}
	// The v2 job made its pod; the v1 jobs, none.
	pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); owner == nil || owner.Name != "tasks" {
			t.Errorf("pod %s of %v: the v2 controller made a pod for a v1 job", p.Name, owner)
		}
	}
}

// examples/dijob-v1 applies as its header says, its AggregatorConfig into
// the namespace it names (di-system) and its job into the user's, and both
// read back as written: nothing the example says is pruned.
func checkTheV1ExampleApplies(t *testing.T, ns string) {
	t.Helper()
	agconfig, job := filepath.Join(example("dijob-v1"), "00-aggregatorconfig.yaml"), filepath.Join(example("dijob-v1"), "10-dijob.yaml")
	if out, err := framework.Kubectl(t, "apply", "-f", agconfig); err != nil {
		t.Fatalf("kubectl apply -f examples/dijob-v1/00-aggregatorconfig.yaml: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = framework.Kubectl(t, "delete", "-f", agconfig, "--wait=false") })
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", job); err != nil {
		t.Fatalf("kubectl apply -f examples/dijob-v1/10-dijob.yaml: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		path, kind string
		resource   schema.GroupVersionResource
		namespace  string
	}{
		{agconfig, "AggregatorConfig", aggregatorConfigs, "di-system"},
		{job, "DIJob", dijobsV1, ns},
	} {
		want := framework.ReadManifest(t, tc.path, tc.kind)
		got, err := dynamicClient(t).Resource(tc.resource).Namespace(tc.namespace).Get(t.Context(), want.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The schema's defaults are filled in (a port's protocol TCP).
		wantSpec := normalized(t, want.Object["spec"])
		if containers, found, _ := unstructured.NestedFieldNoCopy(wantSpec.(map[string]any), "aggregator", "template", "spec", "containers"); found {
			withPortProtocol(containers)
		}
		if diff := cmp.Diff(wantSpec, normalized(t, got.Object["spec"])); diff != "" {
			t.Errorf("examples/dijob-v1's %s read back in v1alpha1 (-applied,+read):\n%s", tc.kind, diff)
		}
	}
}

// A v2 job read in v1alpha1 and written back is unchanged in v2alpha1.
func checkV2JobUnchangedThroughV1alpha1(t *testing.T, ns string) {
	t.Helper()
	before, err := dynamicClient(t).Resource(dijobs).Namespace(ns).Get(t.Context(), "tasks", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inV1, err := dynamicClient(t).Resource(dijobsV1).Namespace(ns).Get(t.Context(), "tasks", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dynamicClient(t).Resource(dijobsV1).Namespace(ns).Update(t.Context(), inV1, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the v2 job back in v1alpha1: %v", err)
	}
	after, err := dynamicClient(t).Resource(dijobs).Namespace(ns).Get(t.Context(), "tasks", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.Object["spec"], after.Object["spec"]); diff != "" {
		t.Errorf("the v2 job's spec after a write through v1alpha1 (-before,+after):\n%s", diff)
	}
	if diff := cmp.Diff(before.GetAnnotations(), after.GetAnnotations()); diff != "" {
		t.Errorf("the v2 job's annotations after a write through v1alpha1 (-before,+after):\n%s", diff)
	}
	if before.GetGeneration() != after.GetGeneration() {
		t.Errorf("generation %d after a write through v1alpha1, was %d", after.GetGeneration(), before.GetGeneration())
	}
}

// Bad v1 fields are refused at apply, naming the field.
func checkInvalidV1FieldsRefused(t *testing.T, ns string) {
	t.Helper()
	coordinator := func(containers ...any) map[string]any {
		return map[string]any{"template": map[string]any{"spec": map[string]any{"containers": append([]any{}, containers...)}}}
	}
	container := map[string]any{"name": "di-container", "image": "opendilab/ding:2021-09-26"}
	cases := map[string]struct {
		spec      map[string]any
		wantField string
		wantMsg   string
	}{
		"an unknown cleanPodPolicy":     {map[string]any{"cleanPodPolicy": "Sometimes", "coordinator": coordinator(container)}, "spec.cleanPodPolicy", "Unsupported value"},
		"no coordinator":                {map[string]any{"group": "g"}, "spec.coordinator", "Required value"},
		"a coordinator of no container": {map[string]any{"coordinator": coordinator()}, "spec.coordinator.template.spec.containers", "the coordinator needs at least one container"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": div1.SchemeGroupVersion.String(), "kind": "DIJob", "metadata": map[string]any{"name": "invalid"}, "spec": tc.spec,
			}}
			_, err := dynamicClient(t).Resource(dijobsV1).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.wantField) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("refused with %v; want %q at %s", err, tc.wantMsg, tc.wantField)
			}
		})
	}
	// DI-orchestrator's webhook default: cleanPodPolicy Running.
	minimal := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": div1.SchemeGroupVersion.String(), "kind": "DIJob", "metadata": map[string]any{"name": "minimal"},
		"spec": map[string]any{"coordinator": coordinator(container)},
	}}
	created, err := dynamicClient(t).Resource(dijobsV1).Namespace(ns).Create(t.Context(), minimal, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(created.Object, "spec", "cleanPodPolicy"); p != "Running" {
		t.Errorf("spec.cleanPodPolicy = %q, want the default Running", p)
	}
}

// The GlobalManager may patch the DIJob CRD, and no other.
func checkTheGlobalManagerPatchesOnlyThatCRD(t *testing.T) {
	t.Helper()
	sa := "--as=system:serviceaccount:" + framework.SystemNamespace + ":" + framework.GlobalManagerServiceAccount
	for crd, want := range map[string]string{conversion.CRDName: "yes", "federatedlearningjobs.sedna.io": "no"} {
		out, _ := framework.Kubectl(t, "auth", "can-i", "patch", "customresourcedefinitions.apiextensions.k8s.io/"+crd, sa)
		if strings.TrimSpace(out) != want {
			t.Errorf("may the GlobalManager patch CRD %s? %q, want %s", crd, strings.TrimSpace(out), want)
		}
	}
}

// normalized is v as JSON reads it back, with numbers as strings, so that
// a quantity written 3 and read "3" compare equal.
func normalized(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				v[k] = walk(e)
			}
		case []any:
			for i, e := range v {
				v[i] = walk(e)
			}
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return v
	}
	return walk(out)
}

// withPortProtocol is containers with the schema's default protocol, TCP,
// on each port that has none.
func withPortProtocol(containers any) any {
	list, _ := containers.([]any)
	for _, c := range list {
		ports, _ := c.(map[string]any)["ports"].([]any)
		for _, p := range ports {
			if p := p.(map[string]any); p["protocol"] == nil {
				p["protocol"] = "TCP"
			}
		}
	}
	return containers
}
