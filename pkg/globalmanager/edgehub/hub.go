package edgehub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/boundedmap"
	nereidclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	nereidinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/certs"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
	"github.com/nereid-ml/nereid/pkg/globalmanager/owner"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// shutdownTimeout bounds how long Run waits for connections to close and the
// last Lease writes once its context is done.
const shutdownTimeout = 5 * time.Second

// Hub is the GlobalManager's edge hub.
type Hub struct {
	client kubernetes.Interface
	// kinds are the kinds of object the hub sends, byName by API kind.
	kinds  []*kind
	byName map[string]*kind
	// sets compute each node's desired set (package desired), from the
	// kinds' informers and the GlobalManager's worker pods.
	sets   *desired.Sets
	synced []cache.InformerSynced
	// auth says who may connect, and watches what admitted them (package
	// auth); the hub runs its informers itself.
	auth     *auth.Authenticator
	appliers map[string]reports.ReportApplier
	datasets reports.DatasetApplier
	recorder record.EventRecorder
	metrics  *metrics
	cfg      Config
	links    *links.Writer
	// turns bound the lanes of reports applying at once (package reports).
	turns *reports.Turns
	// confirmer has the tokens the hub accepted itself reviewed after the
	// fact (auth/confirm.go).
	confirmer *auth.Confirmer
	// conditions writes the EdgeSynced condition of objects that cannot be
	// sent.
	conditions *conditionWriter
	// addresses count the refusals by client address (auth/addresslimit.go),
	// refusals logs them at a bounded rate (auth/refusallog.go).
	addresses *tokenreview.AddressLimiter
	refusals  *auth.RefusalLog
	upgrader  websocket.Upgrader
	// reachChanged says something the reach scan reads changed since it
	// last ran (reachSaw).
	reachChanged atomic.Bool

	mu       sync.RWMutex
	sessions map[string]*session // by node
	// greeting are the connections reading their Hello, by node: one a
	// node, the newest (a Hello's inventory may hold tens of MiB).
	greeting map[string]*websocket.Conn
	// connects pace each node's connections (connectAllowed).
	connectsMu sync.Mutex
	connects   map[string]*rate.Limiter
	closing    bool
	conns      sync.WaitGroup // connection handlers

	// clock is Config's: every time the hub reads and every timer it sets
	// but the connections' deadlines, which are instants of the wall clock
	// the network keeps.
	clock clock.WithTickerAndDelayedExecution

	// Test seams.
	ready chan struct{} // closed once Run listens, at addr
	addr  net.Addr
}

// WorkerCaches are the caches of the GlobalManager's children the hub finds
// worker pods in: its pods (which carry the owner-uid label), and the
// ReplicaSets and Deployments between a service and its pods. Without
// ReplicaSets or Deployments, only pods an object controls itself are its
// workers.
type WorkerCaches struct {
	Pods        coreinformers.PodInformer
	ReplicaSets appsinformers.ReplicaSetInformer
	Deployments appsinformers.DeploymentInformer
}

// Deps are what the hub is built from.
type Deps struct {
	// Kube reviews tokens, reads Nodes, Pods, ServiceAccounts and the
	// DaemonSet, and writes the Leases, Secret and ConfigMap of
	// Config.Namespace.
	Kube kubernetes.Interface
	// Client writes the EdgeSynced condition of an object that cannot be
	// sent to a node.
	Client nereidclient.Interface
	// Informers caches Nereid's kinds; the hub sends those of Kinds that
	// travel to the edge.
	Informers nereidinformers.SharedInformerFactory
	Kinds     []*kinds.Kind
	// Workers are the caches of the GlobalManager's children.
	Workers WorkerCaches
	// Appliers take the reports (see reports.Appliers).
	Appliers reports.Appliers
	// Recorder takes the events about objects (one that cannot be sent to
	// a node).
	Recorder record.EventRecorder
	// Registerer, when not nil, takes the hub's metrics.
	Registerer prometheus.Registerer
	Config     Config
}

// WorkerCachesOf are the worker caches of factory, which caches the
// GlobalManager's children.
func WorkerCachesOf(factory kubeinformers.SharedInformerFactory) WorkerCaches {
	return WorkerCaches{Pods: factory.Core().V1().Pods(), ReplicaSets: factory.Apps().V1().ReplicaSets(), Deployments: factory.Apps().V1().Deployments()}
}

