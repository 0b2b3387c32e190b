package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/test/framework"
)

// exampleDirs are the example folders, one per kind; each applies on its own.
var exampleDirs = []string{
	"dataset", "model", "federatedlearningjob", "jointinferenceservice",
	"incrementallearningjob", "lifelonglearningjob",
}

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(framework.RESTConfig())
	if err != nil {
		t.Fatalf("building dynamic client: %v", err)
	}
	return c
}

func example(dir string) string {
	return filepath.Join(framework.RepoRoot(), "examples", dir)
}

// TestExamplesApply applies every example folder the way docs/kinds.md tells a
// user to (client-side kubectl apply, which also proves the CRDs' schemas fit
// the last-applied annotation) and checks every object is there.
func TestExamplesApply(t *testing.T) {
	t.Parallel()
	for _, dir := range exampleDirs {
		t.Run(dir, func(t *testing.T) {
			ns := framework.Namespace(t)
			if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example(dir)); err != nil {
				t.Fatalf("kubectl apply -f examples/%s: %v\n%s", dir, err, out)
			}
			for _, obj := range framework.ReadManifests(t, example(dir)) {
				gvr, err := framework.SednaResource(obj.GetKind())
				if err != nil {
					t.Fatal(err)
				}
				got, err := dynamicClient(t).Resource(gvr).Namespace(ns).Get(t.Context(), obj.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatalf("getting %s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
				// Nothing the user wrote may be pruned by the schema.
				if diff := cmp.Diff(obj.Object["spec"], got.Object["spec"]); diff != "" {
					t.Errorf("%s %s spec changed on the way in (-want,+got):\n%s", obj.GetKind(), obj.GetName(), diff)
				}
			}
		})
	}
}

// brokenManifest is a valid example of a kind with one thing broken, and
// the field the API server's refusal names.
type brokenManifest struct {
	dir, kind string
	breakIt   func(u *unstructured.Unstructured)
	wantField string
}

// setField sets the field at path.
func setField(value any, path ...string) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
			panic(err)
		}
	}
}

// removeField removes the field at path.
func removeField(path ...string) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) { unstructured.RemoveNestedField(u.Object, path...) }
}

// setFieldInList sets the field at path of the list's index-th item.
func setFieldInList(list []string, index int, value any, path ...string) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		items, _, _ := unstructured.NestedSlice(u.Object, list...)
		item := items[index].(map[string]any)
		if err := unstructured.SetNestedField(item, value, path...); err != nil {
			panic(err)
		}
		_ = unstructured.SetNestedSlice(u.Object, items, list...)
	}
}

