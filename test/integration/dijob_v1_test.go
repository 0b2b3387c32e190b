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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
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

// testDIJobV1alpha1IsServedBesideV2alpha1: with the GlobalManager's
// conversion webhook, DI-orchestrator v0.2.2's v1alpha1 samples apply as
// they are; both versions read the same objects; a v2 job read in v1alpha1
// and written back is unchanged; the v1 job gets no pods from the v2
// controller (only its coordinator, the v1 operator's); a bad v1 field is
// refused naming it; examples/dijob-v1 applies as its header says.
func testDIJobV1alpha1IsServedBesideV2alpha1(t *testing.T) {
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
	waitForTheDIJobCRDPointing(t, ns, "at the GlobalManager's loopback URL", func(cc webhookClientConfig) bool {
		return strings.HasPrefix(cc.URL, "https://127.0.0.1:") && strings.HasSuffix(cc.URL, conversion.Path)
	})
}

// waitForTheDIJobCRDPointing waits until the DIJob CRD's clientConfig is
// as at says, with the CA of the certificate the GlobalManager of ns keeps
// in its Secret.
func waitForTheDIJobCRDPointing(t *testing.T, ns, what string, at func(webhookClientConfig) bool) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, "the DIJob CRD pointing "+what+" with its CA", func(ctx context.Context) (bool, error) {
		ok, _, err := theDIJobCRDPoints(ctx, t, ns, at)
		return ok, err
	})
}

// checkTheDIJobCRDPointing is waitForTheDIJobCRDPointing now, without
// waiting for the GlobalManager to correct it.
func checkTheDIJobCRDPointing(t *testing.T, ns, what string, at func(webhookClientConfig) bool) {
	t.Helper()
	ok, cc, err := theDIJobCRDPoints(t.Context(), t, ns, at)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Errorf("the DIJob CRD's clientConfig has url %q, service %s/%s and a caBundle of %d bytes; want it pointing %s with the GlobalManager's CA",
			cc.URL, cc.Service.Namespace, cc.Service.Name, len(cc.CABundle), what)
	}
}

