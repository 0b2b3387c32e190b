package datasetstatus

import (
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// A Dataset has no controller: it travels to its node, whose
// LocalController's counts of its samples are its status.
func init() {
	kinds.Register(&kinds.Kind{
		GVK: sednav1.DatasetKind, Resource: "datasets",
		Informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Sedna().V1alpha1().Datasets().Informer()
		},
		Edge: &kinds.Edge{Order: 0,
			UpdateStatus: kinds.WriteStatusWith(func(c nereidclient.Interface, ns string) kinds.StatusWriter[*sednav1.Dataset] {
				return c.SednaV1alpha1().Datasets(ns)
			}),
			Applier: func(d kinds.Deps) any { return NewApplier(d.Client, d.Recorder, d.ClockOrReal()) },
		},
	})
}
