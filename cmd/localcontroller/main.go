// Command localcontroller is Nereid's LocalController: it runs on an edge node,
// keeps the jobs that concern the node, serves the ML workers there and reports
// their status to the GlobalManager.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/command"
	"github.com/nereid-ml/nereid/internal/serving"
	"github.com/nereid-ml/nereid/pkg/localcontroller/cloudlink"
	"github.com/nereid-ml/nereid/pkg/localcontroller/cycle"
	"github.com/nereid-ml/nereid/pkg/localcontroller/dataset"
	"github.com/nereid-ml/nereid/pkg/localcontroller/nodefs"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
	"github.com/nereid-ml/nereid/pkg/localcontroller/workerapi"
	"github.com/nereid-ml/nereid/pkg/version"
)

// options are the LocalController's command-line settings.
type options struct {
	nodeName          string
	gmAddress         string
	caFile            string
	tokenFile         string
	workerAddress     string
	healthAddress     string
	dataDir           string
	maxOutboxReports  int
	maxOutboxBytes    int64
	nodeRoot          string
	allowedPaths      string
	datasetPollPeriod time.Duration
	deployRetryFor    time.Duration
	clockFile         string
	memLimitPercent   int
	memLimitGiven     bool // --memory-limit-percent was given
}

func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODENAME"),
		"Name of the node this LocalController runs on. Defaults to $NODENAME.")
	fs.StringVar(&o.gmAddress, "gm-address", os.Getenv("GM_ADDRESS"),
		"host:port of the GlobalManager's edge endpoint (wss). Defaults to $GM_ADDRESS.")
	fs.StringVar(&o.caFile, "ca-file", "",
		"PEM file of the CA that signed the GlobalManager's serving certificate.")
	fs.StringVar(&o.tokenFile, "token-file", "/var/run/secrets/nereid.io/edgehub/token",
		"Projected ServiceAccount token of the LocalController's Pod with the edge hub's audience (the GlobalManager's --edge-token-audience, nereid-edgehub by default), "+
			"which proves who and where this LocalController is. Read again before every connection, since the kubelet rotates it.")
	fs.StringVar(&o.workerAddress, "worker-address", ":9100",
		"Address of the worker API (POST /sedna/workers/{name}/info) that Sedna workers call through LC_SERVER.")
	fs.StringVar(&o.healthAddress, "health-address", "127.0.0.1:9101",
		"Address of /healthz, /metrics (Prometheus) and /objects (what the local store holds).")
	fs.StringVar(&o.dataDir, "data-dir", "/var/lib/nereid",
		"Directory of the on-disk store (objects received and reports not yet acknowledged).")
	fs.IntVar(&o.maxOutboxReports, "max-outbox-reports", store.DefaultMaxOutboxReports,
		"Reports buffered at most while the cloud is unreachable; past it workers get 503 and retry, nothing buffered is dropped. "+
			"Workers' reports fill at most 90% of it (and of --max-outbox-bytes): the rest is kept for the LocalController's own (train triggers, deploys, dataset counts).")
	fs.Int64Var(&o.maxOutboxBytes, "max-outbox-bytes", store.DefaultMaxOutboxBytes,
		"Bytes of reports buffered at most while the cloud is unreachable (same behaviour past it).")
	fs.StringVar(&o.nodeRoot, "node-root", "/",
		"The node's root filesystem as mounted into the LocalController; Dataset and Model URLs and outputDir are resolved under it.")
	fs.StringVar(&o.allowedPaths, "allowed-paths", "",
		"Comma-separated node paths (e.g. /data,/models,/output) under which Dataset and Model URLs and outputDirs may be: the LocalController "+
			"reads, splits and copies files only there, also refusing a symbolic link that leads elsewhere. Empty allows every path, as Sedna does, "+
			"which lets a job's author read and write any file of the node the LocalController can.")
	fs.DurationVar(&o.deployRetryFor, "deploy-retry-for", cycle.DefaultDeployRetryFor,
		"How long a learning cycle's failing deploy copy is tried again, with backoff, before it is reported failed.")
	fs.DurationVar(&o.datasetPollPeriod, "dataset-poll-period", dataset.DefaultPeriod,
		"How often the samples of the Datasets on this node are counted; a changed count is reported to the GlobalManager.")
	command.AddMemoryLimitFlag(fs, &o.memLimitPercent)
	fs.StringVar(&o.clockFile, "clock-file", "",
		"For tests and demos: a file holding an RFC 3339 time, read at every use, that the learning-cycle triggers take as the wall clock "+
			"(their daily timer windows, the times in their reports) instead of the system clock. Check periods still run on real time.")
}

