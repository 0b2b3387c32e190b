package common

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// ByModel indexes objects by the namespace/name of each Model they name.
// The controllers of the kinds that name Models and the Model protection
// share this one index of each kind's informer.
const ByModel = "nereid.io/by-model"

// modelNamer is an object whose type names Models (sednav1's ModelNames).
type modelNamer interface {
	metav1.Object
	ModelNames() []string
}

// ModelNames are the Models obj names (in its namespace), without
// duplicates or empty names; none when obj's type names no Models.
func ModelNames(obj any) []string {
	job, ok := obj.(modelNamer)
	if !ok {
		return nil
	}
	var names []string
	for _, m := range job.ModelNames() {
		if m != "" && !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	return names
}

// ModelKeys are the namespace/name of each Model obj names (ModelNames).
func ModelKeys(obj any) []string {
	names := ModelNames(obj)
	if len(names) == 0 {
		return nil
	}
	ns := obj.(modelNamer).GetNamespace()
	keys := make([]string, len(names))
	for i, m := range names {
		keys[i] = ns + "/" + m
	}
	return keys
}

// IndexByModel adds the ByModel index to inf, once however many
// controllers ask; it must be called before inf starts.
func IndexByModel(inf cache.SharedIndexInformer) error {
	if _, ok := inf.GetIndexer().GetIndexers()[ByModel]; ok {
		return nil
	}
	if err := inf.AddIndexers(cache.Indexers{ByModel: func(obj any) ([]string, error) { return ModelKeys(obj), nil }}); err != nil {
		return fmt.Errorf("adding the %s index: %w", ByModel, err)
	}
	return nil
}
