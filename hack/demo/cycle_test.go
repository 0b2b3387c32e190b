package main

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// -check-period-seconds applies each learning-cycle example with its job's
// trigger checking that often, and every other file of the example as it is.
func TestACheckPeriodIsSetInTheExamplesJobOnly(t *testing.T) {
	for _, example := range []string{"incrementallearningjob", "lifelonglearningjob"} {
		src := filepath.Join("..", "..", "examples", example)
		dir, err := withCheckPeriod(src, 1)
		if err != nil {
			t.Fatalf("%s: %v", example, err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		files, _ := filepath.Glob(filepath.Join(src, "*.yaml"))
		copied, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if len(files) == 0 || len(copied) != len(files) {
			t.Fatalf("%s: %d files copied of %d", example, len(copied), len(files))
		}
		for _, f := range files {
			want, _ := os.ReadFile(f)
			got, err := os.ReadFile(filepath.Join(dir, filepath.Base(f)))
			if err != nil {
				t.Fatal(err)
			}
			var job struct {
				Kind string `json:"kind"`
				Spec struct {
					TrainSpec struct {
						Trigger sednav1.Trigger `json:"trigger"`
					} `json:"trainSpec"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(got, &job); err == nil && (job.Kind == "IncrementalLearningJob" || job.Kind == "LifelongLearningJob") {
				if p := job.Spec.TrainSpec.Trigger; p.CheckPeriodSeconds != 1 || p.Condition.Threshold != 500 {
					t.Errorf("%s: trigger %+v, want the example's with checkPeriodSeconds 1", f, p)
				}
			} else if string(got) != string(want) {
				t.Errorf("%s changed in the copy", f)
			}
		}
	}
}