func (o *options) validate() error {
	var errs []error
	if o.nodeName == "" {
		errs = append(errs, errors.New("--node-name is required (or set $NODENAME)"))
	}
	if o.dataDir == "" {
		errs = append(errs, errors.New("--data-dir is required"))
	}
	if o.nodeRoot == "" {
		errs = append(errs, errors.New(`--node-root is required ("/" on a real node)`))
	}
	for _, p := range command.SplitList(o.allowedPaths) {
		if !strings.HasPrefix(p, "/") {
			errs = append(errs, fmt.Errorf("--allowed-paths: %q is not a node path (starting with /)", p))
		}
	}
	if err := command.ValidateMemoryLimitPercent(command.MemoryLimitFlag, o.memLimitPercent); err != nil {
		errs = append(errs, err)
	}
	if o.deployRetryFor < 0 {
		errs = append(errs, fmt.Errorf("--deploy-retry-for must not be negative, not %s", o.deployRetryFor))
	}
	if o.datasetPollPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--dataset-poll-period must be positive, not %s", o.datasetPollPeriod))
	}
	return errors.Join(errs...)
}

func main() {
	fs := flag.NewFlagSet("localcontroller", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: localcontroller [flags]

The Nereid LocalController runs on one edge node. It keeps the sedna.io objects
that concern its node in a local store, serves Sedna's worker API to the ML
workers on the node (every report is on disk before the worker gets its 200),
and sends their reports to the GlobalManager over an authenticated websocket.

It also counts the samples of the Datasets on its node (reporting a count when
it changes), and runs the edge half of the incremental and lifelong learning
cycles whose Dataset is on its node: it evaluates their train triggers, even
while the cloud is away, splits each round's new samples into train and test
files under outputDir, and for incremental learning copies the round's model
over the deploy Model when the cloud says to deploy it.

Flags:
`)
		command.PrintFlags(fs)
	}
	var o options
	o.addFlags(fs)
	klog.InitFlags(fs)
	_ = command.ParseFlags(fs, os.Args[1:]) // ExitOnError: Parse exits on a bad flag.
	o.memLimitGiven = command.Given(fs, command.MemoryLimitFlag)
	if err := o.validate(); err != nil {
		command.Exit("localcontroller", err)
	}
	command.Run("LocalController", func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	logger := klog.FromContext(ctx).WithValues("node", o.nodeName)
	mem := command.SetMemoryLimit(command.MemoryLimitFlag, o.memLimitPercent, o.memLimitGiven)
	logger.Info("Soft memory limit", "bytes", mem.Bytes, "from", mem.From)
	st, err := store.Open(filepath.Join(o.dataDir, "localcontroller.db"), store.Options{
		MaxOutboxReports: o.maxOutboxReports, MaxOutboxBytes: o.maxOutboxBytes,
	})
	if err != nil {
		return fmt.Errorf("opening the local store: %w", err)
	}
	defer st.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), version.BuildInfoCollector())
	link, outbox, err := newCloudLink(logger, o, st, reg)
	if err != nil {
		return err
	}

	health := healthHandler(st, link, reg)
	workers := newWorkerServer(logger, outbox, st, reg)
	servers := []server{
		{"worker API", o.workerAddress, workers.Handler(), workerapi.Limits, workers.Listener},
		{"health and metrics", o.healthAddress, health, serving.Limits{ReadHeaderTimeout: 5 * time.Second}, nil},
	}
	errs := make(chan error, len(servers)+1)
	for _, s := range servers {
		srv, err := startServer(logger, s, errs)
		if err != nil {
			return err
		}
		defer shutdown(srv)
	}
	// The dataset watcher and the learning-cycle manager append to the same
	// outbox as the workers. They stop before the store closes (deferred
	// calls run last in, first out); a report they appended after the link
	// stopped is on disk and goes up at the next start.
	stopManagers, err := startManagers(ctx, logger, o, st, outbox, reg)
	if err != nil {
		return err
	}
	defer stopManagers()

	if o.gmAddress == "" {
		logger.Info("No --gm-address: serving workers and buffering their reports on disk until a GlobalManager is configured")
	} else {
		// The link stops, saying goodbye to the GlobalManager, before the
		// store closes.
		stopLink := startLink(ctx, link, errs)
		defer stopLink()
		logger.Info("Cloud link started", "gmAddress", o.gmAddress)
	}
	select {
	case <-ctx.Done():
		logger.Info("Shutting down")
		return nil
	case err := <-errs:
		return err
	}
}

// reportOutbox is where the workers' reports and the LocalController's own go: the
// store, or the cloud link's outbox in front of it.
type reportOutbox interface {
	workerapi.Outbox
	dataset.Outbox
	cycle.Outbox
}

// newCloudLink makes the link to the GlobalManager at --gm-address, and
// returns it with the outbox that reports go to. Without --gm-address there is
// no link (nil) and reports stay in the store.
func newCloudLink(logger klog.Logger, o options, st *store.Store, reg prometheus.Registerer) (*cloudlink.Link, reportOutbox, error) {
	if o.gmAddress == "" {
		return nil, st, nil
	}
	// With a GlobalManager, reports go through the cloud link's outbox, which
	// wakes the link so that a new report goes up at once.
	link, err := cloudlink.New(logger, cloudlink.Config{
		URL:       "wss://" + o.gmAddress + cloudlink.ConnectPath,
		CAFile:    o.caFile,
		TokenFile: o.tokenFile,
		Node:      o.nodeName,
	}, st, reg)
	if err != nil {
		return nil, nil, err
	}
	return link, link.Outbox(), nil
}

// healthHandler serves /healthz, /metrics from reg and /objects, what the
// store holds. link is nil without a GlobalManager.
func healthHandler(st *store.Store, link *cloudlink.Link, reg *prometheus.Registry) http.Handler {
	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		// Healthy (200) even while disconnected: the workers are served from
		// the local store meanwhile; that is edge autonomy.
		fmt.Fprintln(w, "ok")
		if link != nil {
			fmt.Fprintln(w, link.Status())
		}
	})
	health.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// What the store holds, as the LocalController would tell the cloud in its hello.
	health.HandleFunc("/objects", func(w http.ResponseWriter, _ *http.Request) {
		inv, err := st.Inventory()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(inv)
	})
	return health
}

// newWorkerServer makes the worker API's server, counting in reg the
// connections it refuses.
func newWorkerServer(logger klog.Logger, outbox reportOutbox, st *store.Store, reg prometheus.Registerer) *workerapi.Server {
	workers := workerapi.NewServer(logger, outbox, st)
	refusedConnections := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "nereid_localcontroller_worker_connections_refused_total",
		Help: "Connections to the worker API closed as they were accepted: from an address that is no worker's of this node.",
	})
	reg.MustRegister(refusedConnections)
	workers.Refused = refusedConnections.Inc
	return workers
}

// server is one of the LocalController's HTTP servers.
type server struct {
	name, addr string
	handler    http.Handler
	limits     serving.Limits
	// filter, when set, picks the connections served.
	filter func(net.Listener) net.Listener
}

// startServer listens on s.addr and serves s there in a goroutine, sending
// to errs the error that ends it, if any but its shutdown.
func startServer(logger klog.Logger, s server, errs chan<- error) (*http.Server, error) {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("listening for the %s on %s: %w", s.name, s.addr, err)
	}
	if s.filter != nil {
		ln = s.filter(ln)
	}
	ln = s.limits.Listener(ln)
	srv := s.limits.Server(s.handler)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("%s: %w", s.name, err)
		}
	}()
	logger.Info("Serving", "what", s.name, "address", ln.Addr().String())
	return srv, nil
}

// shutdown stops srv, giving the requests in flight 5 seconds.
func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// startManagers starts the dataset watcher, which counts the samples of the
// Datasets on the node, and the learning-cycle manager, both appending to
// outbox. The returned stop stops them and waits until they have.
func startManagers(ctx context.Context, logger klog.Logger, o options, st *store.Store, outbox reportOutbox, reg prometheus.Registerer) (stop func(), err error) {
	rootDir, err := filepath.Abs(o.nodeRoot)
	if err != nil {
		return nil, fmt.Errorf("--node-root: %w", err)
	}
	root := nodefs.Root{Dir: rootDir, Allowed: command.SplitList(o.allowedPaths)}
	watcher := dataset.NewWatcher(st, outbox, dataset.Config{Node: o.nodeName, Root: root, Period: o.datasetPollPeriod})
	cycles := cycle.NewManager(st, outbox, cycle.Config{Node: o.nodeName, Root: root, DeployRetryFor: o.deployRetryFor})
	reg.MustRegister(cycles.Collector())
	if o.clockFile != "" {
		cycles.Wall = newFileClock(logger, o.clockFile)
		logger.Info("The learning-cycle triggers read the wall clock from a file", "clockFile", o.clockFile)
	}
	managersCtx, stopManagers := context.WithCancel(ctx)
	var managers sync.WaitGroup
	managers.Go(func() { watcher.Run(klog.NewContext(managersCtx, logger.WithName("dataset"))) })
	managers.Go(func() { cycles.Run(klog.NewContext(managersCtx, logger.WithName("cycle"))) })
	logger.Info("Counting datasets and running learning cycles", "nodeRoot", root, "datasetPollPeriod", o.datasetPollPeriod)
	return func() {
		stopManagers()
		managers.Wait()
	}, nil
}

// startLink runs the cloud link in a goroutine, sending to errs the error
// that ends it, if any. The returned stop stops the link and waits until it
// has said goodbye to the GlobalManager.
func startLink(ctx context.Context, link *cloudlink.Link, errs chan<- error) (stop func()) {
	linkCtx, stopLink := context.WithCancel(ctx)
	linkDone := make(chan struct{})
	go func() {
		defer close(linkDone)
		if err := link.Run(linkCtx); err != nil {
			errs <- fmt.Errorf("cloud link: %w", err)
		}
	}()
	return func() {
		stopLink()
		<-linkDone
	}
}

// fileClock is a clock that reads an RFC 3339 time from path at every
// call, so a test or a demo moves the learning-cycle triggers' wall clock by
// rewriting the file, without sleeping. While the file cannot be read or
// parsed it falls back to the system clock, saying so once per problem.
type fileClock struct {
	logger klog.Logger
	path   string

	mu      sync.Mutex
	lastErr string
}

var _ clock.PassiveClock = &fileClock{}

func newFileClock(logger klog.Logger, path string) *fileClock {
	return &fileClock{logger: logger, path: path}
}

// Now is the time the file says, or the system clock's.
func (c *fileClock) Now() time.Time {
	t, err := readClockFile(c.path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if err.Error() != c.lastErr {
			c.logger.Error(err, "Using the system clock instead of --clock-file")
		}
		c.lastErr = err.Error()
		return time.Now()
	}
	if c.lastErr != "" {
		c.logger.Info("Reading the wall clock from --clock-file again", "clockFile", c.path)
	}
	c.lastErr = ""
	return t
}

// Since is the time from t to Now.
func (c *fileClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func readClockFile(path string) (time.Time, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the clock file: %w", err)
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
	if err != nil {
		return time.Time{}, fmt.Errorf("clock file %s: %w", path, err)
	}
	return t, nil
}
