package realnode

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
)

func TestDIMockJobRunsTheMocksFileOnRealNodesWithItsAggregator(t *testing.T) {
	file := filepath.Join("..", "..", "..", "shared", "di-compat", "v1alpha1", "di-mock", "di-mock-dijob.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Skipf("skipping: DI-orchestrator's di-mock is not beside the repository: %v", err)
	}
	out, err := DIMockJobYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	var job div1.DIJob
	if err := yaml.UnmarshalStrict(out, &job); err != nil {
		t.Fatalf("the job written does not read back: %v\n%s", err, out)
	}
	for name, tmpl := range map[string]corev1.PodTemplateSpec{
		"coordinator": job.Spec.Coordinator.Template, "collector": job.Spec.Collector.Template, "learner": job.Spec.Learner.Template,
	} {
		if tmpl.Spec.NodeSelector[Label] != "true" {
			t.Errorf("%s: nodeSelector %v, want %s=true", name, tmpl.Spec.NodeSelector, Label)
		}
		for _, c := range tmpl.Spec.Containers {
			if c.ImagePullPolicy != corev1.PullIfNotPresent || c.Image != "opendilab/di-mock:v0.0.5" {
				t.Errorf("%s: container %s runs %s, pull policy %s; want the file's image, IfNotPresent", name, c.Name, c.Image, c.ImagePullPolicy)
			}
		}
	}
	init := job.Spec.Coordinator.Template.Spec.InitContainers
	if len(init) != 1 || init[0].Name != "aggregator" || init[0].RestartPolicy == nil || *init[0].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("the coordinator's init containers are %+v, want the mock's aggregator as a native sidecar", init)
	}
	if args := job.Spec.Collector.Template.Spec.Containers[0].Args; len(args) != 1 || args[0] == "" {
		t.Errorf("the collector's args changed: %q", args)
	}
}

func TestDIMockJobNeedsACoordinator(t *testing.T) {
	if err := DIMockJob(&div1.DIJob{}); err == nil {
		t.Error("a DIJob without coordinator was taken")
	}
	if _, err := DIMockJobYAML([]byte("kind: DIJob\nspec: {coordinator: {template: {spec: {containers: []}}}}\n")); err == nil {
		t.Error("a coordinator without containers was taken")
	}
	if _, err := DIMockJobYAML([]byte("spec: {nosuchfield: 1}\n")); err == nil {
		t.Error("an unknown field was taken")
	}
}
