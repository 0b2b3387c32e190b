package v1alpha1_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// TestExamplesDecodeStrictlyIntoTheTypes proves the Go types carry every JSON
// field the examples (written as Sedna users write them) use: a field the types
// lack would be silently dropped by the API server's pruning.
func TestExamplesDecodeStrictlyIntoTheTypes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := sednav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := div2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// examples/dijob-v1: DI-orchestrator v0.2's kinds, and the Namespace its
	// AggregatorConfig lives in.
	if err := div1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../../../examples/*/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("finding examples: %v (found %d)", err, len(files))
	}
	kinds := map[string]int{}
	versions := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind == "" {
				continue
			}
			obj, err := scheme.New(schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s: %s does not decode strictly: %v", f, meta.Kind, err)
			}
			kinds[meta.Kind]++
			versions[meta.APIVersion+" "+meta.Kind]++
		}
	}
	for _, gvk := range []string{"Dataset", "Model", "JointInferenceService", "FederatedLearningJob", "IncrementalLearningJob", "LifelongLearningJob", "DIJob"} {
		if kinds[gvk] == 0 {
			t.Errorf("no example of %s", gvk)
		}
	}
	for _, gvk := range []string{div1.SchemeGroupVersion.String() + " DIJob", div1.SchemeGroupVersion.String() + " AggregatorConfig", div2.SchemeGroupVersion.String() + " DIJob"} {
		if versions[gvk] == 0 {
			t.Errorf("no example of %s", gvk)
		}
	}
}

// TestJSONFieldNamesFollowSedna spot-checks the contract's JSON names that
// differ from Go's conventions.
func TestJSONFieldNamesFollowSedna(t *testing.T) {
	cases := map[string]struct {
		obj  any
		want []string
	}{
		"model device_soc_versions": {
			obj:  sednav1.ModelSpec{URL: "u", Format: "pb", DeviceSocVersions: []string{"ascend310"}},
			want: []string{`"device_soc_versions":["ascend310"]`},
		},
		"knowledge base": {
			obj:  sednav1.KnowledgeBase{AIModels: sednav1.AIModels{NumberOfAIModels: 2}},
			want: []string{`"AIModels":{"numberOfAIModels":2}`, `"AIClasses"`, `"samples"`},
		},
		"trigger float threshold": {
			obj:  sednav1.TriggerCondition{Operator: ">", Threshold: 0.1, Metric: "precision_delta"},
			want: []string{`"threshold":0.1`},
		},
		"hpa": {
			obj:  sednav1.HPA{MaxReplicas: 3},
			want: []string{`"maxReplicas":3`},
		},
		"deploy model": {
			obj:  sednav1.DeployModel{Name: "m", HotUpdateEnabled: true},
			want: []string{`"hotUpdateEnabled":true`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := yaml.Marshal(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			js, err := yaml.YAMLToJSON(got)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !bytes.Contains(js, []byte(w)) {
					t.Errorf("JSON %s lacks %s", js, w)
				}
			}
		})
	}
}

// TestExampleFoldersDefineReferencesFirst checks what `kubectl apply -f
// examples/<kind>/` needs to start without a Warning MissingReference: kubectl
// applies a folder's files in lexical order, so every Model and Dataset a job
// names must be defined in the same folder, in a file that sorts before the
// job's (or earlier in the job's own file). The integration test
// TestExamplesApplyInKubectlsOrderWithoutMissingReference shows it on a
// cluster.
func TestExampleFoldersDefineReferencesFirst(t *testing.T) {
	dirs, err := filepath.Glob("../../../../examples/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("finding examples: %v (found %d)", err, len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(files) // kubectl's order
			defined := map[string]bool{}
			for _, f := range files {
				for _, obj := range readObjects(t, f) {
					for _, ref := range references(obj["spec"]) {
						if !defined[ref] {
							t.Errorf("%s: %s %v names %s, which no file before it in the folder defines", filepath.Base(f), obj["kind"], name(obj), ref)
						}
					}
					if kind, _ := obj["kind"].(string); kind == "Model" || kind == "Dataset" {
						defined[kind+" "+name(obj)] = true
					}
				}
			}
		})
	}
}

func name(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	n, _ := meta["name"].(string)
	return n
}

// readObjects decodes every document of a manifest file.
func readObjects(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
}

// references are the Models and Datasets a spec names, as "Model <name>":
// Sedna's references are objects {name: ...} under a key naming the kind
// (model, initialModel, pretrainedModel, initialEvalModel, dataset).
func references(v any) []string {
	var refs []string
	switch v := v.(type) {
	case map[string]any:
		for key, child := range v {
			lower := strings.ToLower(key)
			if ref, ok := child.(map[string]any); ok && (strings.HasSuffix(lower, "model") || lower == "dataset") {
				if n, ok := ref["name"].(string); ok {
					kind := "Model"
					if lower == "dataset" {
						kind = "Dataset"
					}
					refs = append(refs, kind+" "+n)
				}
			}
			refs = append(refs, references(child)...)
		}
	case []any:
		for _, child := range v {
			refs = append(refs, references(child)...)
		}
	}
	return refs
}
