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
