package v2alpha1

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestCheckReplicasRefusesJobsOverTheBounds(t *testing.T) {
	tasks := func(replicas ...int32) []Task {
		var out []Task
		for i, n := range replicas {
			out = append(out, Task{Type: TaskTypeNone, Name: fmt.Sprintf("t%d", i), Replicas: n})
		}
		return out
	}
	one := int32(1)
	huge := int32(1 << 30)
	cases := map[string]struct {
		spec    DIJobSpec
		wantErr string
	}{
		"one replica":                    {spec: DIJobSpec{Tasks: tasks(1)}},
		"a task at its bound":            {spec: DIJobSpec{Tasks: tasks(MaxTaskReplicas)}},
		"a job at its bound":             {spec: DIJobSpec{Tasks: tasks(1, MaxJobReplicas-1)}},
		"a task over its bound":          {spec: DIJobSpec{Tasks: tasks(MaxTaskReplicas + 1)}, wantErr: "task t0 asks for 1025 replicas"},
		"a job over its bound":           {spec: DIJobSpec{Tasks: tasks(2, MaxJobReplicas-1)}, wantErr: "the job asks for 1025 replicas"},
		"spec.replicas over the bound":   {spec: DIJobSpec{Replicas: &huge, Tasks: tasks(1)}, wantErr: "asks for 1073741824 replicas"},
		"spec.replicas wins on one task": {spec: DIJobSpec{Replicas: &one, Tasks: tasks(huge)}},
		// 32 tasks of 2^30 overflow an int32 sum: still refused.
		"a sum past an int32": {spec: DIJobSpec{Tasks: tasks(huge, huge, huge, huge)}, wantErr: "asks for 1073741824"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := &DIJob{Spec: tc.spec}
			err := job.CheckReplicas()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("CheckReplicas() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("CheckReplicas() = %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

// TestCRDBoundsReplicasAsCheckReplicasDoes: the CRD's markers repeat the
// bounds; the generated schema must carry the same numbers.
func TestCRDBoundsReplicasAsCheckReplicasDoes(t *testing.T) {
	data, err := os.ReadFile("../../../../build/crds/diengine.opendilab.org_dijobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []crdVersion
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	// The CRD serves v1alpha1 too (converted); v2alpha1's schema is this
	// package's.
	v2 := slices.IndexFunc(crd.Spec.Versions, func(v crdVersion) bool { return v.Name == "v2alpha1" })
	if v2 < 0 {
		t.Fatalf("versions %+v, want v2alpha1 among them", crd.Spec.Versions)
	}
	spec := crd.Spec.Versions[v2].Schema.OpenAPIV3Schema.Properties["spec"]
	task := spec.Properties["tasks"].Items
	for field, s := range map[string]*openAPISchema{"spec.replicas": ptrTo(spec.Properties["replicas"]), "spec.tasks[].replicas": ptrTo(task.Properties["replicas"])} {
		if s.Maximum == nil {
			t.Errorf("%s: no maximum, want %d", field, MaxTaskReplicas)
		} else if *s.Maximum != MaxTaskReplicas {
			t.Errorf("%s: maximum %d, want %d", field, *s.Maximum, MaxTaskReplicas)
		}
	}
	wantRule := fmt.Sprintf("self.tasks.map(t, has(t.replicas) ? t.replicas : 1).sum() <= %d", MaxJobReplicas)
	found := false
	for _, v := range spec.Validations {
		found = found || (v.Rule == wantRule && v.FieldPath == ".tasks")
	}
	if !found {
		t.Errorf("spec has no rule %q at .tasks; its rules: %+v", wantRule, spec.Validations)
	}
}

// crdVersion is what the test reads of a version of a CRD.
type crdVersion struct {
	Name   string
	Schema struct {
		OpenAPIV3Schema openAPISchema `json:"openAPIV3Schema"`
	}
}

// openAPISchema is what the test reads of an OpenAPI schema.
type openAPISchema struct {
	Properties  map[string]openAPISchema
	Items       *openAPISchema
	Maximum     *int64
	Validations []struct {
		Rule      string
		FieldPath string `json:"fieldPath"`
	} `json:"x-kubernetes-validations"`
}

func ptrTo(s openAPISchema) *openAPISchema { return &s }