// New wires the hub to d.Informers for the kinds of d.Kinds that travel to
// the edge, and to the caches of the GlobalManager's children (workers); it
// adds its indexes and event handlers, so it must be called before the
// factories start, and starts nothing.
func New(ctx context.Context, d Deps) (*Hub, error) {
	cfg, reg, workers := d.Config.withDefaults(), d.Registerer, d.Workers
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("edge hub configuration: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering edge hub metrics: %w", err)
	}
	h := newHub(d.Kube, edgeKinds(d.Kinds, d.Client, d.Informers), workers.Pods.Informer(), d.Appliers, d.Recorder, m, cfg)
	if err := h.sets.AddIndexers(); err != nil {
		return nil, err
	}
	if err := h.auth.Watch(auth.Hooks{PodGone: h.podGone, PodControllerChanged: h.podControllerChanged,
		ServiceAccountChanged: h.serviceAccountChanged, NodeLeft: h.nodeLeft, NodeJoined: func(string) { h.reachSaw() },
		DaemonSetChanged: h.daemonSetChanged}); err != nil {
		return nil, err
	}
	if err := h.auth.RegisterKeysGauge(reg); err != nil {
		return nil, err
	}
	if reg != nil {
		if err := reg.Register(fleetCollector{links: h.links, clock: h.clock}); err != nil {
			return nil, fmt.Errorf("registering the edge fleet's gauges: %w", err)
		}
	}
	if err := h.watchKinds(); err != nil {
		return nil, err
	}
	if err := h.watchWorkerPods(); err != nil {
		return nil, err
	}
	if err := h.followWorkerChain(workers); err != nil {
		return nil, err
	}
	return h, nil
}

// newHub is a hub and its parts, watching nothing yet.
func newHub(kubeClient kubernetes.Interface, edgeKinds []*kind, pods cache.SharedIndexInformer, appliers reports.Appliers,
	recorder record.EventRecorder, m *metrics, cfg Config) *Hub {
	h := &Hub{
		client:   kubeClient,
		kinds:    edgeKinds,
		byName:   make(map[string]*kind),
		appliers: make(map[string]reports.ReportApplier, len(appliers.Workers)),
		datasets: appliers.Datasets,
		recorder: recorder,
		metrics:  m,
		cfg:      cfg,
		turns:    reports.NewTurns(cfg.ReportWrites, m.lanesWaiting),
		// A connection holds a write buffer only while it writes (most of
		// thousands of connections are idle at any time), and a small read
		// buffer of its own rather than the HTTP server's 4 KiB: TLS
		// buffers a record below it anyway.
		upgrader: websocket.Upgrader{HandshakeTimeout: cfg.ReadTimeout, ReadBufferSize: 1024, WriteBufferPool: &sync.Pool{}},
		sessions: make(map[string]*session),
		greeting: make(map[string]*websocket.Conn),
		connects: make(map[string]*rate.Limiter),
		clock:    cfg.clock,
		ready:    make(chan struct{}),
	}
	sent := make([]*desired.Kind, 0, len(h.kinds))
	for _, k := range h.kinds {
		h.byName[k.Name] = k
		sent = append(sent, k.Kind)
	}
	h.sets = desired.NewSets(sent, pods)
	for kind, a := range appliers.Workers {
		if a != nil {
			h.appliers[kind] = a
		}
	}
	h.conditions = newConditionWriter(h)
	h.addresses = tokenreview.NewAddressLimiter(cfg.MaxRefusalsPerAddress, h.clock)
	h.refusals = auth.NewRefusalLog(h.clock)
	h.links = links.New(links.Config{Client: kubeClient, Namespace: cfg.Namespace, Period: cfg.LeaseUpdatePeriod, Rate: cfg.LeaseWriteRate,
		Grace: cfg.ReadTimeout, Clock: h.clock, Own: func(m *metav1.ObjectMeta) bool { return owner.OwnedBy(m, cfg.Owner.Ref()) },
		Changed: h.reachSaw})
	h.auth = auth.New(cfg.authConfig(kubeClient, m))
	h.confirmer = auth.NewConfirmer(h.auth, func(result string) { m.tokensConfirmed.WithLabelValues(result).Inc() }, h.clock)
	return h
}

