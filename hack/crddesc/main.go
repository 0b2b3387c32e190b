// Command crddesc keeps, in CRDs that controller-gen wrote with every
// description, only the descriptions of the fields Nereid's API types
// define, so that `kubectl explain` explains them; the descriptions inside
// the Kubernetes types they embed (pod templates, volumes, resources) go,
// which keeps each CRD small enough for a client-side `kubectl apply` (its
// last-applied annotation is limited to 256 KiB). `kubectl explain` of a
// field inside an embedded pod template says `<no description>`: the
// Kubernetes API reference describes those.
//
// Usage: go run ./hack/crddesc <dir of CRD YAML files>; each is rewritten.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nereid-ml/nereid/hack/internal/crdfile"
	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/scheme"
)

// ours is the package path prefix of the types whose descriptions stay.
const ours = "github.com/nereid-ml/nereid/"

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crddesc <dir of CRD YAML files>")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "*.yaml"))
	if err == nil && len(files) == 0 {
		err = fmt.Errorf("no CRD in %s", os.Args[1])
	}
	for _, f := range files {
		if err != nil {
			break
		}
		err = trimFile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crddesc:", err)
		os.Exit(1)
	}
}

func trimFile(path string) error {
	return crdfile.Edit(path, trim)
}

// trim keeps in crd only the descriptions of Nereid's own fields.
func trim(crd map[string]any) error {
	spec, _ := crd["spec"].(map[string]any)
	group, _ := spec["group"].(string)
	names, _ := spec["names"].(map[string]any)
	kind, _ := names["kind"].(string)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		version, _ := v.(map[string]any)
		name, _ := version["name"].(string)
		obj, err := scheme.Scheme.New(schema.GroupVersionKind{Group: group, Version: name, Kind: kind})
		if err != nil {
			return fmt.Errorf("the Go type of %s %s/%s: %w", kind, group, name, err)
		}
		s, _ := version["schema"].(map[string]any)
		root, _ := s["openAPIV3Schema"].(map[string]any)
		if root == nil {
			return fmt.Errorf("version %s has no openAPIV3Schema", name)
		}
		walk(root, reflect.TypeOf(obj))
	}
	return nil
}

// walk keeps the descriptions of s, the schema of a value of type t, as far
// as t is one of Nereid's types, and strips them below where it is not.
func walk(s map[string]any, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if items, ok := s["items"].(map[string]any); ok {
			walkField(items, t.Elem())
		}
		return
	case reflect.Map:
		if values, ok := s["additionalProperties"].(map[string]any); ok {
			walkField(values, t.Elem())
		}
		return
	case reflect.Struct:
	default:
		return
	}
	props, _ := s["properties"].(map[string]any)
	for i := range t.NumField() {
		f := t.Field(i)
		name, inline := jsonName(f)
		if inline {
			// Its fields are this schema's.
			walk(s, f.Type)
			continue
		}
		if prop, ok := props[name].(map[string]any); ok && name != "" {
			walkField(prop, f.Type)
		}
	}
}

// walkField keeps the description of a field's own schema (the comment of
// the field, or of the type it names) and goes on into it: on with walk
// when its type is Nereid's, stripping everything below when not.
func walkField(s map[string]any, t reflect.Type) {
	base := t
	for base.Kind() == reflect.Pointer || base.Kind() == reflect.Slice || base.Kind() == reflect.Array || base.Kind() == reflect.Map {
		base = base.Elem()
	}
	if base.Kind() == reflect.Struct && !strings.HasPrefix(base.PkgPath(), ours) {
		own, had := s["description"]
		strip(s)
		if had {
			s["description"] = own
		}
		return
	}
	walk(s, t)
}

// strip removes every description in the schema s and the schemas in it.
func strip(s map[string]any) {
	delete(s, "description")
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				strip(m)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		if m, ok := s[k].(map[string]any); ok {
			strip(m)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if l, ok := s[k].([]any); ok {
			for _, e := range l {
				if m, ok := e.(map[string]any); ok {
					strip(m)
				}
			}
		}
	}
}

// undescribed lists the fields of Nereid's types in s, the schema of a
// value of type t at path, whose schema has no description.
func undescribed(s map[string]any, t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			s, _ = s["items"].(map[string]any)
			path += "[]"
		case reflect.Map:
			s, _ = s["additionalProperties"].(map[string]any)
			path += "{}"
		}
		t = t.Elem()
	}
	if s == nil || t.Kind() != reflect.Struct || !strings.HasPrefix(t.PkgPath(), ours) {
		return nil
	}
	props, _ := s["properties"].(map[string]any)
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, inline := jsonName(f)
		if inline {
			out = append(out, undescribed(s, f.Type, path)...)
			continue
		}
		prop, ok := props[name].(map[string]any)
		if !ok || name == "metadata" {
			continue
		}
		if d, _ := prop["description"].(string); d == "" {
			out = append(out, path+"."+name)
		}
		out = append(out, undescribed(prop, f.Type, path+"."+name)...)
	}
	return out
}

// jsonName is a field's name in JSON, and whether it is inlined.
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if strings.Contains(","+opts+",", ",inline,") {
		return "", true
	}
	if name == "-" {
		return "", false
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}
