package protection

import (
	"context"

	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

func init() {
	kinds.Register(&kinds.Kind{
		GVK: sednav1.ModelKind, Resource: "models",
		Informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Sedna().V1alpha1().Models().Informer()
		},
		Edge: &kinds.Edge{Order: 1,
			UpdateStatus: kinds.WriteStatusWith(func(c nereidclient.Interface, ns string) kinds.StatusWriter[*sednav1.Model] {
				return c.SednaV1alpha1().Models(ns)
			})},
		Controller: &kinds.Controller{
			Workers: 2,
			New: func(ctx context.Context, d kinds.Deps) (kinds.Runner, error) {
				return NewController(ctx, d)
			},
		},
	})
}