func brokenManifests() map[string]brokenManifest {
	return map[string]brokenManifest{
		"dataset without nodeName": {
			dir: "dataset", kind: "Dataset", breakIt: removeField("spec", "nodeName"), wantField: "spec.nodeName",
		},
		"dataset with empty nodeName": {
			dir: "dataset", kind: "Dataset", breakIt: setField("", "spec", "nodeName"), wantField: "spec.nodeName",
		},
		"model without url": {
			dir: "model", kind: "Model", breakIt: removeField("spec", "url"), wantField: "spec.url",
		},
		"federated job with no training workers": {
			dir: "federatedlearningjob", kind: "FederatedLearningJob",
			breakIt: setField([]any{}, "spec", "trainingWorkers"), wantField: "spec.trainingWorkers",
		},
		"aggregation worker template with no containers": {
			dir: "federatedlearningjob", kind: "FederatedLearningJob",
			breakIt:   setField([]any{}, "spec", "aggregationWorker", "template", "spec", "containers"),
			wantField: "spec.aggregationWorker.template.spec.containers",
		},
		"training worker without a dataset name": {
			dir: "federatedlearningjob", kind: "FederatedLearningJob",
			breakIt:   setFieldInList([]string{"spec", "trainingWorkers"}, 1, "", "dataset", "name"),
			wantField: "spec.trainingWorkers[1].dataset.name",
		},
		"transmitter with both s3 and ws": {
			dir: "federatedlearningjob", kind: "FederatedLearningJob",
			breakIt: setField(map[string]any{
				"s3": map[string]any{"aggDataPath": "s3://bucket/agg"},
				"ws": map[string]any{},
			}, "spec", "transmitter"),
			wantField: "spec.transmitter",
		},
		"cloud worker template with no pod spec": {
			dir: "jointinferenceservice", kind: "JointInferenceService",
			breakIt:   setField(map[string]any{}, "spec", "cloudWorker", "template"),
			wantField: "spec.cloudWorker.template.spec.containers",
		},
		"hpa with minReplicas above maxReplicas": {
			dir: "jointinferenceservice", kind: "JointInferenceService",
			breakIt: setField(int64(5), "spec", "cloudWorker", "hpa", "minReplicas"), wantField: "spec.cloudWorker.hpa.minReplicas",
		},
		"edge worker with an empty model name": {
			dir: "jointinferenceservice", kind: "JointInferenceService",
			breakIt: setField("", "spec", "edgeWorker", "model", "name"), wantField: "spec.edgeWorker.model.name",
		},
		"train trigger operator outside the set": {
			dir: "incrementallearningjob", kind: "IncrementalLearningJob",
			breakIt:   setField("!=", "spec", "trainSpec", "trigger", "condition", "operator"),
			wantField: "spec.trainSpec.trigger.condition.operator",
		},
		"deploy trigger operator outside the set": {
			dir: "incrementallearningjob", kind: "IncrementalLearningJob",
			breakIt:   setField("gt", "spec", "deploySpec", "trigger", "condition", "operator"),
			wantField: "spec.deploySpec.trigger.condition.operator",
		},
		"trainProb above 1": {
			dir: "incrementallearningjob", kind: "IncrementalLearningJob",
			breakIt: setField(1.5, "spec", "dataset", "trainProb"), wantField: "spec.dataset.trainProb",
		},
		"trainProb below 0": {
			dir: "lifelonglearningjob", kind: "LifelongLearningJob",
			breakIt: setField(-0.1, "spec", "dataset", "trainProb"), wantField: "spec.dataset.trainProb",
		},
		"timer start that is not HH:MM": {
			dir: "incrementallearningjob", kind: "IncrementalLearningJob",
			breakIt: setField("2am", "spec", "trainSpec", "trigger", "timer", "start"), wantField: "spec.trainSpec.trigger.timer.start",
		},
		"timer end past midnight": {
			dir: "lifelonglearningjob", kind: "LifelongLearningJob",
			breakIt: setField("25:00", "spec", "trainSpec", "trigger", "timer", "end"), wantField: "spec.trainSpec.trigger.timer.end",
		},
		"deploy worker template with no containers": {
			dir: "lifelonglearningjob", kind: "LifelongLearningJob",
			breakIt:   setField([]any{}, "spec", "deploySpec", "template", "spec", "containers"),
			wantField: "spec.deploySpec.template.spec.containers",
		},
		"eval worker template with no containers": {
			dir: "incrementallearningjob", kind: "IncrementalLearningJob",
			breakIt:   removeField("spec", "evalSpec", "template", "spec", "containers"),
			wantField: "spec.evalSpec.template.spec.containers",
		},
	}
}

// TestInvalidManifestsAreRejectedNamingTheField takes a valid example, breaks
// one thing, and expects the API server to refuse it with the field's path in
// the message.
func TestInvalidManifestsAreRejectedNamingTheField(t *testing.T) {
	t.Parallel()
	cases := brokenManifests()
	ns := framework.Namespace(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := framework.ReadManifest(t, example(tc.dir), tc.kind)
			tc.breakIt(obj)
			gvr, err := framework.SednaResource(tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			_, err = dynamicClient(t).Resource(gvr).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
			if err == nil {
				t.Fatalf("the API server accepted a %s with %s", tc.kind, name)
			}
			if !strings.Contains(err.Error(), tc.wantField) {
				t.Errorf("error does not name %s: %v", tc.wantField, err)
			}
		})
	}
}

