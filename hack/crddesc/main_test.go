package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/scheme"
)

// TestEveryFieldNereidDefinesIsDescribed: kubectl explain explains every
// field of Nereid's own types in the CRDs make generate wrote (the
// Kubernetes types they embed go without, by design).
func TestEveryFieldNereidDefinesIsDescribed(t *testing.T) {
	files, err := filepath.Glob("../../build/crds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in build/crds (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
				Versions []struct {
					Name   string `json:"name"`
					Schema struct {
						OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		for _, v := range crd.Spec.Versions {
			obj, err := scheme.Scheme.New(schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind})
			if err != nil {
				t.Fatal(err)
			}
			for _, field := range undescribed(v.Schema.OpenAPIV3Schema, reflect.TypeOf(obj), crd.Spec.Names.Kind) {
				t.Errorf("%s: %s has no description: give its Go field a comment", filepath.Base(f), field)
			}
		}
	}
}