// theDIJobCRDPoints says whether the DIJob CRD's clientConfig is as at
// says, with the CA of the GlobalManager of ns; it is false while that
// GlobalManager has written no CA yet.
func theDIJobCRDPoints(ctx context.Context, t *testing.T, ns string, at func(webhookClientConfig) bool) (bool, webhookClientConfig, error) {
	cc, err := dijobConversionClientConfig(ctx, t)
	if err != nil {
		return false, cc, err
	}
	secret, err := framework.KubeClient(t).CoreV1().Secrets(ns).Get(ctx, register.DefaultConversionTLSSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, cc, nil
	} else if err != nil {
		return false, cc, err
	}
	return at(cc) && string(cc.CABundle) == string(secret.Data[selfcert.CAKey]), cc, nil
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
	// The v2 job made its pod; the v1 jobs, their coordinators alone (the
	// v1 operator's), none of a task.
	pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		owner := metav1.GetControllerOf(&p)
		if owner == nil || (owner.Name != "tasks" && p.Name != coordinated.CoordinatorName(owner.Name)) {
			t.Errorf("pod %s of %v: neither the v2 job's nor a v1 job's coordinator", p.Name, owner)
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
	// The v2 controller writes the job's status meanwhile: a write that
	// loses that race reads both versions again.
	var before *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		before, err = dynamicClient(t).Resource(dijobs).Namespace(ns).Get(t.Context(), "tasks", metav1.GetOptions{})
		if err != nil {
			return err
		}
		inV1, err := dynamicClient(t).Resource(dijobsV1).Namespace(ns).Get(t.Context(), "tasks", metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, err = dynamicClient(t).Resource(dijobsV1).Namespace(ns).Update(t.Context(), inV1, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
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
	worker := func(spec map[string]any) map[string]any {
		return map[string]any{"template": map[string]any{"spec": spec}}
	}
	cases := map[string]struct {
		spec      map[string]any
		wantField string
		wantMsg   string
	}{
		"an unknown cleanPodPolicy":     {map[string]any{"cleanPodPolicy": "Sometimes", "coordinator": coordinator(container)}, "spec.cleanPodPolicy", "Unsupported value"},
		"no coordinator":                {map[string]any{"group": "g"}, "spec.coordinator", "Required value"},
		"a coordinator of no container": {map[string]any{"coordinator": coordinator()}, "spec.coordinator.template.spec.containers", "the coordinator needs at least one container"},
		// The worker templates are checked as far as their schema goes
		// (hack/crdv1templates): field names, a named container.
		// kubectl's strict validation names the misspelt field first.
		"a collector's containerz": {map[string]any{"coordinator": coordinator(container), "collector": worker(map[string]any{"containerz": []any{container}})},
			"spec.collector.template.spec.containerz", "unknown field"},
		"a learner of no container": {map[string]any{"coordinator": coordinator(container), "learner": worker(map[string]any{"containers": []any{}})},
			"spec.learner.template.spec.containers", "should have at least 1 items"},
		"a learner's container without a name": {map[string]any{"coordinator": coordinator(container), "learner": worker(map[string]any{"containers": []any{map[string]any{"image": "x"}}})},
			"spec.learner.template.spec.containers[0].name", "Required value"},
		"a collector's nodeSelektor (kubectl's strict validation)": {map[string]any{"coordinator": coordinator(container), "collector": worker(map[string]any{"containers": []any{container}, "nodeSelektor": map[string]any{}})},
			"spec.collector.template.spec.nodeSelektor", "unknown field"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": div1.SchemeGroupVersion.String(), "kind": "DIJob", "metadata": map[string]any{"name": "invalid"}, "spec": tc.spec,
			}}
			_, err := dynamicClient(t).Resource(dijobsV1).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
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

// testDIJobV1alpha1RunsAsDIOrchestratorV022: DI-orchestrator's own v1
// sample, applied as v1alpha1, gets its coordinator pod and Service with
// DI-orchestrator v0.2.2's names, labels, port and environment; a collector
// made as the v1 replicas server makes one gets its Service and, once
// failed, is replaced; the job goes Created, Running and Succeeded with its
// coordinator, read alike in v1alpha1 (phase, replicaStatus) and v2alpha1;
// at the end cleanPodPolicy Running deletes the running collector, keeps
// the coordinator, and every Service goes.
func testDIJobV1alpha1RunsAsDIOrchestratorV022(t *testing.T) {
	compat := framework.DIv1alpha1Compat(t)
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns, "--edge-namespace", ns, framework.DIJobConversion)
	waitForTheConversionWebhook(t, ns)
	const job = "cartpole-dqn"
	applyV1Sample(t, ns, compat, "dijob-cartpole.yaml")
	coordinator := checkV1Coordinator(t, ns, job)
	waitForV1Job(t, ns, job, "Running with its coordinator", func(j *div1.DIJob) bool {
		return j.Status.Phase == div1.JobRunning && activeOf(j, div1.ReplicaTypeCoordinator) == 1
	})
	collector := makeV1Collector(t, ns, job)
	replacement := checkFailedCollectorReplaced(t, ns, job, collector)
	framework.EndPod(t, ns, coordinator.Name, corev1.PodSucceeded)
	done := waitForV1Job(t, ns, job, "Succeeded", func(j *div1.DIJob) bool { return j.Status.Phase == div1.JobSucceeded })
	checkV1JobEnded(t, ns, done)
	checkV1Cleanup(t, ns, job, coordinator.Name, replacement)
}

// applyV1Sample applies one of DI-orchestrator's samples, as it is but for
// the namespace, once the API server takes the new conversion webhook.
func applyV1Sample(t *testing.T, ns, compat, file string) {
	t.Helper()
	obj := framework.ReadManifest(t, filepath.Join(compat, "samples", file), "DIJob")
	obj.SetNamespace(ns)
	path := filepath.Join(t.TempDir(), file)
	writeList(t, path, []any{obj.Object})
	framework.Eventually(t, 30*time.Second, "kubectl apply of "+file, func(context.Context) (bool, error) {
		out, err := framework.Kubectl(t, "apply", "-f", path)
		if err != nil {
			t.Logf("kubectl apply: %v\n%s", err, out)
		}
		return err == nil, nil
	})
}

// waitForV1Job waits until the job, read in v1alpha1, satisfies cond, and
// returns it.
func waitForV1Job(t *testing.T, ns, name, what string, cond func(*div1.DIJob) bool) *div1.DIJob {
	t.Helper()
	job := &div1.DIJob{}
	framework.Eventually(t, 60*time.Second, "v1alpha1 DIJob "+name+": "+what, func(ctx context.Context) (bool, error) {
		// A read goes through the CRD's conversion webhook, which the
		// GlobalManager of whichever test last started one serves: while
		// that one stops and another takes the CRD, reads fail for a moment.
		u, err := dynamicClient(t).Resource(dijobsV1).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Logf("reading v1alpha1 DIJob %s: %v", name, err)
			return false, nil
		}
		job = &div1.DIJob{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, job); err != nil {
			return false, err
		}
		return cond(job), nil
	})
	return job
}

func activeOf(j *div1.DIJob, t div1.ReplicaType) int32 {
	if r := j.Status.ReplicaStatus[t]; r != nil {
		return r.Active
	}
	return -1
}

// checkV1Coordinator checks the coordinator's pod and Service: the
// contract's name and labels, the sample's di-port (22270, as its template
// says) and DI-engine's environment; and returns the pod.
func checkV1Coordinator(t *testing.T, ns, job string) *corev1.Pod {
	t.Helper()
	name := coordinated.CoordinatorName(job)
	var pod *corev1.Pod
	var svc *corev1.Service
	framework.Eventually(t, 60*time.Second, "the coordinator's pod and Service", func(ctx context.Context) (bool, error) {
		var err error
		if pod, err = framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		svc, err = framework.KubeClient(t).CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	want := map[string]string{"dijob-name": job, "replica-type": "coordinator", "group-name": "diengine.opendilab.org", "controller-name": "di-operator", "pod-name": name}
	for k, v := range want {
		if pod.Labels[k] != v || (k != "pod-name" && svc.Spec.Selector[k] != v) {
			t.Errorf("label %s: pod %q, Service selector %q; want %q", k, pod.Labels[k], svc.Spec.Selector[k], v)
		}
	}
	if port, ok := coordinated.PortOf(pod); !ok || port != 22270 {
		t.Errorf("the coordinator's di-port %d (%v), want the sample's 22270", port, ok)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "di-port" || svc.Spec.Ports[0].Port != 22270 {
		t.Errorf("Service %s: clusterIP %q ports %v, want headless with di-port 22270", svc.Name, svc.Spec.ClusterIP, svc.Spec.Ports)
	}
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{"KUBERNETES_POD_NAMESPACE": ns, "KUBERNETES_POD_NAME": name,
		"KUBERNETES_COORDINATOR_URL": name + "." + ns + ":22270", "COORDINATOR_PORT": "22270", "PYTHONUNBUFFERED": "1"} {
		if env[k] != v {
			t.Errorf("the coordinator's %s=%q, want %q", k, env[k], v)
		}
	}
	return pod
}

// makeV1Collector makes a collector as the v1 replicas server makes one
// (coordinated.Pod of the job's v1alpha1 view), and waits for its Service
// and for kwok to run it.
func makeV1Collector(t *testing.T, ns, job string) *corev1.Pod {
	t.Helper()
	stored, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Get(t.Context(), job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := conversion.ToV1(stored)
	if err != nil {
		t.Fatal(err)
	}
	pod, _ := coordinated.Pod(coordinated.Replica{Job: v1, Type: coordinated.Collector, Name: coordinated.ReplicaName(job, coordinated.Collector), Template: &v1.Spec.Collector.Template})
	if pod, err = framework.KubeClient(t).CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the collector's Service", func(ctx context.Context) (bool, error) {
		_, err := framework.KubeClient(t).CoreV1().Services(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	// kwok runs it with one status patch, which has no precondition: ending
	// the pod before that patch would be undone by it.
	return runningPod(t, ns, pod.Name)
}

// checkFailedCollectorReplaced fails the collector and waits for its
// replacement (a new name of its prefix, its own Service) and the failed
// pod's end, the job still Running; it returns the replacement's name.
func checkFailedCollectorReplaced(t *testing.T, ns, job string, collector *corev1.Pod) string {
	t.Helper()
	framework.EndPod(t, ns, collector.Name, corev1.PodFailed)
	var replacement string
	framework.Eventually(t, 60*time.Second, "the failed collector replaced", func(ctx context.Context) (bool, error) {
		pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "replica-type=collector,dijob-name=" + job})
		if err != nil {
			return false, err
		}
		replacement = ""
		for _, p := range pods.Items {
			if p.Name == collector.Name {
				return false, nil // not gone yet
			}
			if p.Annotations[dijob.AnnotationReplacement] == "1" && strings.HasPrefix(p.Name, job+"-collector-") && p.DeletionTimestamp == nil {
				replacement = p.Name
			}
		}
		if replacement == "" {
			return false, nil
		}
		_, err = framework.KubeClient(t).CoreV1().Services(ns).Get(ctx, replacement, metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	stored, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Get(t.Context(), job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status.Phase != div2.JobRunning {
		t.Errorf("after the collector's replacement the job is %s, want Running", stored.Status.Phase)
	}
	waitForEvents(t, ns, stored.UID, collector.Name, "ReplicaReplaced")
	return replacement
}

// checkV1JobEnded checks the ended job in both versions: in v1alpha1 the
// conditions of DI-orchestrator (Created, Running now False, Succeeded)
// and the replicaStatus with the running collector counted as succeeded;
// no stash; in v2alpha1 the same as phases and task status.
func checkV1JobEnded(t *testing.T, ns string, job *div1.DIJob) {
	t.Helper()
	conds := map[div1.Phase]corev1.ConditionStatus{}
	for _, c := range job.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if diff := cmp.Diff(map[div1.Phase]corev1.ConditionStatus{div1.JobCreated: "True", div1.JobRunning: "False", div1.JobSucceeded: "True"}, conds); diff != "" {
		t.Errorf("conditions (-want,+got):\n%s", diff)
	}
	for rt, want := range map[div1.ReplicaType]div1.ReplicaStatus{div1.ReplicaTypeCoordinator: {Succeeded: 1}, div1.ReplicaTypeCollector: {Succeeded: 1}} {
		if got := job.Status.ReplicaStatus[rt]; got == nil || *got != want {
			t.Errorf("replicaStatus[%s] = %+v, want %+v", rt, got, want)
		}
	}
	if _, ok := job.Annotations[conversion.AnnotationV2]; ok {
		t.Errorf("the v1 job read in v1alpha1 carries %s: its status is not all v1", conversion.AnnotationV2)
	}
	stored, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status.Phase != div2.JobSucceeded || stored.Status.TaskStatus["coordinator"][corev1.PodSucceeded] != 1 || stored.Status.TaskStatus["collector"][corev1.PodSucceeded] != 1 {
		t.Errorf("in v2alpha1: phase %s, taskStatus %v; want Succeeded, a coordinator and a collector succeeded", stored.Status.Phase, stored.Status.TaskStatus)
	}
	waitForEvents(t, ns, stored.UID, job.Name, "DIJobCreated", "DIJobSucceeded")
}

// checkV1Cleanup waits for cleanPodPolicy Running's end: the running
// collector deleted, the coordinator kept, every Service of the job gone.
func checkV1Cleanup(t *testing.T, ns, job, coordinator, collector string) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, "the collector and every Service gone, the coordinator kept", func(ctx context.Context) (bool, error) {
		kube := framework.KubeClient(t)
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "dijob-name=" + job})
		if err != nil {
			return false, err
		}
		svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: "dijob-name=" + job})
		if err != nil {
			return false, err
		}
		var names []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		return slices.Equal(names, []string{coordinator}) && len(svcs.Items) == 0, nil
	})
	if _, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(t.Context(), collector, metav1.GetOptions{}); err == nil {
		t.Logf("the collector %s is still terminating", collector)
	}
}

// ignoreNotFound is err unless it says the object is not there (yet).
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