// watchKinds marks dirty the nodes an object of a kind the hub sends was or
// is for, as it comes, changes on the edge's side, or goes.
func (h *Hub) watchKinds() error {
	for _, k := range h.kinds {
		reg, err := k.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				h.markDirty(h.sets.AffectedNodes(k.Kind, obj))
				h.reachSawKind(k)
			},
			UpdateFunc: func(oldObj, newObj any) {
				if reachSees(k, oldObj, newObj) {
					h.reachSaw()
				}
				if h.sets.Digests().SameOnEdge(k.Kind, oldObj, newObj) {
					return // a status write: nothing the edge uses changed
				}
				h.markDirty(append(h.sets.AffectedNodes(k.Kind, oldObj), h.sets.AffectedNodes(k.Kind, newObj)...))
			},
			DeleteFunc: func(obj any) {
				h.sets.Digests().Forget(obj)
				h.markDirty(h.sets.AffectedNodes(k.Kind, obj))
				h.reachSawKind(k)
			},
		})
		if err != nil {
			return fmt.Errorf("adding edge hub event handler: %w", err)
		}
		h.synced = append(h.synced, k.Informer.HasSynced, reg.HasSynced)
	}
	return nil
}

// watchWorkerPods marks dirty the nodes of a worker pod that is bound to a
// node, or leaves it: that changes what the node's LocalController is sent,
// its owner and its workers' names.
func (h *Hub) watchWorkerPods() error {
	pods := h.sets.Pods()
	reg, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			h.markDirty(desired.PodNodes(nil, obj))
			h.reachSaw()
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
			if o.Spec.NodeName != n.Spec.NodeName || o.Labels[common.LabelOwnerUID] != n.Labels[common.LabelOwnerUID] ||
				!sameController(o, n) || !slices.Equal(desired.WorkerIPs(o), desired.WorkerIPs(n)) {
				h.markDirty(desired.PodNodes(oldObj, newObj))
				h.reachSaw()
			} else if desired.Finished(o) != desired.Finished(n) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
				h.reachSaw()
			}
		},
		DeleteFunc: func(obj any) {
			h.markDirty(desired.PodNodes(nil, obj))
			h.reachSaw()
		},
	})
	if err != nil {
		return fmt.Errorf("adding edge hub pod handler: %w", err)
	}
	h.synced = append(h.synced, pods.HasSynced, reg.HasSynced)
	return nil
}

// followWorkerChain caches the ReplicaSets and Deployments of workers for
// IsWorkerPod, and marks the nodes of a ReplicaSet's pods dirty when it
// comes, goes or changes controller: a pod seen before its ReplicaSet is
// taken for a worker only then.
func (h *Hub) followWorkerChain(workers WorkerCaches) error {
	if workers.ReplicaSets != nil {
		inf := workers.ReplicaSets.Informer()
		if err := h.watchChainLink(inf); err != nil {
			return err
		}
		h.sets.FollowReplicaSets(inf.GetIndexer())
	}
	if workers.Deployments != nil {
		inf := workers.Deployments.Informer()
		if err := h.watchChainLink(inf); err != nil {
			return err
		}
		h.sets.FollowDeployments(inf.GetIndexer())
	}
	return nil
}

// watchChainLink marks dirty the nodes whose workers an object of inf may
// make or unmake, as it comes, goes or changes controller.
func (h *Hub) watchChainLink(inf cache.SharedIndexInformer) error {
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			h.markDirty(h.chainNodes(obj))
			h.reachSaw()
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := oldObj.(metav1.Object), newObj.(metav1.Object)
			if !sameController(o, n) {
				h.markDirty(h.chainNodes(newObj))
				h.reachSaw()
			}
		},
		DeleteFunc: func(obj any) {
			h.markDirty(h.chainNodes(obj))
			h.reachSaw()
		},
	})
	if err != nil {
		return fmt.Errorf("adding edge hub worker chain handler: %w", err)
	}
	h.synced = append(h.synced, inf.HasSynced, reg.HasSynced)
	return nil
}

