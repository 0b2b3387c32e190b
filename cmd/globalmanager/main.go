// Command globalmanager is Nereid's cloud GlobalManager: one controller per
// sedna.io kind, run against a Kubernetes API server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
)

// options are the GlobalManager's command-line settings.
type options struct {
	kubeconfig   string
	resync       time.Duration
	syncDeadline time.Duration
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"Path to the kubeconfig of the cluster to manage. Empty means in-cluster configuration. Defaults to $KUBECONFIG.")
	fs.DurationVar(&o.resync, "resync-period", 0,
		"How often informers replay every cached object to the controllers; 0 disables it (changes arrive by watch).")
	fs.DurationVar(&o.syncDeadline, "cache-sync-timeout", 2*time.Minute,
		"How long to wait for the informer caches to fill before giving up.")
}

func main() {
	fs := flag.NewFlagSet("globalmanager", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: globalmanager [flags]

The Nereid GlobalManager watches the sedna.io/v1alpha1 resources (Dataset, Model,
JointInferenceService, FederatedLearningJob, IncrementalLearningJob,
LifelongLearningJob) and runs one controller per kind.

Flags:
`)
		fs.PrintDefaults()
	}
	var o options
	o.addFlags(fs)
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag.

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "GlobalManager stopped")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx)
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %q: %w", o.kubeconfig, err)
	}
	client, err := sednaclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building sedna client: %w", err)
	}
	factory := sednainformers.NewSharedInformerFactory(client, o.resync)
	// Informers for every kind, so a missing CRD shows at start rather than later.
	v1 := factory.Sedna().V1alpha1()
	informers := map[string]cache.SharedIndexInformer{
		"datasets":                v1.Datasets().Informer(),
		"models":                  v1.Models().Informer(),
		"jointinferenceservices":  v1.JointInferenceServices().Informer(),
		"federatedlearningjobs":   v1.FederatedLearningJobs().Informer(),
		"incrementallearningjobs": v1.IncrementalLearningJobs().Informer(),
		"lifelonglearningjobs":    v1.LifelongLearningJobs().Informer(),
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	syncCtx, cancel := context.WithTimeout(ctx, o.syncDeadline)
	defer cancel()
	for name, inf := range informers {
		if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("cache of %s not synced within %s: are the CRDs in build/crds installed?", name, o.syncDeadline)
		}
		logger.Info("Cache synced", "resource", name, "objects", len(inf.GetStore().ListKeys()))
	}
	logger.Info("GlobalManager running; controllers for each kind are added by later milestones")
	<-ctx.Done()
	if errors.Is(ctx.Err(), context.Canceled) {
		logger.Info("Shutting down")
	}
	return nil
}
