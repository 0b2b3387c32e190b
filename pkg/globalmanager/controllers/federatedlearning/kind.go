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
		Edge: &kinds.Edge{Order: 2, Workers: true,
			UpdateStatus: func(ctx context.Context, c nereidclient.Interface, obj metav1.Object) error {
				_, err := c.SednaV1alpha1().FederatedLearningJobs(obj.GetNamespace()).UpdateStatus(ctx, obj.(*sednav1.FederatedLearningJob), metav1.UpdateOptions{})
				return err
			}},
		AdoptsSednaChildren: true,
		ListNamingModels: func(ctx context.Context, c nereidclient.Interface, ns string, opts metav1.ListOptions) ([]metav1.Object, string, error) {
			l, err := c.SednaV1alpha1().FederatedLearningJobs(ns).List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return kinds.Objects(l.Items), l.Continue, nil
		},
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