// sameController says whether o and n have the same controller reference.
func sameController(o, n metav1.Object) bool {
	a, b := metav1.GetControllerOfNoCopy(o), metav1.GetControllerOfNoCopy(n)
	return (a == nil && b == nil) || (a != nil && b != nil && a.UID == b.UID)
}

// chainNodes are the nodes of the pods that carry the owner-uid label of
// obj (a ReplicaSet or Deployment, or its tombstone): those whose workers it
// may make or unmake.
func (h *Hub) chainNodes(obj any) []string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok || o.GetLabels()[common.LabelOwnerUID] == "" {
		return nil
	}
	owner := &metav1.ObjectMeta{Namespace: o.GetNamespace(), UID: types.UID(o.GetLabels()[common.LabelOwnerUID])}
	pods, _ := common.ListOwned[*corev1.Pod](h.sets.Pods().GetIndexer(), owner) // the index is the hub's own (Sets.AddIndexers)
	var nodes []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && !desired.Contains(nodes, p.Spec.NodeName) {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	return nodes
}

// podGone ends the connections of a deleted LocalController Pod: its token
// no longer proves anything.
func (h *Hub) podGone(uid types.UID) {
	var gone []*session
	h.mu.RLock()
	for _, s := range h.sessions {
		if s.id.PodUID == uid {
			gone = append(gone, s)
		}
	}
	h.mu.RUnlock()
	// Closing writes to the connection: not under the lock the informers'
	// handlers take.
	for _, s := range gone {
		s.revokePodDeleted()
	}
}

// markDirty tells the connected ones of nodes that their set may have changed.
func (h *Hub) markDirty(nodes []string) {
	if len(nodes) == 0 {
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, n := range nodes {
		if s := h.sessions[n]; s != nil {
			s.markDirty()
		}
	}
}

// Listening is closed once Run listens for LocalControllers.
func (h *Hub) Listening() <-chan struct{} { return h.ready }

// Run waits for the caches, then serves LocalControllers over HTTPS at
// Config.Address until ctx is done, when it closes every connection with a
// close frame and writes the nodes' links as disconnected.
func (h *Hub) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("edgehub")
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Waiting for caches to sync")
	synced := h.startCaches(ctx)
	h.startAuthLoops(ctx)
	prepared := h.prepare(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("edge hub caches did not sync")
	}
	p := <-prepared
	if p.err != nil {
		return p.err
	}
	ln, srv, err := h.listen(ctx, p.cert)
	if err != nil {
		return err
	}

	go h.conditions.run(ctx)
	go h.runReach(ctx)
	go h.refusals.Run(ctx)
	leasesCtx, stopLeases := context.WithCancel(ctx)
	leasesDone := make(chan struct{})
	go func() {
		defer close(leasesDone)
		h.links.Run(leasesCtx)
	}()

	labeled, err := h.serve(ctx, ln, srv)

	// Shut down: no new connections, close the live ones, write their
	// Leases one last time.
	stopLeases()
	<-leasesDone
	h.shutdown(ctx, srv, labeled)
	logger.Info("Edge hub stopped")
	return err
}

// startCaches starts the caches the hub runs itself (the authenticator's,
// and the reads of the issuer's keys) and returns those Run waits for.
func (h *Hub) startCaches(ctx context.Context) []cache.InformerSynced {
	return append(append([]cache.InformerSynced(nil), h.synced...), h.auth.Start(ctx)...)
}

// startAuthLoops starts what keeps the authentication current: the
// confirmation of tokens the hub accepted itself, and the rechecks of open
// connections.
func (h *Hub) startAuthLoops(ctx context.Context) {
	go h.confirmer.Run(ctx) // idle while every token is reviewed
	go h.runRechecks(ctx)
}

// preparedHub is what the hub reads before it listens, besides its caches.
type preparedHub struct {
	cert tls.Certificate
	err  error
}

// prepare reads, while the caches fill, what earlier hubs recorded of every
// node (one read, for the first Hellos: links.Writer.Recorded) and the
// serving certificate. A restarted GlobalManager listens that much sooner.
func (h *Hub) prepare(ctx context.Context) <-chan preparedHub {
	out := make(chan preparedHub, 1)
	go func() {
		if err := h.links.Prime(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Each node's Lease will be read when it connects")
		}
		cert, err := certs.Serving(ctx, h.cfg.certsConfig(h.client))
		out <- preparedHub{cert: cert, err: err}
	}()
	return out
}

