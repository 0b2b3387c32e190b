package lifelonglearning

import (
	"context"
	"flag"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

func init() {
	var kbServer string
	kinds.Register(&kinds.Kind{
		GVK: sednav1.LifelongLearningJobKind, Resource: "lifelonglearningjobs",
		Informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Sedna().V1alpha1().LifelongLearningJobs().Informer()
		},
		Progress: func(obj any) kinds.Progress {
			return learningcycle.Progress(&obj.(*sednav1.LifelongLearningJob).Status.CycleStatus)
		},
		Edge: &kinds.Edge{Order: 2, Workers: true, SendStatus: true, OwnReports: true, WorkersNeedLocalController: true,
			UpdateStatus: kinds.WriteStatusWith(func(c nereidclient.Interface, ns string) kinds.StatusWriter[*sednav1.LifelongLearningJob] {
				return c.SednaV1alpha1().LifelongLearningJobs(ns)
			})},
		AdoptsSednaChildren: true,
		DatasetNames:        learningcycle.DatasetNames,
		ListPage: kinds.ListPagesWith(func(c nereidclient.Interface, ns string) func(context.Context, metav1.ListOptions) (*sednav1.LifelongLearningJobList, error) {
			return c.SednaV1alpha1().LifelongLearningJobs(ns).List
		}, func(l *sednav1.LifelongLearningJobList) []metav1.Object { return kinds.Objects(l.Items) }),
		Controller: &kinds.Controller{
			Workers: 4,
			AddFlags: func(fs *flag.FlagSet) {
				learningcycle.AddFlags(fs)
				fs.StringVar(&kbServer, "kb-server", "",
					"Knowledge base server put into lifelong learning workers' KB_SERVER; empty leaves it unset.")
			},
			Validate: learningcycle.ValidateFlags,
			New: func(ctx context.Context, d kinds.Deps) (kinds.Runner, error) {
				return NewController(ctx, d, Config{Config: learningcycle.FlagConfig(), KBServer: kbServer})
			},
		},
	})
}
