// Package register puts DIJob in the GlobalManager's table of kinds: the
// controller, the allocator that places its replicas and the replicas API
// its workers call, built from the DIJob flags. It is apart from package
// dijob because the replicas API reads the controller's names and ranks.
package register

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/globalmanager/owner"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/internal/command"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/replicasapi"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	"github.com/nereid-ml/nereid/pkg/globalmanager/selfcert"
)

// flags are the GlobalManager's flags of DIJobs.
type flags struct {
	serverURL, serverAddress, serverCert, serverKey, serverTLSSecret, serverAudiences string
	clusterDomain, allocatorPolicy                                                    string
	edgeLinkGrace, allocatorPeriod                                                    time.Duration
	maxRefusals                                                                       int
	conversion                                                                        conversionFlags
	v1                                                                                v1ServerFlags
}

func (f *flags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.serverURL, "di-server-url", "",
		"DI_SERVER_URL put into every DIJob pod: where its workers reach the replicas HTTP API (the Service in front of --di-server-address). Empty leaves it unset.")
	fs.StringVar(&f.serverAddress, "di-server-address", "",
		"Address of the DIJob replicas HTTP API (DI-orchestrator's routes: GET/POST/DELETE /v2alpha1/job/<namespace>.<name>/replicas, POST .../profilings). "+
			"Callers present a ServiceAccount token: allowed when they may update the DIJob, or when the token is bound to a pod of the job. Empty serves no API.")
	fs.StringVar(&f.serverCert, "di-server-cert-file", "",
		"Serving certificate (PEM) of the replicas API; with --di-server-key-file it serves HTTPS. Empty serves plain HTTP: put it behind a network that carries tokens safely.")
	fs.StringVar(&f.serverKey, "di-server-key-file", "",
		"Private key of --di-server-cert-file (PEM).")
	fs.StringVar(&f.serverTLSSecret, "di-server-tls-secret", "",
		"Secret in --edge-namespace holding a serving certificate the GlobalManager makes itself for the replicas API, and its CA: generated the first time, "+
			"reissued from the same CA when it nears expiry or lacks the host of --di-server-url. The API then serves HTTPS, and every DIJob pod gets the CA "+
			"(the file DI_SERVER_CA_FILE names). --di-server-cert-file, when given, wins.")
	fs.StringVar(&f.serverAudiences, "di-server-token-audiences", "",
		"Comma-separated audiences a token presented to the replicas API must have (its TokenReview names them). Empty: the API server's own audience. "+
			"Every DIJob pod gets a token of its ServiceAccount for the first one, bound to the pod (the file DI_SERVER_TOKEN_FILE names).")
	fs.IntVar(&f.maxRefusals, "di-server-max-refusals-per-address", replicasapi.DefaultMaxRefusalsPerAddress,
		"Requests from one client address (an IPv6 address's /64) the replicas API and the v1 replicas server refuse for their token (401) within a minute "+
			"before they answer that address 429 with Retry-After for a minute, but for a token the API server's keys verify (reviewed as ever). "+
			"Either way, a token those keys do not verify (junk: not a JWT, another key, a made-up key ID) is refused without a TokenReview. "+
			"Behind a proxy that hides client addresses every client shares the proxy's: raise it, or set 0 for no limit.")
	fs.DurationVar(&f.edgeLinkGrace, "edge-link-grace", dijob.DefaultEdgeLinkGrace,
		"How long a DIJob replica on an edge node whose link is down (its Lease in --edge-namespace says so) is counted as running: a failed or unknown phase "+
			"seen meanwhile neither restarts the job nor counts it lost, and its pod tolerates the node's unreachable and not-ready taints that long before eviction.")
	fs.StringVar(&f.allocatorPolicy, "allocator", "pack-and-spread",
		"How DIJob replicas are placed: pack-and-spread (the GlobalManager places each new job whole or not at all, packing learners, evaluators and tasks of type none, "+
			"spreading collectors, edge nodes a pool of their own; it caches every Node and every Pod of the cluster, slimmed, to know what is free) "+
			"or none (the Kubernetes scheduler places each pod on its own).")
	fs.DurationVar(&f.allocatorPeriod, "allocator-period", time.Minute,
		"How often the allocator considers again the preemptible DIJobs (spec.preemptible) and moves those it can place strictly better.")
	fs.StringVar(&f.clusterDomain, "cluster-domain", "cluster.local",
		"The cluster's DNS domain: DIJob replicas find one another as <pod>.di-<job>.<namespace>.svc.<domain> (DI_NODES).")
	f.conversion.add(fs)
	f.v1.add(fs)
}

