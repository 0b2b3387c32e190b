package federatedlearning

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	clienttesting "k8s.io/client-go/testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// Children are exactly the objects the first sync of a new job creates.
func TestChildrenAreWhatTheFirstSyncCreates(t *testing.T) {
	job := exampleJob(t)
	refs := referencedObjects()
	f := newFixture(t, append(refs, job)...)
	f.sync(t, job)
	var service *corev1.Service
	created := f.createdPods()
	for _, a := range f.kube.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok {
			if s, ok := c.GetObject().(*corev1.Service); ok {
				service = s
			}
		}
	}

	pods, svc, err := Children(testWorker, testConfig, job, refs[0].(*sednav1.Model), nil, []*sednav1.Dataset{refs[1].(*sednav1.Dataset), refs[2].(*sednav1.Dataset)})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != len(created) {
		t.Fatalf("Children has %d pods, the sync created %d", len(pods), len(created))
	}
	for _, p := range pods {
		if diff := cmp.Diff(created[p.Name], p); diff != "" {
			t.Errorf("pod %s differs from the one the sync created (-created +Children):\n%s", p.Name, diff)
		}
	}
	if diff := cmp.Diff(service, svc); diff != "" {
		t.Errorf("the Service differs from the one the sync created (-created +Children):\n%s", diff)
	}
}
