// Command globalmanager is Nereid's cloud GlobalManager: one controller per
// sedna.io kind and one for DI-engine's DIJobs, run against a Kubernetes API
// server, leader-elected.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/internal/command"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	_ "github.com/nereid-ml/nereid/pkg/globalmanager/kinds/all"
	"github.com/nereid-ml/nereid/pkg/globalmanager/manager"
	"github.com/nereid-ml/nereid/pkg/globalmanager/owner"
	"github.com/nereid-ml/nereid/pkg/version"
)

func main() {
	fs := flag.NewFlagSet("globalmanager", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: globalmanager [flags]

The Nereid GlobalManager watches the sedna.io/v1alpha1 resources and DI-engine's
DIJobs (diengine.opendilab.org/v2alpha1) and runs one controller per kind: it
creates the worker pods, Services, Deployments and autoscalers each job or
service needs, heals them, replaces them when the spec changes, and reports
progress in status and events. Of several replicas, the
one holding the leader election Lease acts.

Settings can also come from a YAML file of flag names and values (--config);
flags on the command line win.

Flags:
`)
		command.PrintFlags(fs)
	}
	var o options
	o.addFlags(fs)
	configFile := fs.String("config", "", "YAML file of settings: flag names (without dashes) and values.")
	klog.InitFlags(fs)
	_ = command.ParseFlags(fs, os.Args[1:]) // ExitOnError: Parse exits on a bad flag.
	if *configFile != "" {
		explicit := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
		if err := applyConfigFile(fs, *configFile, explicit); err != nil {
			command.Exit("globalmanager", err)
		}
	}
	o.gcPercentGiven, o.memLimitGiven = command.Given(fs, "gc-percent"), command.Given(fs, command.MemoryLimitFlag)
	if err := o.validate(); err != nil {
		command.Exit("globalmanager", err)
	}
	command.Run("GlobalManager", func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx)
	gc := command.SetGCPercent("gc-percent", o.gcPercent, o.gcPercentGiven)
	logger.Info("Garbage collector target", "percent", gc.Percent, "from", gc.From)
	mem := command.SetMemoryLimit(command.MemoryLimitFlag, o.memLimitPercent, o.memLimitGiven)
	logger.Info("Soft memory limit", "bytes", mem.Bytes, "from", mem.From)
	clients, err := o.clients()
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	metrics, leader := registerMetrics(reg)
	var ready, failed, following atomic.Value
	ready.Store("waiting for leadership")
	failed.Store("")
	following.Store("")
	electionChecker := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	srv, err := serveHealth(ctx, o.healthAddress, reg, health{ready: &ready, failed: &failed, following: &following, election: electionChecker, profiling: o.profiling})
	if err != nil {
		return err
	}
	defer srv.Close()
	own, err := owner.Follow(ctx, clients.Kube, o.edgeNamespace, o.ownerDeployment)
	if err != nil {
		return err
	}
	if o.edgeAddress != "" {
		// A container restarted in a Pod that led must not draw edge
		// connections while it stands by.
		if err := edgehub.SetServing(ctx, clients.Kube, o.pod(), false); err != nil {
			logger.Error(err, "Cannot take the edge hub's serving label off this Pod; edge nodes may try this standby until it leads")
		}
	}

	// A GlobalManager that cannot do its work (its hub cannot listen, a
	// controller stopped) says so on /healthz, gives up the lease so that a
	// standby takes over, and exits non-zero with the reason.
	work := func(ctx context.Context) error {
		err := manager.Start(ctx, o.managerConfig(own), clients, kinds.All(), metrics, reg, &ready)
		if err != nil && ctx.Err() == nil {
			failed.Store(err.Error())
		}
		return err
	}
	if !o.leaderElect {
		leader.Set(1) // alone, it leads
		return work(ctx)
	}
	election := manager.Election{
		Namespace: o.leaseNamespace, Name: o.leaseName,
		LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod,
		ShutdownTimeout: o.shutdownGracePhase, WatchDog: electionChecker, Following: &following, Leader: leader,
	}
	if o.leaseNamespace == o.edgeNamespace {
		election.Owner = own
	}
	return election.Lead(ctx, clients.Kube, work)
}

// registerMetrics registers with reg the metrics the GlobalManager has from
// its start, leader or not (Go's, the process's, the build's, the
// controllers', whether it leads); the edge hub and the per-job gauges add
// theirs when it leads (manager.Start).
func registerMetrics(reg prometheus.Registerer) (*common.Metrics, prometheus.Gauge) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.BuildInfoCollector())
	return common.NewMetrics(reg), manager.NewLeaderGauge(reg)
}

// clients are the API clients of --kubeconfig.
func (o *options) clients() (manager.Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return manager.Clients{}, fmt.Errorf("loading kubeconfig %q: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	cfg.UserAgent = "nereid-globalmanager"
	// Responses uncompressed unless asked: next to the API server, gzip
	// spends its CPU (every watch event compressed apiece for this client)
	// to save bandwidth that is not short.
	cfg.DisableCompression = !o.apiCompression
	// Built-in kinds travel as protobuf, as they do for the controller-manager:
	// cheaper to encode and decode on both sides than JSON, and the API
	// server's watch cache encodes each pod event once per format, so a JSON
	// watcher among protobuf ones costs it a second encoding of every event.
	// Nereid's kinds are custom resources, which only speak JSON.
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.ContentType = runtime.ContentTypeProtobuf
	kubeCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	var c manager.Clients
	if c.Kube, err = kubernetes.NewForConfig(kubeCfg); err != nil {
		return c, fmt.Errorf("building kubernetes client: %w", err)
	}
	if c.Nereid, err = nereidclient.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("building Nereid's client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return c, fmt.Errorf("building dynamic client: %w", err)
	}
	return c, nil
}

// managerConfig is what the flags set for the whole GlobalManager.
func (o *options) managerConfig(own owner.Owner) manager.Config {
	mode, _ := gang.ParseMode(o.gangScheduler) // validated
	return manager.Config{
		Namespace: o.namespace,
		Worker: kinds.Worker{
			LocalController: common.LCAddress{Server: o.lcServer, Port: int32(o.lcPort)}, LogLevel: o.workerLogLevel, DataPathPrefix: o.dataPathPrefix,
		},
		ChildEventBatchPeriod: o.childBatchPeriod, EdgeNamespace: o.edgeNamespace, Owner: own,
		GangScheduler: mode, QuotaBackfill: o.quotaBackfill, MetricsMaxJobs: o.metricsMaxJobs, AdoptSednaWorkers: o.adoptSednaWorkers,
		Hub: edgehub.Config{
			Address: o.edgeAddress, CertFile: o.edgeCertFile, KeyFile: o.edgeKeyFile,
			Namespace: o.edgeNamespace, Hostnames: command.SplitList(o.edgeHostnames), CAOutFile: o.edgeCAOut, Pod: o.pod(), Owner: own,
			TokenAudience: o.edgeAudience, ServiceAccounts: o.edgeServiceAccounts(), DaemonSet: o.edgeDaemonSet, NodeSelector: o.hubNodeSelector(),
			ReviewEveryToken: o.edgeReviewAll, MaxRefusalsPerAddress: o.edgeRefusalsPerAddress(),
			MaxOutboxReports: o.edgeMaxOutbox,
			ReportWindow:     o.reportWindow, ReportWrites: o.reportWrites,
		},
	}
}
