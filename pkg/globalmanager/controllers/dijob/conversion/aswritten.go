package conversion

import (
	"bytes"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// keepAsWritten gives the pod templates and volumes of out, a converted
// object, the JSON they had in in, the object converted: the conversion
// copies them whole, but through Go types, which add what the types never
// omit ("metadata": {} of a template, "resources": {} of a container). A
// v2 job written back through v1alpha1 must be unchanged, also as JSON.
// They are found by what they mean (their JSON through the Go types), in
// the spec and in the conversion's annotations.
//
// zeroStatus says the converted object's status is the zero value: one the
// object did not have (the API server keeps none until one is written)
// is not added.
func keepAsWritten(in, out []byte, zeroStatus bool) ([]byte, error) {
	var src, dst any
	if err := decode(in, &src); err != nil {
		return nil, err
	}
	if err := decode(out, &dst); err != nil {
		return nil, err
	}
	written := map[string]any{}
	walkOpaque(src, func(kind string, v any) (any, bool) {
		if key, ok := canonical(kind, v); ok {
			written[key] = v
		}
		return v, false
	})
	changed := walkOpaque(dst, func(kind string, v any) (any, bool) {
		key, ok := canonical(kind, v)
		if w, found := written[key]; ok && found {
			a, errA := json.Marshal(v)
			b, errB := json.Marshal(w)
			return w, errA != nil || errB != nil || !bytes.Equal(a, b)
		}
		return v, false
	})
	if m, ok := dst.(map[string]any); ok && zeroStatus {
		if _, had := src.(map[string]any)["status"]; !had {
			delete(m, "status")
			changed = true
		}
	}
	if !changed {
		return out, nil
	}
	return json.Marshal(dst)
}

func decode(raw []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// The kinds of values walkOpaque finds.
const (
	opaqueTemplate = "template"
	opaqueVolume   = "volume"
)

// walkOpaque calls f on every pod template (a value of a key "template")
// and every volume (an item of "volumes") of the object v, and in the JSON
// of its annotation AnnotationV2, replacing each by what f returns; it does
// not go into them. It says whether f changed any; an annotation is written
// again only then.
func walkOpaque(v any, f func(kind string, v any) (any, bool)) bool {
	changed := false
	set := func(dst *any, kind string, e any) {
		n, c := f(kind, e)
		if c {
			*dst, changed = n, true
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch {
			case k == "template":
				n := e
				set(&n, opaqueTemplate, e)
				v[k] = n
			case k == "volumes":
				if items, ok := e.([]any); ok {
					for i := range items {
						set(&items[i], opaqueVolume, items[i])
					}
				}
			case k == AnnotationV2:
				if s, ok := e.(string); ok {
					var inner any
					if decode([]byte(s), &inner) == nil && walkOpaque(inner, f) {
						if b, err := json.Marshal(inner); err == nil {
							v[k], changed = string(b), true
						}
					}
				}
			default:
				changed = walkOpaque(e, f) || changed
			}
		}
	case []any:
		for _, e := range v {
			changed = walkOpaque(e, f) || changed
		}
	}
	return changed
}

// canonical is the JSON of v through its Go type, which tells values
// that mean the same apart from how they were written.
func canonical(kind string, v any) (string, bool) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	var typed any = &corev1.PodTemplateSpec{}
	if kind == opaqueVolume {
		typed = &corev1.Volume{}
	}
	if json.Unmarshal(raw, typed) != nil {
		return "", false
	}
	out, err := json.Marshal(typed)
	return string(out), err == nil
}