// TestKubectlApplyOfBrokenManifestNamesTheField is the user's view of the
// schema: kubectl apply fails and says which field is wrong.
func TestKubectlApplyOfBrokenManifestNamesTheField(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	path := filepath.Join(t.TempDir(), "broken.yaml")
	broken := `apiVersion: sedna.io/v1alpha1
kind: IncrementalLearningJob
metadata:
  name: broken
spec:
  initialModel: {name: initial-model}
  dataset: {name: incremental-dataset, trainProb: 0.8}
  outputDir: /output
  trainSpec:
    template: {spec: {containers: [{name: train, image: train:v1}]}}
    trigger:
      condition: {operator: "=>", threshold: 500, metric: num_of_samples}
  evalSpec:
    template: {spec: {containers: [{name: eval, image: eval:v1}]}}
  deploySpec:
    model: {name: deploy-model}
    trigger:
      condition: {operator: ">", threshold: 0.1, metric: precision_delta}
    template: {spec: {containers: [{name: infer, image: infer:v1}]}}
`
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", path)
	if err == nil {
		t.Fatalf("kubectl apply accepted an invalid operator:\n%s", out)
	}
	if !strings.Contains(err.Error(), "spec.trainSpec.trigger.condition.operator") {
		t.Errorf("kubectl's error does not name the field: %v", err)
	}
}

// TestFloatFieldsKeepDecimals checks that trainProb and threshold, which Sedna
// declares as floats, accept and return 0.8 and 0.1 as written.
func TestFloatFieldsKeepDecimals(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example("incrementallearningjob")); err != nil {
		t.Fatalf("applying the example: %v\n%s", err, out)
	}
	job, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(ns).Get(t.Context(), "helmet-detection-demo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []float64{job.Spec.Dataset.TrainProb, job.Spec.TrainSpec.Trigger.Condition.Threshold, job.Spec.DeploySpec.Trigger.Condition.Threshold}
	if diff := cmp.Diff([]float64{0.8, 500, 0.1}, got); diff != "" {
		t.Errorf("trainProb, train threshold, deploy threshold (-want,+got):\n%s", diff)
	}
}

// TestStatusSubresourceDoesNotBumpGeneration checks the contract every
// controller relies on: a status write leaves metadata.generation alone, a spec
// edit moves it, and a write to the main resource cannot change status.
func TestStatusSubresourceDoesNotBumpGeneration(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example("federatedlearningjob")); err != nil {
		t.Fatalf("applying the example: %v\n%s", err, out)
	}
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	job, err := jobs.Get(t.Context(), "surface-defect-detection", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Generation != 1 {
		t.Fatalf("a new job has generation %d, want 1", job.Generation)
	}

	job.Status.Phase = sednav1.FLJobRunning
	job.Status.Active = 3
	job.Status.ObservedGeneration = job.Generation
	job, err = jobs.UpdateStatus(t.Context(), job, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating status: %v", err)
	}
	if job.Generation != 1 || job.Status.Phase != sednav1.FLJobRunning || job.Status.Active != 3 {
		t.Fatalf("after a status write: generation %d, phase %q, active %d; want 1, Running, 3",
			job.Generation, job.Status.Phase, job.Status.Active)
	}

	job.Spec.TrainingWorkers[0].Template.Spec.Containers[0].Env[0].Value = "64"
	job.Status.Phase = sednav1.FLJobFailed // ignored: the main resource does not write status
	job, err = jobs.Update(t.Context(), job, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("updating spec: %v", err)
	}
	if job.Generation != 2 {
		t.Errorf("after a spec edit: generation %d, want 2", job.Generation)
	}
	if job.Status.Phase != sednav1.FLJobRunning {
		t.Errorf("a write to the main resource changed status.phase to %q", job.Status.Phase)
	}
}

