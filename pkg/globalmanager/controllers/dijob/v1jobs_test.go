package dijob

import (
	"testing"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

// TestV1JobsAreLeftAlone: a job written as v1alpha1 (the conversion marks
// it) gets no pods, no Service and no status from the v2 controller; the
// same job unmarked does.
func TestV1JobsAreLeftAlone(t *testing.T) {
	for name, tc := range map[string]struct {
		v1       bool
		wantPods bool
	}{
		"a v1alpha1 job": {v1: true},
		"a v2alpha1 job": {wantPods: true},
	} {
		t.Run(name, func(t *testing.T) {
			job := exampleJob(t)
			if tc.v1 {
				job.Annotations = map[string]string{conversion.AnnotationV1: "{}"}
			}
			f := newFixture(t, job)
			created, _ := f.sync(t, job)
			if got := len(created) > 0; got != tc.wantPods {
				t.Fatalf("pods created: %v, want %v", names(created), tc.wantPods)
			}
			if tc.wantPods {
				return
			}
			if actions := f.kube.Actions(); len(actions) != 0 {
				t.Errorf("the controller called the API for a v1 job: %v", actions)
			}
			if actions := f.di.Actions(); len(actions) != 0 {
				t.Errorf("the controller wrote the v1 job: %v", actions)
			}
		})
	}
}
