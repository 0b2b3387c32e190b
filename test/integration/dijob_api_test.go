package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/test/framework"
)

var dijobs = div2.SchemeGroupVersion.WithResource("dijobs")

// TestDIJobExamplesApply applies examples/dijob (a learner, two collectors and
// an evaluator; and DI-orchestrator's serial sample, a task of type none) as a
// user would: nothing written is pruned, and the defaults DI-orchestrator
// gives are given.
func TestDIJobExamplesApply(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example("dijob")); err != nil {
		t.Fatalf("kubectl apply -f examples/dijob: %v\n%s", err, out)
	}
	for _, obj := range framework.ReadManifests(t, example("dijob")) {
		got, err := dynamicClient(t).Resource(dijobs).Namespace(ns).Get(t.Context(), obj.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(obj.Object["spec"], got.Object["spec"]); diff != "" {
			t.Errorf("DIJob %s spec changed on the way in (-want,+got):\n%s", obj.GetName(), diff)
		}
	}
	// The defaults, on a job that states only its tasks.
	minimal := dijobManifest("minimal", map[string]any{"type": "learner", "template": podTemplate()})
	got, err := dynamicClient(t).Resource(dijobs).Namespace(ns).Create(t.Context(), minimal, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := got.Object["spec"].(map[string]any)
	want := map[string]any{"priority": "normal", "cleanPodPolicy": "Running", "preemptible": false, "backoffLimit": int64(3)}
	for k, v := range want {
		if spec[k] != v {
			t.Errorf("spec.%s = %v, want the default %v", k, spec[k], v)
		}
	}
	if r := spec["tasks"].([]any)[0].(map[string]any)["replicas"]; r != int64(1) {
		t.Errorf("spec.tasks[0].replicas = %v, want the default 1", r)
	}
	// The printer columns, TASKS-READY read back from a status written here
	// (no GlobalManager runs in ns to change it).
	if out, err := framework.Kubectl(t, "patch", "-n", ns, "dijob/minimal", "--subresource=status", "--type=merge",
		"-p", `{"status":{"tasksReady":"learner 0/1, collector 3/4"}}`); err != nil {
		t.Fatalf("writing the status of dijob/minimal: %v\n%s", err, out)
	}
	out, err := framework.Kubectl(t, "get", "dijob", "-n", ns, "minimal")
	if err != nil {
		t.Fatalf("kubectl get dijob (short name, printer columns): %v\n%s", err, out)
	}
	wantColumns := []string{"NAME", "PHASE", "READYREPLICAS", "REPLICAS", "TASKS-READY", "RESTARTS", "RESCHEDULES", "ADMISSION", "REASON", "SCHEDULED", "EDGE", "SUSPENDED", "AGE"}
	if diff := cmp.Diff(wantColumns, strings.Fields(strings.SplitN(out, "\n", 2)[0])); diff != "" {
		t.Errorf("columns of kubectl get dijob (-want,+got):\n%s", diff)
	}
	if rows := tableRows(out); len(rows) != 1 || rows[0]["TASKS-READY"] != "learner 0/1, collector 3/4" {
		t.Errorf("kubectl get dijob shows rows %q; want TASKS-READY \"learner 0/1, collector 3/4\"\n%s", rows, out)
	}
}

// TestDIJobTaskRulesAreCheckedAtApply: the shapes DI-orchestrator accepts and
// then fails at run time are refused when applied, naming the field.
func TestDIJobTaskRulesAreCheckedAtApply(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	task := func(typ, name string) map[string]any {
		t := map[string]any{"type": typ, "template": podTemplate()}
		if name != "" {
			t["name"] = name
		}
		return t
	}
	// Bounds on replicas: every pod carries every replica's name (DI_NODES).
	replicas := func(task map[string]any, n int) map[string]any {
		task["replicas"] = n
		return task
	}
	cases := map[string]struct {
		tasks     []any
		wantField string
		wantMsg   string
	}{
		"a task over 1024 replicas":        {[]any{replicas(task("collector", ""), 1025)}, "spec.tasks[0].replicas", "less than or equal to 1024"},
		"a job over 1024 replicas in all":  {[]any{replicas(task("learner", ""), 2), replicas(task("collector", ""), 1023)}, "spec.tasks", "a job runs at most 1024 replicas"},
		"32 tasks of 1024 replicas (2^15)": {thirtyTwoTasks(replicas, task), "spec.tasks", "a job runs at most 1024 replicas"},
		"the largest replicas of an int32": {[]any{replicas(task("collector", ""), 2147483647)}, "spec.tasks[0].replicas", "less than or equal to 1024"},
		"two learners":                     {[]any{task("learner", ""), task("learner", "second")}, "spec.tasks", "at most one task of type learner"},
		"two collectors":                   {[]any{task("collector", "a"), task("collector", "b")}, "spec.tasks", "at most one task of type collector"},
		"a none task without name":         {[]any{task("learner", ""), task("none", "")}, "spec.tasks[1]", "a task of type none needs a name"},
		"names not unique":                 {[]any{task("learner", ""), task("none", "learner")}, "spec.tasks", "task names must be unique"},
		"a name that is no DNS label":      {[]any{task("none", "Bad_Name")}, "spec.tasks[0].name", "should match"},
		"no task":                          {[]any{}, "spec.tasks", "should have at least 1 items"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := dijobManifest("invalid", tc.tasks...)
			_, err := dynamicClient(t).Resource(dijobs).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
			if err == nil {
				t.Fatalf("the API server took it; want it refused with %q at %s", tc.wantMsg, tc.wantField)
			}
			if !strings.Contains(err.Error(), tc.wantField) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("refused with %q; want %q at %s", err, tc.wantMsg, tc.wantField)
			}
		})
	}
	// At the bounds, a job is taken.
	largest := dijobManifest("largest", replicas(task("learner", ""), 1), replicas(task("collector", ""), 1023))
	if _, err := dynamicClient(t).Resource(dijobs).Namespace(ns).Create(t.Context(), largest, metav1.CreateOptions{}); err != nil {
		t.Errorf("a job of 1024 replicas in all was refused: %v", err)
	}
}

// thirtyTwoTasks is the most tasks a job may have, each at the most
// replicas a task may have.
func thirtyTwoTasks(replicas func(map[string]any, int) map[string]any, task func(string, string) map[string]any) []any {
	var tasks []any
	for i := range 32 {
		tasks = append(tasks, replicas(task("none", fmt.Sprintf("t%d", i)), 1024))
	}
	return tasks
}

func dijobManifest(name string, tasks ...any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": div2.SchemeGroupVersion.String(), "kind": "DIJob",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"tasks": tasks},
	}}
}

func podTemplate() map[string]any {
	return map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "di-container", "image": "opendilab/ding:nightly"}}}}
}