// TestKubectlExplainDescribesNereidsFields: the fields Nereid defines carry
// their descriptions, and the CRDs with them still apply client-side (the
// last-applied annotation holds at most 256 KiB).
func TestKubectlExplainDescribesNereidsFields(t *testing.T) {
	t.Parallel()
	for field, want := range map[string]string{
		"fl.spec.aggregationWorker":            "AggregationWorker merges the training workers' updates.",
		"dijob.spec.backoffLimit":              "How many times the job may restart",
		"il.status.jobConditions":              "Conditions about the job as a whole",
		"ji.spec.edgeWorker.hardExampleMining": "How the worker picks the examples it sends to the cloud.",
		"fl.spec.suspend":                      "True stops the object's pods",
		"ll.spec.ttlSecondsAfterFinished":      "Seconds after the job finished",
		"ji.spec.managedBy":                    "The controller that runs this object",
		"dijob.spec.activeDeadlineSeconds":     "Seconds the job may be active",
	} {
		// Discovery and the OpenAPI of CRDs just made may lag a moment.
		var out string
		framework.Eventually(t, 30*time.Second, "kubectl explain "+field+" describing it", func(context.Context) (bool, error) {
			var err error
			out, err = framework.Kubectl(t, "explain", field)
			return err == nil && strings.Contains(out, want), nil
		})
	}
	crds, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "build", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in build/crds (%v)", err)
	}
	for _, f := range crds {
		if out, err := framework.Kubectl(t, "apply", "--dry-run=server", "-f", f); err != nil {
			t.Errorf("client-side kubectl apply of %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
}

// TestShortNamesAndPrinterColumns checks what `kubectl get` shows per kind.
func TestShortNamesAndPrinterColumns(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	wantObjects := 0
	for _, dir := range exampleDirs {
		if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example(dir)); err != nil {
			t.Fatalf("applying examples/%s: %v\n%s", dir, err, out)
		}
		wantObjects += len(framework.ReadManifests(t, example(dir)))
	}
	cases := map[string]struct {
		shortName   string
		wantColumns []string
	}{
		"Dataset":                {"dst", []string{"NAME", "NODE", "FORMAT", "SAMPLES", "EDGE", "AGE"}},
		"Model":                  {"mdl", []string{"NAME", "FORMAT", "URL", "AGE"}},
		"JointInferenceService":  {"ji", []string{"NAME", "EDGE-NODE", "EDGE-READY", "CLOUD-READY", "ACTIVE", "FAILED", "ADMISSION", "REFERENCES", "SCHEDULED", "EDGE", "SUSPENDED", "AGE"}},
		"FederatedLearningJob":   {"fl", []string{"NAME", "PHASE", "ROUND", "SLOWEST", "ACTIVE", "SUCCEEDED", "FAILED", "ADMISSION", "REFERENCES", "SCHEDULED", "EDGE", "SUSPENDED", "AGE"}},
		"IncrementalLearningJob": {"il", []string{"NAME", "STAGE", "STATE", "ROUND", "ACTIVE", "ADMISSION", "REFERENCES", "SCHEDULED", "EDGE", "SUSPENDED", "AGE"}},
		"LifelongLearningJob":    {"ll", []string{"NAME", "STAGE", "STATE", "ROUND", "MODELS", "ADMISSION", "REFERENCES", "SCHEDULED", "EDGE", "SUSPENDED", "AGE"}},
	}
	for kind, tc := range cases {
		t.Run(kind, func(t *testing.T) {
			out, err := framework.Kubectl(t, "get", tc.shortName, "-n", ns)
			if err != nil {
				t.Fatalf("kubectl get %s: %v", tc.shortName, err)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if diff := cmp.Diff(tc.wantColumns, strings.Fields(lines[0])); diff != "" {
				t.Errorf("columns of kubectl get %s (-want,+got):\n%s", tc.shortName, diff)
			}
			if len(lines) < 2 {
				t.Errorf("kubectl get %s listed no %s:\n%s", tc.shortName, kind, out)
			}
		})
	}
	checkProgressColumns(t, ns)
	out, err := framework.Kubectl(t, "get", "sedna", "-n", ns, "-o", "name")
	if err != nil {
		t.Fatalf("kubectl get sedna: %v", err)
	}
	if got := len(strings.Fields(out)); got != wantObjects {
		t.Errorf("kubectl get sedna listed %d objects, want the %d of the examples:\n%s", got, wantObjects, out)
	}
}

// checkProgressColumns writes the status fields that say a job's progress
// into the examples (no GlobalManager runs in ns to change them) and reads
// them back from the columns of kubectl get, -o wide's included: the
// columns' JSONPaths name fields the status has.
func checkProgressColumns(t *testing.T, ns string) {
	cases := map[string]struct {
		status string
		want   map[string]string // column: cell, under -o wide
	}{
		"fl/surface-defect-detection": {
			`{"round":5,"slowestRound":3,"slowestNode":"edge-1","fastestNode":"edge-0","edgeNodes":[` +
				`{"name":"edge-0","lastHeardTime":"2026-01-01T00:00:00Z","lastReportID":9,"round":5},` +
				`{"name":"edge-1","lastHeardTime":"2026-01-01T00:00:00Z","lastReportID":4,"round":3}]}`,
			map[string]string{"ROUND": "5", "SLOWEST": "3", "SLOWEST-NODE": "edge-1", "FASTEST-NODE": "edge-0"},
		},
		"ji/helmet-detection-inference-example": {
			`{"edgeReady":"1/1","cloudReady":"0/2","conditions":[{"type":"Scheduled","status":"False","reason":"Unschedulable"}]}`,
			map[string]string{"EDGE-READY": "1/1", "CLOUD-READY": "0/2", "SCHEDULED": "Unschedulable"},
		},
		"il/helmet-detection-demo": {
			`{"stage":"Eval","state":"Running","round":3,"deployedRound":2}`,
			map[string]string{"STAGE": "Eval", "ROUND": "3", "DEPLOYED": "2"},
		},
		"ll/atcii-classifier-demo": {
			`{"stage":"Train","state":"Waiting","round":1}`,
			map[string]string{"STAGE": "Train", "ROUND": "1"},
		},
	}
	for obj, tc := range cases {
		t.Run(obj, func(t *testing.T) {
			if out, err := framework.Kubectl(t, "patch", "-n", ns, obj, "--subresource=status", "--type=merge", "-p", `{"status":`+tc.status+`}`); err != nil {
				t.Fatalf("writing the status of %s: %v\n%s", obj, err, out)
			}
			out, err := framework.Kubectl(t, "get", "-n", ns, obj, "-o", "wide")
			if err != nil {
				t.Fatalf("kubectl get %s -o wide: %v", obj, err)
			}
			rows := tableRows(out)
			if len(rows) != 1 {
				t.Fatalf("kubectl get %s -o wide printed %d rows, want 1:\n%s", obj, len(rows), out)
			}
			got := map[string]string{}
			for col := range tc.want {
				got[col] = rows[0][col]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("kubectl get %s -o wide (-want,+got):\n%s\n%s", obj, diff, out)
			}
		})
	}
	// The per-node rounds, as kubectl describe lists them.
	out, err := framework.Kubectl(t, "describe", "-n", ns, "fl/surface-defect-detection")
	if err != nil {
		t.Fatalf("kubectl describe fl: %v", err)
	}
	for _, want := range []string{"Slowest Node:", "edge-1", "Round:"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl describe fl does not say %q:\n%s", want, out)
		}
	}
}

// tableRows reads kubectl get's table: each row's cells by column, cut at
// the columns' offsets in the header line (a cell may be empty or hold
// spaces).
func tableRows(out string) []map[string]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	type column struct {
		name       string
		start, end int
	}
	var cols []column
	for i := 0; i < len(header); {
		if header[i] == ' ' {
			i++
			continue
		}
		j := i
		for j < len(header) && header[j] != ' ' {
			j++
		}
		cols = append(cols, column{name: header[i:j], start: i})
		i = j
	}
	for k := range cols {
		cols[k].end = -1
		if k+1 < len(cols) {
			cols[k].end = cols[k+1].start
		}
	}
	var rows []map[string]string
	for _, line := range lines[1:] {
		row := map[string]string{}
		for _, c := range cols {
			if c.start >= len(line) {
				continue
			}
			end := c.end
			if end < 0 || end > len(line) {
				end = len(line)
			}
			row[c.name] = strings.TrimSpace(line[c.start:end])
		}
		rows = append(rows, row)
	}
	return rows
}