// listen listens at Config.Address with cert, closes h.ready, and returns
// the server that is to serve it.
func (h *Hub) listen(ctx context.Context, cert tls.Certificate) (net.Listener, *http.Server, error) {
	ln, err := net.Listen("tcp", h.cfg.Address)
	if err != nil {
		return nil, nil, fmt.Errorf("edge hub listening: %w", err)
	}
	h.addr = ln.Addr()
	close(h.ready)
	srv := &http.Server{
		Handler: h.handler(ctx),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"http/1.1"}, // websockets upgrade HTTP/1.1
		},
		ReadHeaderTimeout: 10 * time.Second,
		// A client refused before its upgrade may keep its connection
		// for another request, but not idle for ever.
		IdleTimeout:    httpIdleTimeout,
		MaxHeaderBytes: 32 << 10,
		ErrorLog:       klog.NewStandardLogger("WARNING"),
		BaseContext:    func(net.Listener) context.Context { return ctx },
	}
	return ln, srv, nil
}

// serve serves ln with srv, and labels the GlobalManager's Pod as serving,
// until ctx is done or serving fails. It says whether the label was set.
func (h *Hub) serve(ctx context.Context, ln net.Listener, srv *http.Server) (labeled bool, err error) {
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	klog.FromContext(ctx).Info("Serving edge connections", "address", h.addr.String(), "path", ConnectPath)
	// Only now may the hub's Service send edge nodes here.
	labeledErr := make(chan error, 1)
	go func() { labeledErr <- SetServing(ctx, h.client, h.cfg.Pod, true) }()
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			err, waiting = nil, false
		case err = <-served:
			err, waiting = fmt.Errorf("edge hub serving: %w", err), false
		case err = <-labeledErr:
			labeledErr, labeled, waiting = nil, err == nil, err == nil
		}
	}
	return labeled, err
}

// shutdown closes the live connections, stops srv, writes the Leases that
// changed, and, when labeled, takes the serving label off the
// GlobalManager's Pod.
func (h *Hub) shutdown(ctx context.Context, srv *http.Server, labeled bool) {
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	h.mu.Lock()
	h.closing = true
	live := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		live = append(live, s)
	}
	h.mu.Unlock()
	// At once: a stop may wait for its close frame to be written, up to
	// closeGrace, to a node that does not read.
	var stopping sync.WaitGroup
	for _, s := range live {
		stopping.Go(func() { s.stop(websocket.CloseGoingAway, "the GlobalManager is shutting down") })
	}
	stopping.Wait()
	_ = srv.Shutdown(shutdownCtx) // hijacked connections are not its
	h.conns.Wait()
	h.links.WriteDue(shutdownCtx, true)
	if labeled {
		if uerr := SetServing(shutdownCtx, h.client, h.cfg.Pod, false); uerr != nil {
			klog.FromContext(ctx).Error(uerr, "Cannot take the serving label off the GlobalManager's Pod; it is taken off when it starts again")
		}
	}
}

// handler serves ConnectPath; the sessions it starts live in ctx.
func (h *Hub) handler(ctx context.Context) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(ConnectPath, func(w http.ResponseWriter, r *http.Request) {
		h.serveConnect(ctx, w, r)
	})
	return mux
}