func (f *flags) validate() error {
	var errs []error
	if f.allocatorPolicy != "pack-and-spread" && f.allocatorPolicy != "none" {
		errs = append(errs, fmt.Errorf("--allocator %q: want pack-and-spread or none", f.allocatorPolicy))
	}
	if (f.serverCert == "") != (f.serverKey == "") {
		errs = append(errs, errors.New("--di-server-cert-file and --di-server-key-file go together"))
	}
	if f.serverTLSSecret != "" {
		if msgs := validation.IsDNS1123Subdomain(f.serverTLSSecret); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--di-server-tls-secret %q: %s", f.serverTLSSecret, strings.Join(msgs, "; ")))
		}
		if u, err := url.Parse(f.serverURL); f.serverCert == "" && (err != nil || u.Scheme != "https" || u.Hostname() == "") {
			errs = append(errs, fmt.Errorf("--di-server-tls-secret needs --di-server-url of the form https://<host>:<port> (its host goes into the certificate), not %q", f.serverURL))
		}
	}
	if f.maxRefusals < 0 {
		errs = append(errs, fmt.Errorf("--di-server-max-refusals-per-address %d: want 0 (no limit) or more", f.maxRefusals))
	}
	if f.edgeLinkGrace <= 0 {
		errs = append(errs, fmt.Errorf("--edge-link-grace %s: want a positive duration", f.edgeLinkGrace))
	}
	if f.allocatorPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--allocator-period %s: want a positive duration", f.allocatorPeriod))
	}
	errs = append(errs, f.conversion.validate()...)
	errs = append(errs, f.v1.validate()...)
	return errors.Join(errs...)
}

func init() {
	f := &flags{}
	kinds.Register(&kinds.Kind{
		GVK: div2.DIJobKind, Resource: "dijobs",
		Informer: func(inf nereidinformers.SharedInformerFactory) cache.SharedIndexInformer {
			return inf.Diengine().V2alpha1().DIJobs().Informer()
		},
		Progress: func(obj any) kinds.Progress {
			return kinds.Progress{Phase: string(obj.(*div2.DIJob).Status.Phase)}
		},
		// A cluster switched from Sedna in place may have only sedna.io's CRDs.
		Optional: true,
		Controller: &kinds.Controller{
			Workers:  16,
			AddFlags: f.add,
			Validate: f.validate,
			New:      f.build,
		},
	})
}

// runner runs the DIJob controller and, when asked, the replicas API and
// the CRD's conversion webhook.
type runner struct {
	controller *dijob.Controller
	api        *replicasapi.Server
	conversion *conversionWebhook
	// address and v1Address are where the replicas API and the v1 replicas
	// server listen; empty serves none.
	address, v1Address string
	tls                *tls.Config
	// usage is the allocator's cache of every pod and node, started by the
	// first DIJob synced.
	usage kubeinformers.SharedInformerFactory
	// leases caches the link Leases of the edge namespace.
	leases kubeinformers.SharedInformerFactory
}

// build builds the controller, its allocator and the replicas API from the
// flags.
func (f *flags) build(ctx context.Context, d kinds.Deps) (kinds.Runner, error) {
	r := &runner{address: f.serverAddress, v1Address: f.v1.address}
	cfg := dijob.Config{
		ServerURL: f.serverURL, ServerTokenAudience: firstOf(command.SplitList(f.serverAudiences)), V1ServerURL: f.v1.url,
		ClusterDomain: f.clusterDomain, EdgeLinkGrace: f.edgeLinkGrace,
		Links: links.Reader{Client: d.Kube, Namespace: d.EdgeNamespace},
	}
	// A cache of the link Leases, read at every sync and watched so that a
	// job hears at once that an edge node's link went down or came back;
	// started by the first DIJob synced: every Lease renewal of the fleet
	// comes to it. It keeps only the link Leases, without managedFields.
	if d.EdgeNamespace != "" {
		r.leases = kubeinformers.NewSharedInformerFactoryWithOptions(d.Kube, 0, kubeinformers.WithNamespace(d.EdgeNamespace),
			kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = links.LabelEdgeNode }),
			kubeinformers.WithTransform(common.DropManagedFields))
		leases := r.leases.Coordination().V1().Leases()
		cfg.Links = links.Lister{Leases: leases.Lister(), Namespace: d.EdgeNamespace}
		cfg.LinkLeases = leases.Informer()
		cfg.StartLinkLeases = func() { r.leases.Start(ctx.Done()) }
	}
	// The allocator must see every pod and node of the cluster, not only
	// Nereid's children: a cache of its own, of slimmed pods and nodes,
	// started by the first DIJob synced.
	if f.allocatorPolicy != "none" {
		r.usage = kubeinformers.NewSharedInformerFactoryWithOptions(d.Kube, 0, kubeinformers.WithTransform(allocator.Slim))
		nodes, pods := r.usage.Core().V1().Nodes(), r.usage.Core().V1().Pods()
		cfg.Allocation = &dijob.Allocation{
			Policy: allocator.PackAndSpread{}, Nodes: nodes.Lister(), Pods: pods.Lister(), Period: f.allocatorPeriod,
			Start:  func() { r.usage.Start(ctx.Done()) },
			Synced: []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced},
		}
	}
	// The replicas API's certificate comes before the pods that get its CA.
	if f.serverAddress != "" {
		var err error
		if r.tls, cfg.ServerCA, err = f.serverTLS(ctx, d); err != nil {
			return nil, err
		}
	}
	var err error
	if r.conversion, err = f.conversion.build(ctx, d); err != nil {
		return nil, err
	}
	if r.controller, err = dijob.NewController(d, cfg); err != nil {
		return nil, fmt.Errorf("building the DIJob controller: %w", err)
	}
	// The v1 server shares the replicas API's reviews, caches and bounds.
	if f.serverAddress != "" || f.v1.address != "" {
		pods, err := common.IndexChildren(d.KubeInformers.Core().V1().Pods().Informer())
		if err != nil {
			return nil, fmt.Errorf("building the replicas API: %w", err)
		}
		v1 := f.v1.config(d, f.edgeLinkGrace)
		if f.v1.address != "" && r.usage != nil {
			v1.GPUs = r.gpuPlacer(d)
		}
		r.api = replicasapi.New(replicasapi.Config{
			Kube: d.Kube, DI: d.Client, Jobs: d.Informers.Diengine().V2alpha1().DIJobs().Lister(),
			Pods: pods[0], Audiences: command.SplitList(f.serverAudiences), Registerer: d.Registerer, Clock: d.Clock,
			Recorder: d.Recorder, MaxRefusalsPerAddress: f.refusalsPerAddress(),
			V1: v1,
		})
	}
	return r, nil
}