// A learning job's outputDir cannot change: the rounds' data and models are
// under it, and the GlobalManager takes only the paths the edge reports
// within it (a round's trigger sent under the old one would be refused, and
// the round never fired again).
func TestOutputDirCannotChange(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	applyExampleFiles(t, ns, "incrementallearningjob", "10-incrementallearningjob.yaml")
	applyExampleFiles(t, ns, "lifelonglearningjob", "10-lifelonglearningjob.yaml")
	for _, obj := range []string{"incrementallearningjob/helmet-detection-demo", "lifelonglearningjob/atcii-classifier-demo"} {
		out, err := framework.Kubectl(t, "patch", "-n", ns, obj, "--type=merge", "-p", `{"spec":{"outputDir":"/elsewhere"}}`)
		if err == nil || !strings.Contains(err.Error(), "spec.outputDir") || !strings.Contains(err.Error(), "outputDir cannot change") {
			t.Errorf("patching %s's outputDir: %v\n%s; want it refused, naming spec.outputDir", obj, err, out)
		}
		if out, err := framework.Kubectl(t, "label", "-n", ns, obj, "edited=yes"); err != nil {
			t.Errorf("another edit of %s: %v\n%s", obj, err, out)
		}
	}
}

// TestExamplesApplyInKubectlsOrderWithoutMissingReference applies every
// example folder as docs/kinds.md says, `kubectl apply -f examples/<kind>/`,
// with a GlobalManager running: kubectl applies a folder's files in lexical
// order, so the Datasets and Models a job names must come in files that sort
// before the job's, or the job's first sync finds them missing and the user's
// first sight of the example is a Warning MissingReference.
func TestExamplesApplyInKubectlsOrderWithoutMissingReference(t *testing.T) {
	t.Parallel()
	dirs, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "examples", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no example folders (%v)", err)
	}
	for _, path := range dirs {
		dir := filepath.Base(path)
		t.Run(dir, func(t *testing.T) {
			if dir == "dijob-v1" {
				// Its AggregatorConfig names its namespace, which kubectl apply -n
				// refuses, and its v1alpha1 job needs the conversion webhook, which
				// one GlobalManager at a time serves.
				t.Skip("applied by TestCRDChangersInTurn/DIJobV1alpha1IsServedBesideV2alpha1 (checkTheV1ExampleApplies)")
			}
			ns := framework.Namespace(t)
			framework.StartGlobalManager(t, ns)
			if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example(dir)); err != nil {
				t.Fatalf("kubectl apply -f examples/%s: %v\n%s", dir, err, out)
			}
			// Every job has been synced (Datasets and Models get their
			// status from the edge and a finalizer, not a sync of this kind).
			framework.Eventually(t, 60*time.Second, "every job of examples/"+dir+" to have a status of its spec", func(ctx context.Context) (bool, error) {
				out, err := framework.Kubectl(t, "get", "-n", ns, "-f", example(dir), "-o", "json")
				if err != nil {
					return false, err
				}
				var list struct {
					Items []unstructured.Unstructured `json:"items"`
				}
				if err := json.Unmarshal([]byte(out), &list); err != nil {
					return false, err
				}
				for _, obj := range list.Items {
					if kind := obj.GetKind(); kind == "Dataset" || kind == "Model" {
						continue
					}
					observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
					if observed != obj.GetGeneration() {
						return false, nil
					}
				}
				return true, nil
			})
			// Events are written a moment after the sync that records them.
			time.Sleep(2 * time.Second)
			events, err := framework.KubeClient(t).CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				if e.Type == corev1.EventTypeWarning && e.Reason == "MissingReference" {
					t.Errorf("applying examples/%s, %s %s got a Warning MissingReference: %s", dir, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
				}
			}
		})
	}
}
