package model

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

func TestModelProtection(t *testing.T) {
	deleting := metav1.Now()
	model := func(finalizers []string, deleted *metav1.Time) *sednav1.Model {
		return &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", Finalizers: finalizers, DeletionTimestamp: deleted},
			Spec: sednav1.ModelSpec{URL: "/models/m.pb", Format: "pb"}}
	}
	user := &sednav1.IncrementalLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "il", Namespace: "ns"},
		Spec: sednav1.IncrementalLearningJobSpec{InitialModel: sednav1.ModelRef{Name: "m"},
			DeploySpec: sednav1.DeploySpec{Model: sednav1.DeployModel{Name: "other"}}}}
	tests := map[string]struct {
		model          *sednav1.Model
		jobs           []runtime.Object
		wantFinalizer  bool
		wantBlocked    bool
		wantEvents     int
		wantNoWriteAll bool
	}{
		"a new model gets the finalizer":                    {model: model(nil, nil), wantFinalizer: true},
		"a deleted model a job names waits, and says why":   {model: model([]string{Finalizer}, &deleting), jobs: []runtime.Object{user}, wantFinalizer: true, wantBlocked: true, wantEvents: 1},
		"a deleted model no job names is released":          {model: model([]string{Finalizer}, &deleting)},
		"a protected model no one deletes is left as it is": {model: model([]string{Finalizer}, nil), jobs: []runtime.Object{user}, wantFinalizer: true, wantNoWriteAll: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fake.NewSimpleClientset(append([]runtime.Object{tc.model}, tc.jobs...)...)
			factory := sednainformers.NewSharedInformerFactory(client, 0)
			v1 := factory.Sedna().V1alpha1()
			recorder := record.NewFakeRecorder(10)
			c, err := NewController(t.Context(), client, v1.Models(), v1.FederatedLearningJobs(), v1.JointInferenceServices(),
				v1.IncrementalLearningJobs(), recorder, common.NewMetrics(prometheus.NewRegistry()))
			if err != nil {
				t.Fatal(err)
			}
			if err := v1.Models().Informer().GetIndexer().Add(tc.model); err != nil {
				t.Fatal(err)
			}
			for _, j := range tc.jobs {
				if err := v1.IncrementalLearningJobs().Informer().GetIndexer().Add(j); err != nil {
					t.Fatal(err)
				}
			}
			client.ClearActions()
			if err := c.sync(t.Context(), "ns/m"); err != nil {
				t.Fatal(err)
			}
			if tc.wantNoWriteAll && len(client.Actions()) != 0 {
				t.Errorf("actions %v, want none", client.Actions())
			}
			got, err := client.SednaV1alpha1().Models("ns").Get(t.Context(), "m", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if has := slices.Contains(got.Finalizers, Finalizer); has != tc.wantFinalizer {
				t.Errorf("finalizer present = %v, want %v", has, tc.wantFinalizer)
			}
			if blocked := apimeta.IsStatusConditionTrue(got.Status.Conditions, ConditionDeletionBlocked); blocked != tc.wantBlocked {
				t.Errorf("DeletionBlocked = %v, want %v (%v)", blocked, tc.wantBlocked, got.Status.Conditions)
			}
			if len(recorder.Events) != tc.wantEvents {
				t.Errorf("%d events, want %d", len(recorder.Events), tc.wantEvents)
			}
		})
	}
}
