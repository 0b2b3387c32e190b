package common

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// ByDataset indexes objects by the namespace/name of each Dataset they
// name, so a Dataset that appears wakes exactly the objects that wait for
// it, as ByModel does for Models.
const ByDataset = "nereid.io/by-dataset"

// IndexByDataset adds the ByDataset index to inf, keying an object by the
// Datasets names says it names (in its namespace, without duplicates or
// empty names); an object names returns nothing for is not indexed. It adds
// the index once however many controllers ask, so every caller on one
// informer must mean the same names; it must be called before inf starts.
func IndexByDataset(inf cache.SharedIndexInformer, names func(obj any) []string) error {
	if _, ok := inf.GetIndexer().GetIndexers()[ByDataset]; ok {
		return nil
	}
	index := func(obj any) ([]string, error) {
		o, ok := obj.(metav1.Object)
		if !ok {
			return nil, nil
		}
		var keys []string
		for _, n := range names(obj) {
			if k := o.GetNamespace() + "/" + n; n != "" && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		return keys, nil
	}
	if err := inf.AddIndexers(cache.Indexers{ByDataset: index}); err != nil {
		return fmt.Errorf("adding the %s index: %w", ByDataset, err)
	}
	return nil
}
