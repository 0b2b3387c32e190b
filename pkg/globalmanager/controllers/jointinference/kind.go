package jointinference

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

func init() {
	kinds.Register(&kinds.Kind{
		GVK: serviceKind, Resource: "jointinferenceservices",
		Informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Sedna().V1alpha1().JointInferenceServices().Informer()
		},
		// A service has no phase; its metrics are the edge nodes' inference
		// counts, summed (inferenceMetrics).
		Progress: func(obj any) kinds.Progress {
			return kinds.Progress{Metrics: obj.(*sednav1.JointInferenceService).Status.Metrics}
		},
		Edge: &kinds.Edge{Order: 2, Workers: true,
			UpdateStatus: kinds.WriteStatusWith(func(c nereidclient.Interface, ns string) kinds.StatusWriter[*sednav1.JointInferenceService] {
				return c.SednaV1alpha1().JointInferenceServices(ns)
			})},
		AdoptsSednaChildren: true,
		ModelNames:          common.ModelNames,
		ListPage: kinds.ListPagesWith(func(c nereidclient.Interface, ns string) func(context.Context, metav1.ListOptions) (*sednav1.JointInferenceServiceList, error) {
			return c.SednaV1alpha1().JointInferenceServices(ns).List
		}, func(l *sednav1.JointInferenceServiceList) []metav1.Object { return kinds.Objects(l.Items) }),
		Controller: &kinds.Controller{
			Workers: 4,
			New: func(ctx context.Context, d kinds.Deps) (kinds.Runner, error) {
				return NewController(ctx, d, Config{})
			},
		},
	})
}
