package federatedlearning

import (
	"context"
	"flag"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// DefaultAggregationPort is --aggregation-port's default.
const DefaultAggregationPort = 7363

func init() {
	var cfg Config
	var port int
	kinds.Register(&kinds.Kind{
		GVK: jobKind, Resource: "federatedlearningjobs",
		Informer: func(f nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Sedna().V1alpha1().FederatedLearningJobs().Informer()
		},
		// Its round is the fastest node's (status.round, from the rounds
		// its workers report).
		Progress: func(obj any) kinds.Progress {
			st := &obj.(*sednav1.FederatedLearningJob).Status
			return kinds.Progress{Phase: string(st.Phase), Round: st.Round, HasRound: true, Metrics: edgestatus.LatestMetrics(st.EdgeNodes)}
		},
		Edge: &kinds.Edge{Order: 2, Workers: true,
			UpdateStatus: kinds.WriteStatusWith(func(c nereidclient.Interface, ns string) kinds.StatusWriter[*sednav1.FederatedLearningJob] {
				return c.SednaV1alpha1().FederatedLearningJobs(ns)
			})},
		AdoptsSednaChildren: true,
		ModelNames:          common.ModelNames, DatasetNames: datasetNames,
		ListPage: kinds.ListPagesWith(func(c nereidclient.Interface, ns string) func(context.Context, metav1.ListOptions) (*sednav1.FederatedLearningJobList, error) {
			return c.SednaV1alpha1().FederatedLearningJobs(ns).List
		}, func(l *sednav1.FederatedLearningJobList) []metav1.Object { return kinds.Objects(l.Items) }),
		Controller: &kinds.Controller{
			Workers: 16,
			AddFlags: func(fs *flag.FlagSet) {
				fs.IntVar(&port, "aggregation-port", DefaultAggregationPort,
					"Port of federated learning aggregation workers (AGG_BIND_PORT, AGG_PORT).")
			},
			Validate: func() error {
				if port < 1 || port > 65535 {
					return fmt.Errorf("--aggregation-port %d is not a port", port)
				}
				cfg.AggregationPort = int32(port)
				return nil
			},
			New: func(ctx context.Context, d kinds.Deps) (kinds.Runner, error) {
				if cfg.AggregationPort == 0 {
					cfg.AggregationPort = DefaultAggregationPort
				}
				return NewController(ctx, d, cfg)
			},
		},
	})
}
