package datasetstatus

import (
	"context"

	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/protection"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// A Dataset travels to its node, whose LocalController's counts of its
// samples are its status; its controller is the Dataset protection (package
// protection), which keeps it while jobs name it.
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
		Controller: &kinds.Controller{
			Workers: 2,
			New: func(ctx context.Context, d kinds.Deps) (kinds.Runner, error) {
				return protection.NewDatasetController(ctx, d)
			},
		},
	})
}
