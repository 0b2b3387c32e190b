package all_test

import (
	"flag"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/scheme"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/kinds/all"
)

// The table holds every kind the GlobalManager serves, each as the rest of
// it needs: the flags operators and the chart pass keep their names, each
// kind the hub sends keeps a condition list the hub can write, each kind
// the Model protection lists names Models, each job says its progress.
func TestTheTableHoldsEveryKindAsTheGlobalManagerNeedsIt(t *testing.T) {
	table := kinds.All()
	var got []string
	for _, k := range table {
		got = append(got, k.GVK.Kind)
	}
	want := []string{"DIJob", "Dataset", "FederatedLearningJob", "IncrementalLearningJob", "JointInferenceService", "LifelongLearningJob", "Model"}
	if !slices.Equal(got, want) {
		t.Fatalf("the table holds %v, want %v", got, want)
	}
	fs := flag.NewFlagSet("globalmanager", flag.ContinueOnError)
	kinds.AddFlags(fs, table)
	for _, name := range []string{
		"federatedlearningjob-workers", "jointinferenceservice-workers", "incrementallearningjob-workers", "lifelonglearningjob-workers",
		"dijob-workers", "model-workers", "dataset-workers", "aggregation-port", "stage-attempts", "cycle-history-limit", "kb-server",
		"di-server-url", "di-server-address", "di-server-cert-file", "di-server-key-file", "di-server-tls-secret", "di-server-token-audiences",
		"edge-link-grace", "allocator", "allocator-period", "cluster-domain",
	} {
		if fs.Lookup(name) == nil {
			t.Errorf("no flag --%s", name)
		}
	}
	if errs := kinds.Validate(table); len(errs) != 0 {
		t.Errorf("the flags' defaults do not validate: %v", errs)
	}
	for _, k := range table {
		obj, err := scheme.Scheme.New(k.GVK)
		if err != nil {
			t.Errorf("%s: %v", k.GVK.Kind, err)
			continue
		}
		if k.Informer == nil || k.Resource == "" {
			t.Errorf("%s: no informer or resource", k.GVK.Kind)
		}
		if k.Edge != nil {
			_, meta := obj.(interface{ MetaConditions() *[]metav1.Condition })
			_, job := obj.(interface {
				ConditionList() *[]sednav1.JobCondition
			})
			if meta == job || k.Edge.UpdateStatus == nil {
				t.Errorf("%s travels to the edge but keeps no condition list the hub writes, or has no status writer", k.GVK.Kind)
			}
		}
		_, names := obj.(interface{ ModelNames() []string })
		if names != (k.ModelNames != nil) {
			t.Errorf("%s: names Models %v, says so for the Model protection %v", k.GVK.Kind, names, k.ModelNames != nil)
		}
		_, datasets := obj.(interface{ DatasetNames() []string })
		if datasets && k.DatasetNames == nil {
			t.Errorf("%s names Datasets but not for the Dataset protection", k.GVK.Kind)
		}
		if lists := k.ModelNames != nil || k.DatasetNames != nil; lists != (k.ListPage != nil) {
			t.Errorf("%s: names Models or Datasets %v, lists its pages for the protections %v", k.GVK.Kind, lists, k.ListPage != nil)
		}
		protected := k.GVK.Kind == "Model" || k.GVK.Kind == "Dataset"
		if adopts := k.AdoptsSednaChildren; adopts != (k.GVK.Group == sednav1.GroupName && k.Controller != nil && !protected) {
			t.Errorf("%s: adopts Sedna's children %v", k.GVK.Kind, adopts)
		}
		// Every kind with workers is a job the per-job gauges export.
		if job := k.Controller != nil && !protected; job != (k.Progress != nil) {
			t.Errorf("%s: a job %v, has Progress for the per-job gauges %v", k.GVK.Kind, job, k.Progress != nil)
		} else if job {
			k.Progress(obj) // reads the kind's own type
		}
		if k.Optional != (k.GVK.Kind == "DIJob") {
			t.Errorf("%s: optional %v; only DIJob's CRD may be missing", k.GVK.Kind, k.Optional)
		}
	}
}

// Each kind's live list for the Model protection reads its objects from the
// API server, and each status writer writes to the kind's own resource.
func TestEveryKindListsAndWritesThroughItsOwnClient(t *testing.T) {
	fl := &sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "fl", Namespace: "ns"},
		Spec: sednav1.FederatedLearningJobSpec{AggregationWorker: sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: "m"}}}}
	ji := &sednav1.JointInferenceService{ObjectMeta: metav1.ObjectMeta{Name: "ji", Namespace: "ns"}}
	il := &sednav1.IncrementalLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "il", Namespace: "ns"}}
	ll := &sednav1.LifelongLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "ll", Namespace: "ns"}}
	ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "ns"}}
	model := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns"}}
	objs := map[string]runtime.Object{"FederatedLearningJob": fl, "JointInferenceService": ji, "IncrementalLearningJob": il,
		"LifelongLearningJob": ll, "Dataset": ds, "Model": model}
	var all []runtime.Object
	for _, o := range objs {
		all = append(all, o)
	}
	client := fake.NewSimpleClientset(all...)
	for _, k := range kinds.All() {
		if k.ListPage != nil {
			items, next, err := k.ListPage(t.Context(), client, "ns", metav1.ListOptions{})
			if err != nil || len(items) != 1 || items[0].GetName() != objs[k.GVK.Kind].(metav1.Object).GetName() || next != "" {
				t.Errorf("%s: listed %v, %q, %v; want its one object", k.GVK.Kind, items, next, err)
			}
		}
		if k.Edge != nil {
			obj := objs[k.GVK.Kind].DeepCopyObject().(metav1.Object)
			obj.SetLabels(map[string]string{"written": "yes"})
			if err := k.Edge.UpdateStatus(t.Context(), client, obj); err != nil {
				t.Errorf("%s: writing status: %v", k.GVK.Kind, err)
			}
			var wrote bool
			for _, a := range client.Actions() {
				wrote = wrote || (a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == k.Resource)
			}
			if !wrote {
				t.Errorf("%s: no status update of %s", k.GVK.Kind, k.Resource)
			}
		}
	}
}
