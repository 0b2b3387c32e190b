// Command globalmanager is Nereid's cloud GlobalManager: one controller per
// sedna.io kind and one for DI-engine's DIJobs, run against a Kubernetes API
// server, leader-elected.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/internal/command"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/replicasapi"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/incrementallearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/jointinference"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/lifelonglearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/model"
	"github.com/nereid-ml/nereid/pkg/globalmanager/datasetstatus"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/selfcert"
)

func main() {
	fs := flag.NewFlagSet("globalmanager", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: globalmanager [flags]

The Nereid GlobalManager watches the sedna.io/v1alpha1 resources and DI-engine's
DIJobs (diengine.opendilab.org/v2alpha1) and runs one controller per kind: it creates the worker pods, Services, Deployments and
autoscalers each job or service needs, heals them, replaces them when the spec
changes, and reports progress in status and events. Of several replicas, the
one holding the leader election Lease acts.

Settings can also come from a YAML file of flag names and values (--config);
flags on the command line win.

Flags:
`)
		fs.PrintDefaults()
	}
	var o options
	o.addFlags(fs)
	configFile := fs.String("config", "", "YAML file of settings: flag names (without dashes) and values.")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag.
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
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %q: %w", o.kubeconfig, err)
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
	// sedna.io kinds are custom resources, which only speak JSON.
	kubeCfg := rest.CopyConfig(cfg)
	kubeCfg.ContentType = runtime.ContentTypeProtobuf
	kubeCfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kubeClient, err := kubernetes.NewForConfig(kubeCfg)
	if err != nil {
		return fmt.Errorf("building kubernetes client: %w", err)
	}
	sednaClient, err := sednaclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building sedna client: %w", err)
	}
	dynamicClient, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building dynamic client: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := common.NewMetrics(reg)
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
	owner, err := edgehub.FollowOwner(ctx, kubeClient, o.edgeNamespace, o.ownerDeployment)
	if err != nil {
		return err
	}
	if o.edgeAddress != "" {
		// A container restarted in a Pod that led must not draw edge
		// connections while it stands by.
		if err := edgehub.SetServing(ctx, kubeClient, o.pod(), false); err != nil {
			logger.Error(err, "Cannot take the edge hub's serving label off this Pod; edge nodes may try this standby until it leads")
		}
	}

	// A GlobalManager that cannot do its work (its hub cannot listen, a
	// controller stopped) says so on /healthz, gives up the lease so that a
	// standby takes over, and exits non-zero with the reason.
	var runErr error
	runControllers := func(ctx context.Context) error {
		err := startControllers(ctx, o, kubeClient, sednaClient, dynamicClient, owner, metrics, reg, &ready)
		if err != nil && ctx.Err() == nil {
			failed.Store(err.Error())
		}
		return err
	}
	if !o.leaderElect {
		return runControllers(ctx)
	}
	if o.leaseNamespace == o.edgeNamespace {
		if err := ownLeaderLease(ctx, kubeClient, o.leaseNamespace, o.leaseName, owner()); err != nil {
			return err
		}
	}
	host, _ := os.Hostname()
	id := host + "_" + uuid.NewString()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaseNamespace, o.leaseName,
		kubeClient.CoreV1(), kubeClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return fmt.Errorf("building leader election lock: %w", err)
	}
	electionCtx, stopElection := context.WithCancel(ctx)
	defer stopElection()
	var lost atomic.Bool
	// RunOrDie returns as soon as the lease is released, without waiting
	// for OnStartedLeading; led is closed once that has returned.
	led := make(chan struct{})
	var leading atomic.Bool
	leaderelection.RunOrDie(electionCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Name:            o.leaseName,
		WatchDog:        electionChecker,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				leading.Store(true)
				defer close(led)
				if err := runControllers(ctx); err != nil && ctx.Err() == nil {
					runErr = err
					logger.Error(err, "The GlobalManager cannot work; releasing the lease")
					stopElection() // RunOrDie releases the lease and returns
				}
			},
			OnStoppedLeading: func() {
				if electionCtx.Err() == nil {
					lost.Store(true)
				}
			},
			OnNewLeader: func(identity string) {
				if identity != id {
					following.Store(identity)
					logger.Info("Another replica leads", "leader", identity)
				} else {
					following.Store("")
				}
			},
		},
	})
	if leading.Load() {
		select {
		case <-led:
		case <-time.After(o.shutdownGracePhase):
			return fmt.Errorf("the controllers did not stop within --shutdown-timeout %s", o.shutdownGracePhase)
		}
	}
	switch {
	case runErr != nil:
		return runErr
	case lost.Load():
		// Another replica may be acting now; carrying on would make two.
		return errors.New("lost the leader election lease")
	}
	return nil
}

// startControllers builds the informers and controllers and runs them until
// ctx is done.
func startControllers(ctx context.Context, o options, kubeClient kubernetes.Interface, sednaClient sednaclient.Interface, dynamicClient dynamic.Interface,
	owner edgehub.Owner, metrics *common.Metrics, reg prometheus.Registerer, ready *atomic.Value) error {
	// One part failing (the hub's port taken, say) stops the others, the
	// informers included: a GlobalManager half running would hold the lease
	// and do half the job.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Only Nereid's children are cached: every one carries the owner-uid label.
	kubeFactory := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0,
		kubeinformers.WithNamespace(o.namespace),
		kubeinformers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = common.LabelOwnerUID }),
		kubeinformers.WithTransform(common.SlimChildren))
	sednaFactory := sednainformers.NewSharedInformerFactoryWithOptions(sednaClient, 0, sednainformers.WithNamespace(o.namespace),
		sednainformers.WithTransform(common.DropManagedFields))
	recorder := common.NewEventRecorder(ctx, kubeClient)
	v1 := sednaFactory.Sedna().V1alpha1()

	// Multi-pod jobs go to the gang scheduler the cluster serves.
	gangMode, _ := gang.ParseMode(o.gangScheduler)
	gangs, err := gang.NewManager(ctx, gang.Config{
		Mode: gangMode, Kube: kubeClient, Dynamic: dynamicClient, Discovery: kubeClient.Discovery(), Namespace: o.namespace,
	})
	if err != nil {
		return err
	}

	// Jobs are made whole or not at all under the namespace's quotas.
	admitter := admission.NewManager(admission.Config{Kube: kubeClient, Namespace: o.namespace, BackfillLimit: o.quotaBackfill})

	fl, err := federatedlearning.NewController(ctx, kubeClient, sednaClient,
		v1.FederatedLearningJobs(), v1.Models(), v1.Datasets(),
		kubeFactory.Core().V1().Pods(), kubeFactory.Core().V1().Services(),
		recorder, metrics, federatedlearning.Config{
			LocalController: common.LCAddress{Server: o.lcServer, Port: int32(o.lcPort)}, LogLevel: o.workerLogLevel, DataPathPrefix: o.dataPathPrefix,
			AggregationPort: int32(o.aggregationPort), ChildEventBatchPeriod: o.childBatchPeriod, Gangs: gangs,
			Admission: admitter,
		})
	if err != nil {
		return fmt.Errorf("building federated learning controller: %w", err)
	}
	ji, err := jointinference.NewController(ctx, kubeClient, sednaClient,
		v1.JointInferenceServices(), v1.Models(),
		kubeFactory.Apps().V1().Deployments(), kubeFactory.Core().V1().Services(),
		kubeFactory.Autoscaling().V2().HorizontalPodAutoscalers(),
		recorder, metrics, jointinference.Config{
			LocalController: common.LCAddress{Server: o.lcServer, Port: int32(o.lcPort)}, LogLevel: o.workerLogLevel, DataPathPrefix: o.dataPathPrefix,
			Admission: admitter,
		})
	if err != nil {
		return fmt.Errorf("building joint inference controller: %w", err)
	}
	cycleConfig := learningcycle.Config{
		LocalController: common.LCAddress{Server: o.lcServer, Port: int32(o.lcPort)}, LogLevel: o.workerLogLevel, DataPathPrefix: o.dataPathPrefix,
		StageAttempts: int32(o.stageAttempts), HistoryLimit: o.cycleHistoryLimit, ChildEventBatchPeriod: o.childBatchPeriod,
		Admission: admitter,
	}
	il, err := incrementallearning.NewController(ctx, kubeClient, sednaClient,
		v1.IncrementalLearningJobs(), v1.Models(), v1.Datasets(), kubeFactory.Core().V1().Pods(),
		recorder, metrics, cycleConfig)
	if err != nil {
		return fmt.Errorf("building incremental learning controller: %w", err)
	}
	ll, err := lifelonglearning.NewController(ctx, kubeClient, sednaClient,
		v1.LifelongLearningJobs(), v1.Models(), v1.Datasets(), kubeFactory.Core().V1().Pods(),
		recorder, metrics, lifelonglearning.Config{Config: cycleConfig, KBServer: o.kbServer})
	if err != nil {
		return fmt.Errorf("building lifelong learning controller: %w", err)
	}

	// DIJobs are run only where their CRD is installed: a cluster switched
	// from Sedna in place may have only sedna.io's.
	diServed, err := servesDIJobs(kubeClient)
	if err != nil {
		return err
	}
	if !diServed {
		logger := klog.FromContext(ctx)
		logger.Info("The API server does not serve DIJobs (diengine.opendilab.org/v2alpha1): no DIJob controller and no replicas API; install the CRD and restart to run them")
	}
	// The allocator must see every pod and node of the cluster, not only
	// Nereid's children: a cache of its own, of slimmed pods and nodes,
	// started by the first DIJob synced.
	var usageFactory kubeinformers.SharedInformerFactory
	var allocation *dijob.Allocation
	if diServed && o.allocatorPolicy != "none" {
		usageFactory = kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0, kubeinformers.WithTransform(allocator.Slim))
		nodes, pods := usageFactory.Core().V1().Nodes(), usageFactory.Core().V1().Pods()
		allocation = &dijob.Allocation{
			Policy: allocator.PackAndSpread{}, Nodes: nodes.Lister(), Pods: pods.Lister(), Period: o.allocatorPeriod,
			Start:  func() { usageFactory.Start(ctx.Done()) },
			Synced: []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced},
		}
	}
	// The replicas API's certificate comes before the pods that get its CA.
	var diTLS *tls.Config
	var diCA []byte
	if diServed && o.diServerAddress != "" {
		if diTLS, diCA, err = replicasAPITLS(ctx, o, kubeClient, owner); err != nil {
			return err
		}
	}
	var di *dijob.Controller
	if diServed {
		di, err = dijob.NewController(kubeClient, sednaClient, sednaFactory.Diengine().V2alpha1().DIJobs(),
			kubeFactory.Core().V1().Pods(), kubeFactory.Core().V1().Services(), recorder, metrics, dijob.Config{
				ServerURL: o.diServerURL, ServerTokenAudience: firstOf(command.SplitList(o.diServerAudiences)), ServerCA: diCA,
				ClusterDomain: o.clusterDomain, ChildEventBatchPeriod: o.childBatchPeriod,
				Allocation: allocation, EdgeLinkGrace: o.edgeLinkGrace, Gangs: gangs, Admission: admitter,
				Links: edgehub.Links{Client: kubeClient, Namespace: o.edgeNamespace},
			})
		if err != nil {
			return fmt.Errorf("building DIJob controller: %w", err)
		}
	}

	var replicasAPI *replicasapi.Server
	if diServed && o.diServerAddress != "" {
		pods, err := common.IndexChildren(kubeFactory.Core().V1().Pods().Informer())
		if err != nil {
			return fmt.Errorf("building the replicas API: %w", err)
		}
		replicasAPI = replicasapi.New(replicasapi.Config{
			Kube: kubeClient, DI: sednaClient, Jobs: sednaFactory.Diengine().V2alpha1().DIJobs().Lister(),
			Pods: pods[0], Audiences: command.SplitList(o.diServerAudiences), Registerer: reg,
		})
	}

	models, err := model.NewController(ctx, sednaClient, v1.Models(), v1.FederatedLearningJobs(),
		v1.JointInferenceServices(), v1.IncrementalLearningJobs(), recorder, metrics)
	if err != nil {
		return fmt.Errorf("building model protection controller: %w", err)
	}

	// The edge hub adds indexes to the informers, so it is built before they start.
	var hub *edgehub.Hub
	if o.edgeAddress != "" {
		hub, err = edgehub.New(ctx, kubeClient, sednaClient.SednaV1alpha1(), v1, edgehub.WorkerCaches{
			Pods: kubeFactory.Core().V1().Pods(), ReplicaSets: kubeFactory.Apps().V1().ReplicaSets(), Deployments: kubeFactory.Apps().V1().Deployments(),
		}, edgehub.Appliers{Workers: map[string]edgehub.ReportApplier{
			sednav1.FederatedLearningJobKind.Kind:   fl,
			sednav1.JointInferenceServiceKind.Kind:  ji,
			sednav1.IncrementalLearningJobKind.Kind: il,
			sednav1.LifelongLearningJobKind.Kind:    ll,
		}, Datasets: datasetstatus.NewApplier(sednaClient, recorder)}, recorder, reg, edgehub.Config{
			Address: o.edgeAddress, CertFile: o.edgeCertFile, KeyFile: o.edgeKeyFile,
			Namespace: o.edgeNamespace, Hostnames: command.SplitList(o.edgeHostnames), CAOutFile: o.edgeCAOut, Pod: o.pod(), Owner: owner,
			TokenAudience: o.edgeAudience, ServiceAccounts: o.edgeServiceAccounts(), DaemonSet: o.edgeDaemonSet, NodeSelector: o.hubNodeSelector(),
			ReviewEveryToken: o.edgeReviewAll, MaxRefusalsPerAddress: o.edgeRefusalsPerAddress(),
			ReportWindow: o.reportWindow, ReportWrites: o.reportWrites,
		})
		if err != nil {
			return fmt.Errorf("building the edge hub: %w", err)
		}
	}

	// With --adopt-sedna-workers, the children a Sedna GlobalManager left get
	// Nereid's labels before the caches fill, so the controllers see them and
	// replace them rather than make a second set of workers beside them.
	if o.adoptSednaWorkers {
		err = retry.OnError(retry.DefaultBackoff, func(error) bool { return ctx.Err() == nil }, func() error {
			n, failed, err := common.AdoptSednaChildren(ctx, kubeClient, o.namespace, []schema.GroupVersionKind{
				sednav1.FederatedLearningJobKind, sednav1.JointInferenceServiceKind,
				sednav1.IncrementalLearningJobKind, sednav1.LifelongLearningJobKind,
			})
			if n > 0 || failed > 0 {
				klog.FromContext(ctx).Info("Adopted the children of Sedna's GlobalManager; the controllers replace them", "count", n, "failed", failed)
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("adopting the children of Sedna's GlobalManager: %w", err)
		}
	}

	kubeFactory.Start(ctx.Done())
	sednaFactory.Start(ctx.Done())
	gangs.Start(ctx)
	defer gangs.Shutdown()
	admitter.Start(ctx)
	if usageFactory != nil {
		// Started by the DIJob controller when it first syncs a DIJob.
		defer usageFactory.Shutdown()
	}
	defer kubeFactory.Shutdown()
	defer sednaFactory.Shutdown()
	go func() {
		ready.Store("waiting for caches to sync")
		kubeFactory.WaitForCacheSync(ctx.Done())
		sednaFactory.WaitForCacheSync(ctx.Done())
		if hub != nil {
			ready.Store("waiting for the edge hub to listen")
			select {
			case <-hub.Listening():
			case <-ctx.Done():
			}
		}
		if ctx.Err() == nil {
			ready.Store("")
		}
	}()

	runs := []func() error{
		func() error { return fl.Run(ctx, o.flWorkers) },
		func() error { return ji.Run(ctx, o.jiWorkers) },
		func() error { return il.Run(ctx, o.ilWorkers) },
		func() error { return ll.Run(ctx, o.llWorkers) },
		func() error { return models.Run(ctx, 2) },
	}
	if hub != nil {
		runs = append(runs, func() error { return hub.Run(ctx) })
	}
	if di != nil {
		runs = append(runs, func() error { return di.Run(ctx, o.diWorkers) })
	}
	if replicasAPI != nil {
		runs = append(runs, func() error { return serveReplicasAPI(ctx, o, replicasAPI, diTLS) })
	}
	errs := make(chan error, len(runs))
	for _, r := range runs {
		go func() {
			err := r()
			if err != nil {
				cancel()
			}
			errs <- err
		}()
	}
	var all []error
	for range runs {
		all = append(all, <-errs)
	}
	err = errors.Join(all...)
	ready.Store("stopped")
	return err
}

// health is what /healthz and /readyz answer from.
type health struct {
	// ready is "" once the controllers act (caches synced, the edge hub
	// listening), else why not.
	ready *atomic.Value
	// failed is why the GlobalManager cannot work, "" while it can.
	failed *atomic.Value
	// following is the identity of the replica that leads while this one
	// stands by, "" otherwise.
	following *atomic.Value
	election  *leaderelection.HealthzAdaptor
	// profiling serves Go's profiles under /debug/pprof/.
	profiling bool
}

// serveHealth serves /healthz (the process and its lease are alive, and it
// has not failed), /readyz and /metrics. /readyz is "ok" once the
// controllers act (caches synced, the edge hub listening), and "ok: standby"
// for a replica that follows a leader: a standby is ready to take over, so
// that a PodDisruptionBudget lets either replica's node be drained; the hub's
// Service selects the leader by its label, not by readiness.
func serveHealth(ctx context.Context, addr string, reg *prometheus.Registry, h health) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if why := h.failed.Load().(string); why != "" {
			http.Error(w, "the GlobalManager cannot work: "+why, http.StatusInternalServerError)
			return
		}
		if err := h.election.Check(r); err != nil {
			http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		why := h.ready.Load().(string)
		if why == "" {
			fmt.Fprintln(w, "ok")
			return
		}
		if leader := h.following.Load().(string); leader != "" && h.failed.Load().(string) == "" {
			fmt.Fprintf(w, "ok: standby, %s leads\n", leader)
			return
		}
		http.Error(w, why, http.StatusServiceUnavailable)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if h.profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on --health-address %s: %w", addr, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Health server stopped")
		}
	}()
	klog.FromContext(ctx).Info("Serving health and metrics", "address", ln.Addr().String())
	return srv, nil
}

// ownLeaderLease creates the leader election Lease owned by owner, or adds
// owner to it: leader election keeps the metadata of the Lease it updates.
func ownLeaderLease(ctx context.Context, client kubernetes.Interface, namespace, name string, owner *metav1.OwnerReference) error {
	if owner == nil {
		return nil
	}
	leases := client.CoordinationV1().Leases(namespace)
	for range 5 {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
			edgehub.OwnedBy(&lease.ObjectMeta, owner)
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		} else if err == nil && edgehub.OwnedBy(&lease.ObjectMeta, owner) {
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("owning the leader election Lease %s/%s: %w", namespace, name, err)
		}
	}
	return fmt.Errorf("the leader election Lease %s/%s keeps changing", namespace, name)
}

// replicasAPITLS is the replicas API's TLS configuration and the CA DIJob
// pods verify it with: from --di-server-cert-file (no CA for the pods: the
// certificate's issuer is the operator's), from the Secret
// --di-server-tls-secret (made the first time), or nil for plain HTTP.
func replicasAPITLS(ctx context.Context, o options, client kubernetes.Interface, owner edgehub.Owner) (*tls.Config, []byte, error) {
	var cert tls.Certificate
	var ca []byte
	var err error
	switch {
	case o.diServerCert != "":
		if cert, err = tls.LoadX509KeyPair(o.diServerCert, o.diServerKey); err != nil {
			return nil, nil, fmt.Errorf("loading --di-server-cert-file: %w", err)
		}
	case o.diServerTLSSecret != "":
		u, _ := url.Parse(o.diServerURL) // validated
		cert, ca, err = selfcert.Secret{
			Client: client, Namespace: o.edgeNamespace, Name: o.diServerTLSSecret, Hostnames: []string{u.Hostname()}, Subject: "nereid-di-server",
			Own: func(m *metav1.ObjectMeta) bool { return edgehub.OwnedBy(m, owner()) },
		}.Certificate(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("the replicas API's certificate (--di-server-tls-secret): %w", err)
		}
	default:
		return nil, nil, nil
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ca, nil
}

// serveReplicasAPI serves the DIJob replicas HTTP API on --di-server-address
// until ctx is done, over HTTPS when tlsConfig is set.
func serveReplicasAPI(ctx context.Context, o options, api *replicasapi.Server, tlsConfig *tls.Config) error {
	ln, err := net.Listen("tcp", o.diServerAddress)
	if err != nil {
		return fmt.Errorf("listening on --di-server-address %s: %w", o.diServerAddress, err)
	}
	klog.FromContext(ctx).Info("Serving the DIJob replicas API", "address", ln.Addr().String(), "tls", tlsConfig != nil)
	return api.Serve(ctx, ln, tlsConfig)
}

func firstOf(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[0]
}

// servesDIJobs says whether the API server serves the DIJob resource.
func servesDIJobs(client kubernetes.Interface) (bool, error) {
	list, err := client.Discovery().ServerResourcesForGroupVersion(div2.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("discovering %s: %w", div2.SchemeGroupVersion, err)
	}
	for _, r := range list.APIResources {
		if r.Name == "dijobs" {
			return true, nil
		}
	}
	return false, nil
}
