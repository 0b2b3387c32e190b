package jointinference

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

func init() {
	kinds.Register(&kinds.Kind{
		GVK: serviceKind, Resource: "jointinferenceservices",
		Informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Sedna().V1alpha1().JointInferenceServices().Informer()
		},
		Edge: &kinds.Edge{Order: 2, Workers: true,
			UpdateStatus: func(ctx context.Context, c nereidclient.Interface, obj metav1.Object) error {
				_, err := c.SednaV1alpha1().JointInferenceServices(obj.GetNamespace()).UpdateStatus(ctx, obj.(*sednav1.JointInferenceService), metav1.UpdateOptions{})
				return err
			}},
		AdoptsSednaChildren: true,
		ListNamingModels: func(ctx context.Context, c nereidclient.Interface, ns string, opts metav1.ListOptions) ([]metav1.Object, string, error) {
			l, err := c.SednaV1alpha1().JointInferenceServices(ns).List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return kinds.Objects(l.Items), l.Continue, nil
		},
		Controller: &kinds.Controller{
			Workers: 4,
			New: func(ctx context.Context, d kinds.Deps) (kinds.Runner, error) {
				return NewController(ctx, d, Config{})
			},
		},
	})
}
