package common

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednalisters "github.com/nereid-ml/nereid/pkg/client/listers/sedna/v1alpha1"
)

// References resolves the Models and Datasets an object names, from the
// caches, and collects those that do not exist, for SetReferencesResolved.
// A failed read is kept (Err) and ends the resolving: what follows it
// resolves to nil.
type References struct {
	namespace string
	models    sednalisters.ModelLister
	datasets  sednalisters.DatasetLister
	missing   []string
	seen      map[string]bool
	err       error
}

// NewReferences resolves names in namespace through the listers; a kind that
// names no Dataset passes a nil datasets.
func NewReferences(namespace string, models sednalisters.ModelLister, datasets sednalisters.DatasetLister) *References {
	return &References{namespace: namespace, models: models, datasets: datasets, seen: map[string]bool{}}
}

// Model is the Model named name, or nil when it does not exist (it is then
// missing) or could not be read.
func (r *References) Model(name string) *sednav1.Model {
	if r.err != nil {
		return nil
	}
	m, err := r.models.Models(r.namespace).Get(name)
	return resolved(r, "Model", name, m, err)
}

// Dataset is the Dataset named name, or nil when it does not exist (it is
// then missing) or could not be read.
func (r *References) Dataset(name string) *sednav1.Dataset {
	if r.err != nil {
		return nil
	}
	d, err := r.datasets.Datasets(r.namespace).Get(name)
	return resolved(r, "Dataset", name, d, err)
}

// Missing lists what does not exist as "Model x" and "Dataset y", each once,
// in the order asked for.
func (r *References) Missing() []string {
	return r.missing
}

// Err is the first failed read, if any.
func (r *References) Err() error {
	return r.err
}

func resolved[T any](r *References, kind, name string, obj *T, err error) *T {
	switch {
	case apierrors.IsNotFound(err):
		if ref := kind + " " + name; !r.seen[ref] {
			r.seen[ref] = true
			r.missing = append(r.missing, ref)
		}
		return nil
	case err != nil:
		r.err = fmt.Errorf("reading %s %s/%s: %w", kind, r.namespace, name, err)
		return nil
	}
	return obj
}
