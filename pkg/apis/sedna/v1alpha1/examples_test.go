package v1alpha1_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

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
	files, err := filepath.Glob("../../../../examples/*/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("finding examples: %v (found %d)", err, len(files))
	}
	kinds := map[string]int{}
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
		}
	}
	for _, gvk := range []string{"Dataset", "Model", "JointInferenceService", "FederatedLearningJob", "IncrementalLearningJob", "LifelongLearningJob", "DIJob"} {
		if kinds[gvk] == 0 {
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