// refusalsPerAddress is --di-server-max-refusals-per-address as
// replicasapi.Config takes it: 0 there is the default, no limit is negative.
func (f *flags) refusalsPerAddress() int {
	if f.maxRefusals == 0 {
		return -1
	}
	return f.maxRefusals
}

// Run runs the controller, the replicas API, the v1 replicas server and the conversion webhook
// until ctx is done or one of them fails.
func (r *runner) Run(ctx context.Context, workers int) error {
	if r.usage != nil {
		defer r.usage.Shutdown()
	}
	if r.leases != nil {
		defer r.leases.Shutdown()
	}
	if r.usage != nil && r.v1Address != "" {
		// Learners of more than one GPU are placed from it: the v1
		// server asks before any job is synced.
		r.usage.Start(ctx.Done())
	}
	var servers []func(context.Context) error
	if r.address != "" {
		servers = append(servers, r.serve)
	}
	if r.v1Address != "" {
		servers = append(servers, r.serveV1)
	}
	if r.conversion != nil {
		servers = append(servers, r.conversion.run)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, len(servers))
	for _, serve := range servers {
		go func() {
			err := serve(ctx)
			cancel()
			served <- err
		}()
	}
	err := r.controller.Run(ctx, workers)
	cancel()
	for range servers {
		err = errors.Join(err, <-served)
	}
	return err
}

// serve serves the replicas API on --di-server-address until ctx is done,
// over HTTPS when r.tls is set.
func (r *runner) serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", r.address)
	if err != nil {
		return fmt.Errorf("listening on --di-server-address %s: %w", r.address, err)
	}
	klog.FromContext(ctx).Info("Serving the DIJob replicas API", "address", ln.Addr().String(), "tls", r.tls != nil)
	return r.api.Serve(ctx, ln, r.tls)
}

// serverTLS is the replicas API's TLS configuration and the CA DIJob pods
// verify it with: from --di-server-cert-file (no CA for the pods: the
// certificate's issuer is the operator's), from the Secret
// --di-server-tls-secret (made the first time), or nil for plain HTTP.
func (f *flags) serverTLS(ctx context.Context, d kinds.Deps) (*tls.Config, []byte, error) {
	var cert tls.Certificate
	var ca []byte
	var err error
	switch {
	case f.serverCert != "":
		if cert, err = tls.LoadX509KeyPair(f.serverCert, f.serverKey); err != nil {
			return nil, nil, fmt.Errorf("loading --di-server-cert-file: %w", err)
		}
	case f.serverTLSSecret != "":
		u, _ := url.Parse(f.serverURL) // validated
		cert, ca, err = selfcert.Secret{
			Client: d.Kube, Namespace: d.EdgeNamespace, Name: f.serverTLSSecret, Hostnames: []string{u.Hostname()}, Subject: "nereid-di-server",
			Own: func(m *metav1.ObjectMeta) bool { return owner.OwnedBy(m, d.Owner()) },
		}.Certificate(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("the replicas API's certificate (--di-server-tls-secret): %w", err)
		}
	default:
		return nil, nil, nil
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ca, nil
}

func firstOf(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[0]
}

// gpuPlacer places the GPUs of DDP learners from the allocator's cache of
// every node and pod, which Run starts when the v1 server is served.
func (r *runner) gpuPlacer(d kinds.Deps) *allocator.GPUPlacer {
	nodes, pods := r.usage.Core().V1().Nodes(), r.usage.Core().V1().Pods()
	return &allocator.GPUPlacer{
		Nodes: nodes.Lister(), Pods: pods.Lister(), Clock: d.ClockOrReal(),
		Synced: []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced},
	}
}
