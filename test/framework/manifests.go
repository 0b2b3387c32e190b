package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/hack/localrun"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// ReadManifests decodes every object in a YAML file, or in the .yaml files of a
// folder (in name order), as kubectl apply -f would read them.
func ReadManifests(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := localrun.ReadManifests(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// ReadManifest returns the one object of the given kind in a file or folder.
func ReadManifest(t testing.TB, path, kind string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, obj := range ReadManifests(t, path) {
		if obj.GetKind() != kind {
			continue
		}
		if found != nil {
			t.Fatalf("more than one %s in %s", kind, path)
		}
		found = obj
	}
	if found == nil {
		t.Fatalf("no %s in %s", kind, path)
	}
	return found
}

// SednaResource is the resource of a sedna.io kind, for the dynamic client.
func SednaResource(kind string) (schema.GroupVersionResource, error) {
	for _, gvk := range []schema.GroupVersionKind{
		sednav1.DatasetKind, sednav1.ModelKind, sednav1.JointInferenceServiceKind,
		sednav1.FederatedLearningJobKind, sednav1.IncrementalLearningJobKind, sednav1.LifelongLearningJobKind,
	} {
		if gvk.Kind == kind {
			// Every sedna.io plural is the lower-case kind plus "s".
			return sednav1.SchemeGroupVersion.WithResource(strings.ToLower(kind) + "s"), nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("%q is not a sedna.io kind", kind)
}

// SednaCompatDir returns the folder of KubeEdge Sedna's own CRDs and sample
// manifests (crds/, samples/), kept beside the repository in
// ../shared/sedna-compat (NEREID_SEDNA_COMPAT_DIR overrides it), or an error
// saying why there is none.
func SednaCompatDir() (string, error) {
	return compatDir("Sedna", "NEREID_SEDNA_COMPAT_DIR", "sedna-compat")
}

// SednaCompat is SednaCompatDir for a test, which it skips when there is none.
func SednaCompat(t testing.TB) string {
	t.Helper()
	return skipWithout(t, SednaCompatDir)
}

// DIv1alpha1CompatDir returns the folder of DI-orchestrator v0.2.2's
// v1alpha1 CRDs and samples (crds/, samples/), kept beside the repository in
// ../shared/di-compat/v1alpha1 (NEREID_DI_V1ALPHA1_COMPAT_DIR overrides it),
// or an error saying why there is none.
func DIv1alpha1CompatDir() (string, error) {
	return compatDir("DI-orchestrator v1alpha1", "NEREID_DI_V1ALPHA1_COMPAT_DIR", filepath.Join("di-compat", "v1alpha1"))
}

// DIv1alpha1Compat is DIv1alpha1CompatDir for a test, which it skips when
// there is none.
func DIv1alpha1Compat(t testing.TB) string {
	t.Helper()
	return skipWithout(t, DIv1alpha1CompatDir)
}

// compatDir is the fixtures folder env names, else ../shared/<sub>, when it
// has crds/ and samples/.
func compatDir(what, env, sub string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		root, err := findRepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(filepath.Dir(root), "shared", sub)
	}
	for _, s := range []string{"crds", "samples"} {
		if info, err := os.Stat(filepath.Join(dir, s)); err != nil || !info.IsDir() {
			return "", fmt.Errorf("no %s compatibility fixtures in %s (want its crds/ and samples/ folders; set %s)", what, dir, env)
		}
	}
	return dir, nil
}

func skipWithout(t testing.TB, dir func() (string, error)) string {
	t.Helper()
	d, err := dir()
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	return d
}

// SednaSample decodes one of Sedna's own samples (the Sedna fixtures'
// samples/file; the test skips without them) into into, unchanged but for
// the node names, which name Sedna's test cluster's nodes: nodes maps them
// to this cluster's.
func SednaSample(t testing.TB, file string, into any, nodes map[string]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(SednaCompat(t), "samples", file))
	if err != nil {
		t.Fatalf("reading Sedna's sample: %v", err)
	}
	text := string(data)
	for from, to := range nodes {
		text = regexp.MustCompile(`nodeName:\s*"`+regexp.QuoteMeta(from)+`"`).ReplaceAllString(text, `nodeName: "`+to+`"`)
	}
	if err := yaml.UnmarshalStrict([]byte(text), into); err != nil {
		t.Fatalf("decoding Sedna's %s: %v", file, err)
	}
}
