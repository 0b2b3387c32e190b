// Command crdv1templates gives the collector and learner templates of the
// DIJob CRD's v1alpha1 version the little schema a pod template can have
// there. Their Go type is corev1.PodTemplateSpec, whose whole schema would
// take the CRD past what a client-side kubectl apply can write (the
// coordinator's template and v2alpha1's tasks are spelled out already), so
// controller-gen writes them schemaless (+kubebuilder:validation:Schemaless)
// and this step writes, from the same Go types, only their field names: the
// template's (metadata, spec), its spec's, and its containers' and init
// containers' (each field's value left unchecked), spec.containers required
// with at least one container, and each container's name. A template with
// `containerz:` is then refused when the job is applied, as a coordinator's
// template is, instead of when the coordinator asks for its first pod.
//
// Usage: go run ./hack/crdv1templates <dir of CRD YAML files>; the DIJob
// CRD in it is rewritten.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nereid-ml/nereid/hack/internal/crdfile"
)

const (
	crdFile = "diengine.opendilab.org_dijobs.yaml"
	version = "v1alpha1"
)

// templates are the fields of the v1alpha1 spec whose template this
// writes.
var templates = []string{"collector", "learner"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdv1templates <dir of CRD YAML files>")
		os.Exit(2)
	}
	if err := crdfile.Edit(filepath.Join(os.Args[1], crdFile), setTemplates); err != nil {
		fmt.Fprintln(os.Stderr, "crdv1templates:", err)
		os.Exit(1)
	}
}

// setTemplates writes the templates' schema into crd's v1alpha1 version.
func setTemplates(crd map[string]any) error {
	spec, err := v1Spec(crd)
	if err != nil {
		return err
	}
	props, _ := spec["properties"].(map[string]any)
	for _, name := range templates {
		field, _ := props[name].(map[string]any)
		fieldProps, _ := field["properties"].(map[string]any)
		template, ok := fieldProps["template"].(map[string]any)
		if !ok {
			return fmt.Errorf("%s has no spec.%s.template", version, name)
		}
		fieldProps["template"] = templateSchema(template["description"])
	}
	return nil
}

// v1Spec is the schema of spec in crd's v1alpha1 version.
func v1Spec(crd map[string]any) (map[string]any, error) {
	crdSpec, _ := crd["spec"].(map[string]any)
	versions, _ := crdSpec["versions"].([]any)
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if v["name"] != version {
			continue
		}
		schema, _ := v["schema"].(map[string]any)
		root, _ := schema["openAPIV3Schema"].(map[string]any)
		props, _ := root["properties"].(map[string]any)
		if spec, ok := props["spec"].(map[string]any); ok {
			return spec, nil
		}
	}
	return nil, fmt.Errorf("no %s version with a spec", version)
}

// templateSchema is a pod template's schema of field names, with the
// description controller-gen gave it.
func templateSchema(description any) map[string]any {
	container := fieldsOf(reflect.TypeFor[corev1.Container]())
	container["properties"].(map[string]any)["name"] = map[string]any{"type": "string"}
	container["required"] = []any{"name"}
	podSpec := fieldsOf(reflect.TypeFor[corev1.PodSpec]())
	specProps := podSpec["properties"].(map[string]any)
	specProps["containers"] = map[string]any{"type": "array", "minItems": 1, "items": container}
	specProps["initContainers"] = map[string]any{"type": "array", "items": container}
	podSpec["required"] = []any{"containers"}
	out := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"metadata": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
			"spec":     podSpec,
		},
		"required": []any{"spec"},
	}
	if description != nil {
		out["description"] = description
	}
	return out
}

// fieldsOf is an object schema naming t's JSON fields, each of any value.
func fieldsOf(t reflect.Type) map[string]any {
	props := map[string]any{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		props[name] = map[string]any{"x-kubernetes-preserve-unknown-fields": true}
	}
	return map[string]any{"type": "object", "properties": props}
}
