package common

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// A job is found by each Dataset it names, in its namespace; an empty name
// finds nothing.
func TestIndexByDatasetFindsAJobByEachDatasetItNames(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &sednav1.FederatedLearningJob{}, 0, cache.Indexers{})
	names := func(obj any) []string {
		job := obj.(*sednav1.FederatedLearningJob)
		var ds []string
		for _, w := range job.Spec.TrainingWorkers {
			ds = append(ds, w.Dataset.Name)
		}
		return ds
	}
	for range 2 { // a second controller on the same informer
		if err := IndexByDataset(inf, names); err != nil {
			t.Fatal(err)
		}
	}
	job := func(ns, name string, datasets ...string) *sednav1.FederatedLearningJob {
		j := &sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for _, d := range datasets {
			w := sednav1.TrainingWorker{}
			w.Dataset.Name = d
			j.Spec.TrainingWorkers = append(j.Spec.TrainingWorkers, w)
		}
		return j
	}
	for _, j := range []*sednav1.FederatedLearningJob{
		job("ns", "two", "d1", "d2"), job("ns", "twice", "d1", "d1"), job("other", "elsewhere", "d1"), job("ns", "none", ""),
	} {
		if err := inf.GetIndexer().Add(j); err != nil {
			t.Fatal(err)
		}
	}
	for key, want := range map[string][]string{
		"ns/d1":    {"ns/twice", "ns/two"},
		"ns/d2":    {"ns/two"},
		"other/d1": {"other/elsewhere"},
		"ns/":      nil,
	} {
		got, err := inf.GetIndexer().IndexKeys(ByDataset, key)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("jobs by Dataset %s (-want,+got):\n%s", key, diff)
		}
	}
}
