package kinds

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

func kindOf(group, kind string, optional bool) *Kind {
	return &Kind{GVK: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, Resource: strings.ToLower(kind) + "s", Optional: optional}
}

// An optional kind runs only where the API server serves its resource; a
// group the API server does not know is not an error, any other failure of
// discovery is.
func TestServedRunsAnOptionalKindOnlyWhereItsResourceIsServed(t *testing.T) {
	required, served, unserved, unknown := kindOf("a.io", "Job", false), kindOf("b.io", "Thing", true), kindOf("b.io", "Other", true), kindOf("c.io", "Gone", true)
	kube := kubefake.NewClientset()
	disco := kube.Discovery().(*fakediscovery.FakeDiscovery)
	disco.Resources = []*metav1.APIResourceList{{GroupVersion: "b.io/v1", APIResources: []metav1.APIResource{{Name: "things"}, {Name: "things/status"}}}}
	run, skipped, err := Served(disco, []*Kind{required, served, unserved, unknown})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(run, []*Kind{required, served}) || !slices.Equal(skipped, []*Kind{unserved, unknown}) {
		t.Errorf("run %v, skipped %v; want Job and Thing run, Other and Gone skipped", names(run), names(skipped))
	}

	failing := &failingDiscovery{FakeDiscovery: disco}
	if _, _, err := Served(failing, []*Kind{served}); err == nil || !strings.Contains(err.Error(), "b.io/v1") {
		t.Errorf("a failed discovery: error %v, want one naming the group", err)
	}
}

type failingDiscovery struct{ *fakediscovery.FakeDiscovery }

func (failingDiscovery) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	return nil, apierrors.NewServiceUnavailable("the API server is starting")
}

func names(ks []*Kind) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.GVK.Kind)
	}
	return out
}

// Every controller gets --<kind>-workers, at least 1, and its own flags,
// checked by its Validate.
func TestEveryControllerHasAWorkersFlagAndItsOwn(t *testing.T) {
	var own int
	job := kindOf("a.io", "FederatedLearningJob", false)
	job.Controller = &Controller{Workers: 16,
		AddFlags: func(fs *flag.FlagSet) { fs.IntVar(&own, "own", 1, "") },
		Validate: func() error {
			if own < 0 {
				return errors.New("--own must not be negative")
			}
			return nil
		}}
	travels := kindOf("a.io", "Dataset", false)
	table := []*Kind{job, travels}
	parse := func(args ...string) []error {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		AddFlags(fs, table)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return Validate(table)
	}
	if errs := parse(); len(errs) != 0 || job.WorkersOf() != 16 {
		t.Fatalf("the defaults: errors %v, workers %d; want none and 16", errs, job.WorkersOf())
	}
	if errs := parse("--federatedlearningjob-workers=3"); len(errs) != 0 || job.WorkersOf() != 3 {
		t.Errorf("--federatedlearningjob-workers=3: errors %v, workers %d", errs, job.WorkersOf())
	}
	errs := parse("--federatedlearningjob-workers=0", "--own=-1")
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "--federatedlearningjob-workers 0") || !strings.Contains(errs[1].Error(), "--own") {
		t.Errorf("bad values: errors %v, want one naming each flag", errs)
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	AddFlags(fs, table)
	if fs.Lookup("dataset-workers") != nil {
		t.Error("a kind without a controller has a workers flag")
	}
}

func TestAKindRegisteredTwicePanics(t *testing.T) {
	k := kindOf("test.nereid.io", "Twice", false)
	Register(k)
	defer func() {
		mu.Lock()
		registry = slices.DeleteFunc(registry, func(r *Kind) bool { return r.GVK.Group == "test.nereid.io" })
		mu.Unlock()
		if recover() == nil {
			t.Error("registering Twice again did not panic")
		}
	}()
	Register(kindOf("test.nereid.io", "Twice", false))
}
