package v1alpha1

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestCRDServesBothVersionsStoringV2: the one DIJob CRD serves v1alpha1 and
// v2alpha1, stores v2alpha1 (so v2 users never need the webhook), and
// converts through the GlobalManager's webhook (hack/crdconversion).
func TestCRDServesBothVersionsStoringV2(t *testing.T) {
	data, err := os.ReadFile("../../../../build/crds/diengine.opendilab.org_dijobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name            string
				Served, Storage bool
			}
			Conversion struct {
				Strategy string
				Webhook  struct {
					ConversionReviewVersions []string `json:"conversionReviewVersions"`
					ClientConfig             struct {
						Service struct{ Path string }
					} `json:"clientConfig"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	type version struct {
		Name            string
		Served, Storage bool
	}
	var got []version
	for _, v := range crd.Spec.Versions {
		got = append(got, version(v))
	}
	want := []version{{Name: "v1alpha1", Served: true}, {Name: "v2alpha1", Served: true, Storage: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("versions (-want,+got):\n%s", diff)
	}
	c := crd.Spec.Conversion
	if c.Strategy != "Webhook" || !cmp.Equal(c.Webhook.ConversionReviewVersions, []string{"v1"}) || c.Webhook.ClientConfig.Service.Path != "/convert" {
		t.Errorf("conversion %+v, want a Webhook of ConversionReview v1 on /convert", c)
	}
}

// TestCRDChecksTheWorkerTemplatesFieldNames: v1alpha1's collector and
// learner templates, though not spelled out whole (the CRD's size), name
// their fields, their spec's and their containers' (hack/crdv1templates), so
// a misspelled field is refused at apply time, and require a container
// with a name.
func TestCRDChecksTheWorkerTemplatesFieldNames(t *testing.T) {
	data, err := os.ReadFile("../../../../build/crds/diengine.opendilab.org_dijobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type schema struct {
		Type                  string            `json:"type"`
		Required              []string          `json:"required"`
		MinItems              *int              `json:"minItems"`
		Items                 *schema           `json:"items"`
		Properties            map[string]schema `json:"properties"`
		PreserveUnknownFields bool              `json:"x-kubernetes-preserve-unknown-fields"`
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	var spec schema
	for _, v := range crd.Spec.Versions {
		if v.Name == "v1alpha1" {
			spec = v.Schema.OpenAPIV3Schema.Properties["spec"]
		}
	}
	for _, worker := range []string{"collector", "learner"} {
		template := spec.Properties[worker].Properties["template"]
		podSpec := template.Properties["spec"]
		containers := podSpec.Properties["containers"]
		switch {
		case template.PreserveUnknownFields || podSpec.PreserveUnknownFields:
			t.Errorf("%s: the template or its spec keeps unknown fields: a misspelled field is not refused", worker)
		case !cmp.Equal(podSpec.Required, []string{"containers"}) || containers.MinItems == nil || *containers.MinItems != 1:
			t.Errorf("%s: spec requires %v, containers at least %v, want containers, at least 1", worker, podSpec.Required, containers.MinItems)
		case containers.Items == nil || !cmp.Equal(containers.Items.Required, []string{"name"}) || containers.Items.PreserveUnknownFields:
			t.Errorf("%s: a container's schema %+v, want its fields named and its name required", worker, containers.Items)
		}
		for _, field := range []string{"nodeSelector", "tolerations", "volumes", "initContainers"} {
			if _, ok := podSpec.Properties[field]; !ok {
				t.Errorf("%s: the template's spec does not name %s", worker, field)
			}
		}
		if _, ok := podSpec.Properties["containerz"]; ok {
			t.Errorf("%s: the template's spec names containerz", worker)
		}
	}
}
