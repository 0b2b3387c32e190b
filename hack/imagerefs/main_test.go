package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nereid-ml/nereid/test/framework"
)

// TestImageRefsAreWhatTheChartRuns checks that `make images` names the images
// as the chart's Pods run them: with the chart's values, with a values.yaml
// that sets a tag and leaves a registry out, and with another registry
// (make images REGISTRY=..., the chart installed with that registry set).
func TestImageRefsAreWhatTheChartRuns(t *testing.T) {
	for name, tc := range map[string]struct {
		edit     func(values string) string
		registry string
		want     map[string]string
	}{
		"the chart's values": {edit: func(v string) string { return v }},
		"another registry": {
			edit: func(v string) string { return v }, registry: "registry.example.com:5000/team",
			want: map[string]string{
				"globalmanager":   "registry.example.com:5000/team/nereid-ml/nereid-globalmanager:v0.1.0",
				"localcontroller": "registry.example.com:5000/team/nereid-ml/nereid-localcontroller:v0.1.0",
			},
		},
		"a tag and no registry": {
			edit: func(v string) string {
				v = strings.Replace(v, `tag: ""`, `tag: "v9.9.9"`, 1)                                                // the GlobalManager's, first
				return strings.Replace(v, "    registry: ghcr.io\n    repository: nereid-ml/nereid-localcontroller", // the LocalController's
					"    registry: \"\"\n    repository: nereid-ml/nereid-localcontroller", 1)
			},
			want: map[string]string{"globalmanager": "ghcr.io/nereid-ml/nereid-globalmanager:v9.9.9"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := copyChart(t, tc.edit)
			refs, err := imageRefs(dir, tc.registry)
			if err != nil {
				t.Fatal(err)
			}
			fromRefs := map[string]string{}
			for _, r := range refs {
				fromRefs[r.Binary] = r.Ref
			}
			for binary, ref := range tc.want {
				if fromRefs[binary] != ref {
					t.Errorf("%s: %q, want %q", binary, fromRefs[binary], ref)
				}
			}
			if lc := fromRefs["localcontroller"]; tc.want != nil && tc.registry == "" && !strings.HasPrefix(lc, "nereid-ml/") {
				t.Errorf("localcontroller: %q, want no registry", lc)
			}

			args := []string{"template", "nereid", dir}
			if tc.registry != "" {
				args = append(args, "--set", "globalManager.image.registry="+tc.registry, "--set", "localController.image.registry="+tc.registry)
			}
			out, err := framework.Helm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			rendered := filepath.Join(t.TempDir(), "rendered.yaml")
			if err := os.WriteFile(rendered, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			fromChart := map[string]string{}
			for _, obj := range framework.ReadManifests(t, rendered) {
				containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
				for _, c := range containers {
					c := c.(map[string]any)
					fromChart[c["name"].(string)] = c["image"].(string)
				}
			}
			if diff := cmp.Diff(fromChart, fromRefs); diff != "" {
				t.Errorf("images (-rendered chart,+imagerefs):\n%s", diff)
			}
		})
	}
}

// copyChart copies the chart into a temporary directory with its values.yaml
// edited.
func copyChart(t *testing.T, edit func(values string) string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "nereid")
	if err := os.CopyFS(dst, os.DirFS(framework.ChartDir())); err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(dst, "values.yaml")
	b, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	edited := edit(string(b))
	if err := os.WriteFile(values, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