// serveConnect authenticates a LocalController, upgrades its connection, and
// starts the goroutine that serves it until it ends.
func (h *Hub) serveConnect(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(ctx).WithValues("remote", r.RemoteAddr)
	if !websocket.IsWebSocketUpgrade(r) {
		http.Error(w, "this endpoint takes websocket connections only", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		h.refuse(ctx, r, &auth.Refusal{Status: http.StatusServiceUnavailable, Metric: auth.RefusedShuttingDown, Reason: "the GlobalManager is shutting down"}, w)
		return
	}
	h.conns.Add(1)
	h.mu.Unlock()
	handedOn := false
	defer func() {
		if !handedOn {
			h.conns.Done()
		}
	}()

	// An address that sent bad tokens in a loop is refused, but for a token
	// the hub verifies itself: a LocalController behind the same address (a
	// NAT, its own node) still connects, and junk costs no review.
	var blocked *auth.Refusal
	if after, ok := h.addresses.Blocked(r.RemoteAddr); ok {
		blocked = &auth.Refusal{Status: http.StatusTooManyRequests, Metric: auth.RefusedTooManyRefusals, RetryAfter: after,
			Reason: fmt.Sprintf("too many connections from this address were refused for their token (more than %d a minute); "+
				"only a LocalController token the hub verifies itself is taken from it now; try again in %ds", h.cfg.MaxRefusalsPerAddress, after)}
	}
	id, aerr := h.auth.Authenticate(r.Context(), r, blocked)
	if aerr != nil {
		if aerr.Cacheable() && blocked == nil {
			h.addresses.Refused(r.RemoteAddr)
		}
		h.refuse(ctx, r, aerr, w)
		return
	}
	node := id.Node
	logger = logger.WithValues("node", node, "pod", id.Pod.String())
	if after, ok := h.connectAllowed(node); !ok {
		// Each connection costs a Lease write and its hello's difference:
		// a node connecting in a loop must not cost more than its share.
		h.refuse(ctx, r, &auth.Refusal{Status: http.StatusTooManyRequests, Metric: auth.RefusedTooOften, RetryAfter: after,
			Reason: fmt.Sprintf("node %s connects too often: at most %d connections at once, then one every %s", node, connectBurst, connectEvery)}, w)
		return
	}
	conn, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		logger.Info("Upgrading an edge connection failed", "err", err)
		return // the upgrader has answered
	}
	conn.SetReadLimit(edgeproto.MaxFrameBytes)
	// The connection is served by a goroutine of its own, and the handler
	// returns: the HTTP server then lets go of what it holds for a request
	// (its buffers, the request and its headers, a stack grown by the TLS
	// handshake), which thousands of long-lived connections would keep.
	handedOn = true
	token := auth.BearerToken(r) // checked again while the connection lasts (recheck.go)
	go func() {
		defer h.conns.Done()
		h.serveConn(ctx, logger, id, token, conn)
	}()
}

// refuse answers r with the refusal, counts it and logs it, at a bounded
// rate (auth/refusallog.go).
func (h *Hub) refuse(ctx context.Context, r *http.Request, aerr *auth.Refusal, w http.ResponseWriter) {
	h.metrics.refuse(aerr.Metric)
	h.refusals.Refused(klog.FromContext(ctx), aerr.Metric, auth.RefusedConn{Remote: r.RemoteAddr, Status: aerr.Status, Reason: aerr.Reason, Err: aerr.Err})
	if aerr.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nereid-edgehub"`)
	}
	if aerr.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(aerr.RetryAfter))
	}
	http.Error(w, aerr.Reason, aerr.Status)
}

// A node may connect connectBurst times at once, then once every
// connectEvery: a LocalController reconnects with backoff, and a node that
// connects more often (its token stolen, or its LocalController broken)
// is told when to come back.
const (
	connectBurst = 10
	connectEvery = time.Second
)

// maxPacedNodes bounds the nodes whose connections are paced at once; a
// node whose pace is back to its full burst is forgotten first.
const maxPacedNodes = 100_000

// connectAllowed says whether node may connect now, or in how many seconds
// it may.
func (h *Hub) connectAllowed(node string) (after int, ok bool) {
	h.connectsMu.Lock()
	defer h.connectsMu.Unlock()
	now := h.clock.Now()
	lim := h.connects[node]
	if lim == nil {
		boundedmap.MakeRoom(h.connects, maxPacedNodes, func(l *rate.Limiter) bool { return l.TokensAt(now) >= connectBurst })
		lim = rate.NewLimiter(rate.Every(connectEvery), connectBurst)
		h.connects[node] = lim
	}
	r := lim.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay == 0 {
		return 0, true
	}
	r.CancelAt(now) // told to come back, it takes nothing now
	return int(math.Ceil(delay.Seconds())), false
}

