package incrementallearning

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

func init() {
	kinds.Register(&kinds.Kind{
		GVK: sednav1.IncrementalLearningJobKind, Resource: "incrementallearningjobs",
		Informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Sedna().V1alpha1().IncrementalLearningJobs().Informer()
		},
		Progress: func(obj any) kinds.Progress {
			return learningcycle.Progress(&obj.(*sednav1.IncrementalLearningJob).Status.CycleStatus)
		},
		Edge: &kinds.Edge{Order: 2, Workers: true, SendStatus: true, OwnReports: true, WorkersNeedLocalController: true,
			UpdateStatus: kinds.WriteStatusWith(func(c nereidclient.Interface, ns string) kinds.StatusWriter[*sednav1.IncrementalLearningJob] {
				return c.SednaV1alpha1().IncrementalLearningJobs(ns)
			})},
		AdoptsSednaChildren: true,
		ModelNames:          common.ModelNames, DatasetNames: learningcycle.DatasetNames,
		ListPage: kinds.ListPagesWith(func(c nereidclient.Interface, ns string) func(context.Context, metav1.ListOptions) (*sednav1.IncrementalLearningJobList, error) {
			return c.SednaV1alpha1().IncrementalLearningJobs(ns).List
		}, func(l *sednav1.IncrementalLearningJobList) []metav1.Object { return kinds.Objects(l.Items) }),
		Controller: &kinds.Controller{
			Workers:  4,
			AddFlags: learningcycle.AddFlags,
			Validate: learningcycle.ValidateFlags,
			New: func(ctx context.Context, d kinds.Deps) (kinds.Runner, error) {
				return NewController(ctx, d, learningcycle.FlagConfig())
			},
		},
	})
}