// checkReportIDClaim refuses a Hello whose LastReportID is further past
// what the cloud recorded of its store than the store's outbox and the
// acknowledgements a Lease may not yet hold can explain
// (Config.MaxOutboxReports, twice): its reports could then take IDs the
// store has not given yet, and the store's real reports of those IDs would
// be acknowledged as applied, without effect. A store new to the cloud
// counts from 1, so its claim is bounded the same way from 0 while the
// cloud holds a record of another store of the node (or a Hello of a new
// store would make the cloud forget the first store's record, and then the
// first store could claim anything); only a node the cloud has no record of
// at all is not bounded. When the Lease cannot be read, the hub's own
// record bounds the claim, if it has one.
func (h *Hub) checkReportIDClaim(ctx context.Context, logger klog.Logger, hello *edgeproto.Hello) *closeError {
	rec, err := h.links.Recorded(ctx, hello.Node, hello.Store)
	if err != nil {
		logger.Error(err, "Reading what the cloud recorded of the node's report IDs; the hub's own record bounds its hello")
	}
	if !rec.NodeKnown {
		return nil
	}
	lead := 2 * uint64(h.cfg.MaxOutboxReports)
	// A record near the top of the IDs bounds nothing: past it the sum
	// would wrap, and refuse every real claim of the store for good.
	limit := rec.Last + lead
	if limit < rec.Last {
		limit = math.MaxUint64
	}
	if rec.Known && hello.LastReportID < rec.Last {
		// A store's IDs only grow: another holder of its key went ahead,
		// or the store is a copy restored from before.
		logger.Info("The node's store states fewer report IDs than the cloud recorded of it: its key was used by someone else, "+
			"or the store was restored from a copy; the store's reports up to the recorded ID are taken as applied",
			"store", hello.Store, "stated", hello.LastReportID, "recorded", rec.Last)
	}
	if hello.LastReportID <= limit {
		return nil
	}
	if !rec.Known {
		return &closeError{code: websocket.ClosePolicyViolation,
			reason: fmt.Sprintf("lastReportID %d is past %d: a store new to the cloud counts from 1", hello.LastReportID, limit),
			err: fmt.Errorf("hello states report ID %d of store %s, which the cloud has no record of while it has one of another store of the node: "+
				"a new store counts from 1, and its outbox holds at most %d reports; if the cloud lost an old store's record, start the LocalController on a new store (an empty --data-dir)",
				hello.LastReportID, hello.Store, h.cfg.MaxOutboxReports)}
	}
	return &closeError{code: websocket.ClosePolicyViolation,
		reason: fmt.Sprintf("lastReportID %d is past %d: the cloud's record of the store plus twice --edge-max-outbox-reports", hello.LastReportID, limit),
		err: fmt.Errorf("hello states report ID %d of store %s, but the cloud recorded %d of it and an outbox holds at most %d reports: "+
			"if the LocalController's --max-outbox-reports is more, raise the GlobalManager's --edge-max-outbox-reports", hello.LastReportID, hello.Store, rec.Last, h.cfg.MaxOutboxReports)}
}

// httpIdleTimeout closes a keep-alive connection that has sent no request
// for that long (a test shortens it). An upgraded connection is the
// session's, with its own deadlines.
var httpIdleTimeout = 30 * time.Second

// serveConn reads the Hello of an authenticated connection and runs its
// session, after the one it replaces has fully stopped. A token the hub
// verified itself is confirmed by a review meanwhile.
func (h *Hub) serveConn(ctx context.Context, logger klog.Logger, id *auth.Identity, token string, conn *websocket.Conn) {
	node := id.Node
	// One connection of a node reads its Hello at a time: a newer one
	// closes the older, as a newer session replaces an older one.
	h.mu.Lock()
	older := h.greeting[node]
	h.greeting[node] = conn
	h.mu.Unlock()
	if older != nil {
		// Its reader is its own goroutine's: this only writes, and closes.
		_ = older.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "replaced by a newer connection"),
			time.Now().Add(closeGrace))
		_ = older.Close()
	}
	// A shutdown must not wait a read timeout for a Hello.
	stopWaiting := context.AfterFunc(ctx, func() { _ = conn.Close() })
	hello, cerr := readHello(conn, h.cfg.ReadTimeout)
	h.mu.Lock()
	replaced := h.greeting[node] != conn
	if !replaced {
		delete(h.greeting, node)
	}
	h.mu.Unlock()
	if !stopWaiting() {
		_ = conn.Close()
		return
	}
	if replaced {
		logger.Info("A newer connection of the node replaced this one before its hello ended")
		_ = conn.Close()
		return
	}
	if cerr == nil && hello.Node != node {
		cerr = &closeError{code: websocket.ClosePolicyViolation,
			reason: fmt.Sprintf("hello claims node %s but the token is bound to node %s", edgeproto.ClipName(hello.Node), node)}
		h.metrics.refuse(auth.RefusedNodeMismatch)
	} else if cerr != nil {
		h.metrics.refuse(auth.RefusedNoHello)
	}
	if cerr == nil {
		if cerr = h.checkReportIDClaim(ctx, logger, hello); cerr != nil {
			h.metrics.refuse(auth.RefusedReportIDAhead)
		}
	}
	if cerr != nil {
		logger.Info("Refused an edge connection", "reason", cerr.reason, "err", cerr.err)
		closeConn(conn, cerr.code, cerr.reason)
		return
	}
	h.metrics.receivedMessage(edgeproto.TypeHello)

	s := newSession(ctx, h, id, conn, hello, logger)
	s.token = token
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		closeConn(conn, websocket.CloseGoingAway, "the GlobalManager is shutting down")
		return
	}
	prev := h.sessions[node]
	h.sessions[node] = s
	h.metrics.connectedNodes.Set(float64(len(h.sessions)))
	// Still holding h.mu, so that two connections of a node that say
	// hello at once are recorded in the order they replace each other:
	// the older's Lease and token confirmation never come after the
	// newer's (the older's end would then forget the newer's token).
	s.link = h.links.Connected(node, hello.Store, hello.LastReportID) // before prev ends, so that its end is not taken for a disconnect
	if id.ByHub {
		h.confirmer.Add(s, token)
	}
	h.mu.Unlock()
	if h.auth.PodDeleted(id.PodUID) {
		// Deleted between the review and the hello: podGone did not see
		// this session yet.
		s.revokePodDeleted()
	}
	// Likewise the DaemonSet and the ServiceAccount: what changed before
	// the session was recorded is in the caches now.
	h.revokeIfGone(s)
	if prev != nil {
		logger.Info("A new connection replaces the node's current one")
		prev.stop(websocket.CloseNormalClosure, "replaced by a newer connection")
		<-prev.done // so that the two never both send
	}
	logger.Info("Edge node connected", "inventory", len(hello.Inventory))

	s.run()

	h.mu.Lock()
	if h.sessions[node] == s {
		delete(h.sessions, node)
		h.metrics.connectedNodes.Set(float64(len(h.sessions)))
	}
	h.mu.Unlock()
	h.links.Disconnected(s.link)
	h.confirmer.Forget(s)
	close(s.done)
	logger.Info("Edge node disconnected")
}

// readHello reads a connection's Hello: its first frame and, when its
// inventory goes on, the Inventory frames after it. Each frame has
// timeout to come, so a long inventory over a slow link is read as long as
// it makes progress.
func readHello(conn *websocket.Conn, timeout time.Duration) (*edgeproto.Hello, *closeError) {
	var stream edgeproto.HelloStream
	for {
		_ = conn.SetReadDeadline(time.Now().Add(timeout))
		_, frame, err := conn.ReadMessage()
		if err != nil {
			var ce *closeError
			if errors.As(readError(err, timeout), &ce) {
				return nil, &closeError{code: ce.code, reason: "no hello: " + ce.reason, err: err}
			}
			return nil, &closeError{code: websocket.CloseNormalClosure, reason: "closed before hello", err: err}
		}
		msg, err := edgeproto.Decode(frame)
		if err != nil {
			return nil, frameError(err)
		}
		hello, err := stream.Add(msg)
		switch {
		case errors.Is(err, edgeproto.ErrUnexpected):
			return nil, &closeError{code: websocket.ClosePolicyViolation, reason: err.Error()}
		case err != nil:
			return nil, frameError(err)
		case hello != nil:
			return hello, nil
		}
	}
}
