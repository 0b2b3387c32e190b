package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/nereid-ml/nereid/hack/localrun"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/cloudlink"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
	"github.com/nereid-ml/nereid/test/framework"
)

// edgeOptions are the edge section's settings.
type edgeOptions struct {
	nodes   int
	jobs    int
	reports int
	rate    float64
	idle    time.Duration
	out     string
	ji      sustainedOptions

	// The fleet at scale: a second run of the section, measuring connect,
	// memory and downstream latency only (the 10,000-node goals).
	scaleNodes int
	scaleOut   string
	scale      bool // this run is the fleet at scale

	gmFlags string // more flags for the GlobalManager
}

// atScale is the options of the fleet at scale.
func (o edgeOptions) atScale() edgeOptions {
	o.nodes, o.out, o.scale = o.scaleNodes, o.scaleOut, true
	return o
}

// name is the run's, in its log files' names and its results'.
func (o edgeOptions) name() string {
	if o.scale {
		return "edge-scale"
	}
	return "edge"
}

// gmFlagsNote says, in a note, which flags the GlobalManager had beyond the
// bench's own, if any.
func gmFlagsNote(flags string) string {
	if flags == "" {
		return ""
	}
	return "; GlobalManager run with " + flags
}

// latencyPhase is how long Dataset updates go out at -edge-rate.
const latencyPhase = 30 * time.Second

// benchWriters is how many goroutines write at once where the bench measures
// a ceiling or feeds the outboxes, as in the GlobalManager section.
const benchWriters = 16

func (o *edgeOptions) addFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.nodes, "edge-nodes", 1000, "Edge nodes, each with a simulated LocalController (a real cloud link and store, in process).")
	fs.IntVar(&o.jobs, "edge-jobs", 1000, "FederatedLearningJobs, one on each of the first nodes (at most -edge-nodes): the reports are theirs; every node has a Dataset.")
	fs.IntVar(&o.reports, "edge-reports", 10000, "Worker reports appended to the LocalControllers' outboxes, spread over the nodes.")
	fs.Float64Var(&o.rate, "edge-rate", 20, "Dataset updates per second for the downstream latency (for 30s).")
	fs.DurationVar(&o.idle, "edge-idle", time.Minute, "How long nothing changes while the object messages the hub sends are counted.")
	fs.StringVar(&o.out, "edge-out", "", "JSON file of the edge section (default _output/bench/edge-<time>.json).")
	fs.IntVar(&o.scaleNodes, "edge-scale-nodes", 9800, "Edge nodes of the fleet at scale: after the edge section, on a fresh control plane, the same fleet this large measured for connect, memory and downstream latency only (the 10,000-node goals; this machine's open-files limit holds 9,872 nodes in one process); 0 skips it.")
	fs.StringVar(&o.scaleOut, "edge-scale-out", "", "JSON file of the fleet at scale (default _output/bench/edge-scale-<time>.json).")
	fs.StringVar(&o.gmFlags, "edge-gm-flags", "", "More flags for the edge sections' GlobalManager, space-separated (say \"--edge-report-writes=8\"), to compare settings; the results then describe that GlobalManager, not the default one.")
	o.ji.addFlags(fs)
}

func (o edgeOptions) validate() error {
	var errs []error
	if o.nodes < 1 {
		errs = append(errs, errors.New("-edge-nodes must be at least 1"))
	}
	if o.reports < 1 {
		errs = append(errs, errors.New("-edge-reports must be at least 1"))
	}
	if o.jobs < 1 || o.jobs > o.nodes {
		errs = append(errs, errors.New("-edge-jobs must be at least 1 and at most -edge-nodes"))
	}
	if o.scaleNodes != 0 && o.scaleNodes < o.jobs {
		errs = append(errs, errors.New("-edge-scale-nodes must be 0 (none) or at least -edge-jobs"))
	}
	if o.reports > o.jobs*store.DefaultMaxOutboxReports {
		errs = append(errs, fmt.Errorf("-edge-reports must fit the outboxes: at most %d per node", store.DefaultMaxOutboxReports))
	}
	if o.rate <= 0 {
		errs = append(errs, errors.New("-edge-rate must be positive"))
	}
	if o.idle < 0 {
		errs = append(errs, errors.New("-edge-idle must not be negative"))
	}
	if _, err := o.ji.parse(o.nodes); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runEdge measures the cloud–edge channel on the bench's cluster: one
// real GlobalManager process with its edge hub, and o.nodes simulated
// LocalControllers in this process, each a real cloudlink.Link with its own
// bbolt store, connecting over loopback TLS with a token bound to a Pod on
// its (kwok) node. It measures:
//
//   - connect: from starting every link at once to every link synced, and
//     the GlobalManager's resident memory then;
//   - downstream latency: Dataset updates at o.rate for 30s, each to one
//     node, from the Update's return to that node's store holding it;
//   - reports: o.reports worker reports appended to the outboxes, until the
//     jobs' status counts them all, beside the rate of plain status writes
//     to the same jobs (the ceiling);
//   - idle: the object messages the hub sends while nothing changes;
//   - restart: the GlobalManager stopped (SIGTERM) and started, until every
//     link is synced again;
//   - sustained: joint inference workers reporting every period in rising
//     steps, until a step falls behind (edge_sustained.go);
//   - the resident memory of one idle LocalController process.
//
// The fleet at scale (o.scale) stops after the downstream latency, and its
// results' names say so.
func runEdge(ctx context.Context, o edgeOptions, external bool, kube kubernetes.Interface, sedna sednaclient.Interface) ([]result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir, err := os.MkdirTemp("", "nereid-bench-edge-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e := &edgeRun{o: o, kube: kube, sedna: sedna, goals: goalsFor(o.nodes), dir: dir,
		outDir: filepath.Join(framework.RepoRoot(), "_output", "bench")}
	if err := e.prepare(); err != nil {
		return nil, err
	}
	if external {
		defer func() {
			if err := deleteEdgeObjects(context.WithoutCancel(ctx), kube, o.nodes); err != nil {
				progress("edge: cleaning up: %v", err)
			}
		}()
	}
	if err := e.createObjects(ctx); err != nil {
		return nil, err
	}
	if err := e.startGlobalManager(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = e.gm.Signal(syscall.SIGTERM, 15*time.Second) }()
	if err := e.waitForJobs(ctx); err != nil {
		return nil, err
	}
	before, err := e.sampleMemory(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.buildFleet(); err != nil {
		return nil, err
	}
	defer func() {
		if err := e.fl.stop(30 * time.Second); err != nil {
			progress("edge: %v", err)
		}
	}()
	return e.measure(ctx, before)
}

// edgeRun is one run of the edge section: its settings and clients, and what
// its setup made, which its phases share.
type edgeRun struct {
	o     edgeOptions
	kube  kubernetes.Interface
	sedna sednaclient.Interface
	goals edgeGoals

	dir          string // temporary: the hub's CA, tokens, the stores
	outDir       string // _output/bench: logs and profiles
	gmBin, lcBin string

	objs *edgeObjects
	jobs *jobTracker

	gm      *framework.Process
	gmLog   string
	hubAddr string
	caFile  string
	// metricsAddr is the GlobalManager's health address, which serves its
	// metrics and profiles; a restarted GlobalManager has another.
	metricsAddr string

	nodes    []string
	linksLog string
	fl       *fleet
}

// prepare makes the output folder, raises the open files limit for the
// fleet and builds the GlobalManager and the LocalController.
func (e *edgeRun) prepare() error {
	if err := os.MkdirAll(e.outDir, 0o755); err != nil {
		return err
	}
	if err := raiseFileLimit(uint64(2*e.o.nodes + fileLimitSpare)); err != nil {
		return err
	}
	var err error
	if e.gmBin, err = framework.BuildBinary("globalmanager"); err != nil {
		return err
	}
	e.lcBin, err = framework.BuildBinary("localcontroller")
	return err
}

// createObjects creates the edge nodes and what concerns them
// (createEdgeObjects), then starts tracking the jobs.
func (e *edgeRun) createObjects(ctx context.Context) error {
	progress("edge: creating %d kwok edge nodes, each with a Pod of the LocalControllers' DaemonSet, a token bound to it and a Dataset, the first %d with a FederatedLearningJob (%d at a time)", e.o.nodes, e.o.jobs, setupWorkers)
	setupStart := time.Now()
	objs, err := createEdgeObjects(ctx, e.kube, e.sedna, e.o.nodes, e.o.jobs, e.dir)
	if err != nil {
		return err
	}
	e.objs = objs
	progress("edge: created in %s", time.Since(setupStart).Round(time.Millisecond))
	e.jobs, err = newJobTracker(ctx, e.sedna, edgeNamespace)
	return err
}

// startGlobalManager starts the GlobalManager process with its edge hub on a
// free loopback port, as the chart's ServiceAccount (startGlobalManager),
// logging to _output/bench.
func (e *edgeRun) startGlobalManager(ctx context.Context) error {
	const ns = edgeNamespace
	port, err := framework.PickFreePort()
	if err != nil {
		return err
	}
	e.hubAddr = "127.0.0.1:" + strconv.Itoa(port)
	e.caFile = filepath.Join(e.dir, "edgehub-ca.crt")
	e.gmLog = filepath.Join(e.outDir, "globalmanager-"+e.o.name()+".log")
	_ = os.Remove(e.gmLog)
	// Its own namespace only, so that the GlobalManager section's jobs are
	// not this one's work, and no leader election, so that a restart
	// measures the hub rather than a Lease hand-over.
	e.gm, err = startGlobalManager(ctx, e.gmBin, e.gmLog, localrun.GlobalManager{
		Namespace: ns, HealthAddress: "127.0.0.1:0",
		EdgeHub: &localrun.EdgeHub{Address: e.hubAddr, Namespace: ns, CAFile: e.caFile,
			LocalControllers: localrun.EdgeDaemonSet{Namespace: ns, Name: edgeDaemonSet, ServiceAccount: edgeServiceAccount}},
		// The channel is measured here; gangs would only route the jobs'
		// pods through the scheduler. --profiling serves the heap and CPU
		// profiles the section saves.
		Extra: append([]string{"--gang-scheduler=none", "--profiling"}, strings.Fields(e.o.gmFlags)...),
	})
	return err
}

// waitForJobs waits until the GlobalManager serves its edge hub and runs
// the workers of the jobs, and until the jobs stop changing; past a few
// minutes the section goes on, saying so.
func (e *edgeRun) waitForJobs(ctx context.Context) error {
	metricsAddr, err := waitForHub(ctx, e.gm, e.caFile, "")
	if err != nil {
		return fmt.Errorf("%w (GlobalManager log: %s)", err, e.gmLog)
	}
	e.metricsAddr = metricsAddr
	progress("edge: GlobalManager up; waiting for it to run the workers of the %d jobs", e.o.jobs)
	if err := e.jobs.waitFor(ctx, 5*time.Minute, func() bool { return e.jobs.runningJobs() == e.o.jobs }); err != nil {
		progress("edge: only %d of %d jobs run (%v); going on", e.jobs.runningJobs(), e.o.jobs, err)
	}
	if !e.jobs.waitQuiet(ctx, 3*time.Second, time.Minute) {
		progress("edge: the jobs still change; going on")
	}
	return nil
}

// gmMemory is the GlobalManager's memory at one moment.
type gmMemory struct {
	rss     float64 // resident, MiB
	parts   string  // residentParts
	metrics metricsSample
}

// sampleMemory samples the GlobalManager's memory: its resident size, that
// size's parts, and its metrics, which describeMemory reads.
func (e *edgeRun) sampleMemory(ctx context.Context) (gmMemory, error) {
	rss, err := residentMiB(e.gm.Pid())
	if err != nil {
		return gmMemory{}, err
	}
	parts := residentParts(e.gm.Pid())
	metrics, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return gmMemory{}, err
	}
	return gmMemory{rss: rss, parts: parts, metrics: metrics}, nil
}

// buildFleet builds a simulated LocalController for each edge node; none
// connects yet. Their links log to _output/bench.
func (e *edgeRun) buildFleet() error {
	e.nodes = make([]string, e.o.nodes)
	for i := range e.nodes {
		e.nodes[i] = edgeNodeName(i)
	}
	e.linksLog = filepath.Join(e.outDir, e.o.name()+"-links.log")
	fl, err := newFleet("wss://"+e.hubAddr+cloudlink.ConnectPath, e.caFile, filepath.Join(e.dir, "lc"), e.linksLog, e.nodes, e.objs.tokenFiles)
	if err != nil {
		return err
	}
	e.fl = fl
	return nil
}

// measure runs the section's phases in order, as runEdge lists them, and
// returns their results; the fleet at scale stops after the downstream
// latency. before is the GlobalManager's memory before the links.
func (e *edgeRun) measure(ctx context.Context, before gmMemory) ([]result, error) {
	var results []result
	add := func(rows []result, err error) error {
		results = append(results, rows...)
		return err
	}
	if err := add(e.connectFleet(ctx, before)); err != nil {
		return nil, err
	}
	if err := add(e.downstreamLatency(ctx)); err != nil {
		return nil, err
	}
	if e.o.scale {
		for i := range results {
			results[i].Name = strings.Replace(results[i].Name, "edge: ", "edge at scale: ", 1)
		}
		return results, nil
	}

	// Worker reports, beside the ceiling of plain status writes.
	ceiling, ceilingRate, err := e.statusWriteCeiling(ctx)
	if err != nil {
		return nil, err
	}
	results = append(results, ceiling)
	burst, workers, err := e.reportBurst(ctx, ceilingRate)
	if err != nil {
		return nil, err
	}
	results = append(results, burst...)

	if err := add(e.idle(ctx)); err != nil {
		return nil, err
	}
	if err := add(e.restart(ctx)); err != nil {
		return nil, err
	}
	// An outage's backlog: the same number of reports, queued in the
	// outboxes while the GlobalManager is down, then drained after it
	// starts. Unlike the burst above, the appends are not in the window.
	backlog, err := e.backlog(ctx, workers, ceilingRate)
	if err != nil {
		return nil, fmt.Errorf("backlog: %w (GlobalManager log: %s)", err, e.gmLog)
	}
	results = append(results, backlog...)
	if err := add(e.sustained(ctx)); err != nil {
		return nil, err
	}
	if err := add(e.localControllerMemory(ctx)); err != nil {
		return nil, err
	}
	return results, nil
}

// connectFleet starts every link at once and measures until every link is
// synced, and the GlobalManager's resident memory then, beside before (no
// links yet).
func (e *edgeRun) connectFleet(ctx context.Context, before gmMemory) ([]result, error) {
	progress("edge: connect: starting %d cloud links at once", e.o.nodes)
	profiled := profileGlobalManager(ctx, e.metricsAddr, connectProfileTime,
		filepath.Join(e.outDir, "globalmanager-"+e.o.name()+"-connect-cpu.pb.gz"))
	start := time.Now()
	e.fl.start(ctx)
	syncedAt, err := e.fl.waitSynced(ctx, start, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("connect: %w (links log: %s)", err, e.linksLog)
	}
	connect := syncedAt.Sub(start)
	connected, err := e.sampleMemory(ctx)
	if err != nil {
		return nil, err
	}
	held, err := e.fl.lcs[0].store.Inventory()
	if err != nil {
		return nil, err
	}
	verifiedBy := func(by string) float64 {
		return connected.metrics.Get(`nereid_edgehub_tokens_verified_total{by="` + by + `"}`)
	}
	// What the connect leaves behind (each node's Lease saying it is
	// connected) is written before the steady state is measured.
	leasesAt, err := waitLinksWritten(ctx, e.kube, e.o.nodes, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	results := []result{
		{Name: fmt.Sprintf("edge: connect %d nodes until all synced", e.o.nodes), Value: round(connect.Seconds()), Unit: "s", Goal: e.goals.connect,
			Note: fmt.Sprintf("all links started at once; token (verified by the hub %.0f, by TokenReview %.0f), TLS, hello, %d objects each, synced; every node's Lease said connected %s after the start",
				verifiedBy("hub"), verifiedBy("token_review"), len(held), leasesAt.Sub(start).Round(time.Millisecond)) + "; " + profiled() + gmFlagsNote(e.o.gmFlags)},
		{Name: fmt.Sprintf("edge: GlobalManager resident memory, %d connected", e.o.nodes), Value: round(connected.rss), Unit: "MiB", Goal: e.goals.memory,
			Note: fmt.Sprintf("just after all synced: %s, %s; before the links, with the caches of the %d jobs and their pods: %.1f MiB, %s, %s",
				connected.parts, describeMemory(connected.metrics), e.o.jobs, before.rss, before.parts, describeMemory(before.metrics))},
	}
	progress("edge: all %d synced in %s; GlobalManager %.1f MiB", e.o.nodes, connect.Round(time.Millisecond), connected.rss)
	return results, nil
}

// restartProfileTime is how long the restarted GlobalManager's CPU and the
// API server's are profiled from its start: its caches fill and its hub
// listens in about that long at 1,000 nodes.
const restartProfileTime = 3 * time.Second

// connectProfileTime is how long the GlobalManager's CPU is profiled from the
// links' start: the first 1,000 nodes take about that long.
const connectProfileTime = 4 * time.Second

// downstreamLatency updates Datasets at o.rate for latencyPhase, each to one
// node, and measures from the Update's return to that node's store holding
// it.
func (e *edgeRun) downstreamLatency(ctx context.Context) ([]result, error) {
	settled := e.waitLinkedSettled(ctx)
	count := max(1, int(e.o.rate*latencyPhase.Seconds()))
	progress("edge: downstream: %d Dataset updates at %g/s, spread over the nodes", count, e.o.rate)
	m0, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return nil, err
	}
	u0, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return nil, err
	}
	fleetBefore := e.fleetReady(ctx)
	profiled := profileGlobalManager(ctx, e.metricsAddr, latencyPhase*2/3,
		filepath.Join(e.outDir, "globalmanager-"+e.o.name()+"-downstream-cpu.pb.gz"))
	start := time.Now()
	lat, lost, err := measureDownstream(ctx, e.sedna, e.fl, e.objs.datasets, e.o.rate, count)
	if err != nil {
		return nil, fmt.Errorf("downstream: %w", err)
	}
	took := time.Since(start)
	m1, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return nil, err
	}
	u1, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return nil, err
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("downstream: none of the %d updates reached its LocalController within 30s", count)
	}
	resends := m1.Get("nereid_edgehub_resends_total") - m0.Get("nereid_edgehub_resends_total")
	method := "Update returned → the node's store holds that resourceVersion, seen by a goroutine per update polling store.GetObject every 1ms"
	return []result{
		{Name: "edge: downstream latency p50", Value: ms(percentile(lat, 50)), Unit: "ms",
			Note: fmt.Sprintf("%d Dataset updates at %g/s, each to one node; %s; %s", count, e.o.rate, method, settled)},
		{Name: "edge: downstream latency p99", Value: ms(percentile(lat, 99)), Unit: "ms", Goal: e.goals.p99,
			Note: describeUsage(u0, u1, took) + "; " + profiled() + "; the LocalControllers' DaemonSet, ready: " + fleetBefore + " at the start, " + e.fleetReady(ctx) + " at the end"},
		{Name: "edge: downstream latency max", Value: ms(percentile(lat, 100)), Unit: "ms",
			Note: fmt.Sprintf("hub resends meanwhile: %.0f (a resend waits 5s; %s); updates never seen within 30s: %d", resends, slowAcks(m0, m1), lost)},
	}, nil
}

// fleetReady says how many of the LocalControllers' DaemonSet's pods its
// status counts ready. The bench waits only for them to be bound; kwok then
// brings them up. Nodes taken for not ready take their pods with them, and
// each of their status writes is a sync of the DaemonSet, over every node,
// in the controller-manager: load on the machine the latency is measured on
// (steadyFleet keeps kwok's nodes ready).
func (e *edgeRun) fleetReady(ctx context.Context) string {
	ds, err := e.kube.AppsV1().DaemonSets(edgeNamespace).Get(ctx, edgeDaemonSet, metav1.GetOptions{})
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return fmt.Sprintf("%d of %d", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
}

// The work queues the hub works off after the links come up: its condition
// writes, and the TokenReviews that confirm, after the fact, the tokens it
// accepted itself (auth.ConfirmRate a second: about 8 minutes at 9,800 nodes).
const (
	linkedQueue        = `{name="edgehub_conditions"}`
	confirmationsQueue = `{name="edgehub_token_confirmations"}`
)

// waitLinkedSettled waits until the hub has written the conditions the
// links' coming up called for (the jobs' and Datasets' EdgeLinked, False
// while no LocalController had connected, True once one has) and confirmed
// the links' tokens, so that the downstream latency is measured on a hub at
// rest, and says how long that took and how many conditions it wrote. It
// waits at most two minutes more than the confirmations take at their pace.
func (e *edgeRun) waitLinkedSettled(ctx context.Context) string {
	// The counts are of the items taken off the queues; busy while some wait.
	timeout := 2*time.Minute + time.Duration(e.o.nodes/auth.ConfirmRate)*time.Second
	written, lastWrite, ok := waitQuiet(ctx, 250*time.Millisecond, 3*time.Second, timeout, func() (float64, bool) {
		m, err := scrapeMetrics(ctx, e.metricsAddr)
		if err != nil {
			return -1, true
		}
		busy := m.Get("nereid_workqueue_depth"+linkedQueue) != 0 || m.Get("nereid_workqueue_depth"+confirmationsQueue) != 0
		return m.Get("nereid_workqueue_work_duration_seconds_count"+linkedQueue) + m.Get("nereid_workqueue_work_duration_seconds_count"+confirmationsQueue), busy
	})
	m, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return "not measured at rest: " + err.Error()
	}
	conditions := m.Get("nereid_workqueue_work_duration_seconds_count" + linkedQueue)
	confirmed := m.Get("nereid_workqueue_work_duration_seconds_count" + confirmationsQueue)
	switch {
	case ctx.Err() != nil:
		return "not measured at rest: " + ctx.Err().Error()
	case !ok:
		return fmt.Sprintf("measured while the hub still wrote conditions or confirmed tokens: %.0f of both done in the %s after all synced (%.0f conditions written, %.0f tokens confirmed since the start)",
			written, timeout, conditions, confirmed)
	}
	return fmt.Sprintf("measured at rest: the hub's condition writes and token confirmations after the connect (%.0f since all synced; %.0f conditions written, %.0f tokens confirmed since the start) ended %s after all synced",
		written, conditions, confirmed, lastWrite.Round(100*time.Millisecond))
}

// statusWriteCeiling measures the rate of plain status writes to the jobs
// (UpdateStatus, up to o.reports of them), which the worker reports' rate is
// set against, and returns its row and that rate.
func (e *edgeRun) statusWriteCeiling(ctx context.Context) (result, float64, error) {
	writes := e.o.reports
	progress("edge: ceiling: up to %d status writes (UpdateStatus) to the %d jobs, %d goroutines, no client rate limit, at most 60s", writes, e.o.jobs, benchWriters)
	ceil0, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return result{}, 0, err
	}
	ceilingProfiled := profileAPIServer(ctx, e.kube, apiServerProfileTime, filepath.Join(e.outDir, "apiserver-edge-ceiling-cpu.pb.gz"))
	ceiling, err := measureStatusCeiling(ctx, e.sedna, e.jobs, e.o.jobs, writes, time.Minute)
	if err != nil {
		return result{}, 0, fmt.Errorf("status write ceiling: %w", err)
	}
	ceil1, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return result{}, 0, err
	}
	ceilingRate := float64(ceiling.writes) / ceiling.took.Seconds()
	return result{Name: "edge: ceiling: job status writes", Value: round(ceilingRate), Unit: "writes/s",
		Note: fmt.Sprintf("%d UpdateStatus of the jobs in %s, %d goroutines; %d conflicts retried; %s; %s", ceiling.writes, ceiling.took.Round(time.Millisecond), benchWriters, ceiling.conflicts, describeUsage(ceil0, ceil1, ceiling.took), ceilingProfiled())}, ceilingRate, nil
}

// reportBurst waits until the jobs and the hub are quiet, appends o.reports
// worker reports to the outboxes, spread over the nodes with a job, and
// measures until the jobs' status counts them all: their rate, set against
// ceilingRate, and the status writes and the upserts back down they caused.
// It returns the training workers that reported, too.
func (e *edgeRun) reportBurst(ctx context.Context, ceilingRate float64) ([]result, []string, error) {
	e.jobs.waitQuiet(ctx, 3*time.Second, time.Minute)
	waitHubQuiet(ctx, e.metricsAddr, 2*time.Second, time.Minute)

	progress("edge: reports: %d worker reports appended to the outboxes (%d at a time), spread over the %d nodes with a job", e.o.reports, benchWriters, e.o.jobs)
	m2, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return nil, nil, err
	}
	u0, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return nil, nil, err
	}
	workers, err := trainingWorkers(ctx, e.kube, e.o.jobs)
	if err != nil {
		return nil, nil, err
	}
	// The burst's first seconds, when the writes run behind the reports.
	cpuFile := filepath.Join(e.outDir, "globalmanager-edge-reports-cpu.pb.gz")
	profiled := profileGlobalManager(ctx, e.metricsAddr, 5*time.Second, cpuFile)
	apiProfiled := profileAPIServer(ctx, e.kube, apiServerProfileTime, filepath.Join(e.outDir, "apiserver-edge-reports-cpu.pb.gz"))
	rep, err := measureReports(ctx, e.fl, e.jobs, workers, e.o.reports, 5*time.Minute)
	if err != nil {
		return nil, nil, fmt.Errorf("reports: %w", err)
	}
	u1, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return nil, nil, err
	}
	m3, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return nil, nil, err
	}
	reportRate := float64(rep.applied) / rep.took.Seconds()
	perWrite := func(m metricsSample, part string) float64 {
		return m.Get(fmt.Sprintf(`nereid_controller_edge_reports_per_status_write_%s{kind="federatedlearningjob"}`, part))
	}
	statusWrites := perWrite(m3, "count") - perWrite(m2, "count")
	carried := perWrite(m3, "sum") - perWrite(m2, "sum")
	upserts := m3.Get(`nereid_edgehub_messages_sent_total{type="upsert"}`) - m2.Get(`nereid_edgehub_messages_sent_total{type="upsert"}`)
	note := fmt.Sprintf("%d of %d reports in status (sum of status.edgeNodes[].reportsApplied) %s after the first append; appends took %s; refused %.0f; %s (the bench process is the %d simulated nodes)",
		rep.applied, e.o.reports, rep.took.Round(time.Millisecond), rep.appendTook.Round(time.Millisecond),
		m3.Get("nereid_edgehub_reports_refused_total")-m2.Get("nereid_edgehub_reports_refused_total"),
		describeUsage(u0, u1, rep.took), e.o.nodes)
	note += "; the GlobalManager's CPU counts pprof's sampling; " + profiled() + "; " + apiProfiled()
	note += fmt.Sprintf("; object resends %.0f; %s", m3.Get("nereid_edgehub_resends_total")-m2.Get("nereid_edgehub_resends_total"), slowAcks(m2, m3))
	if rep.timedOut {
		note = "TIMED OUT: " + note
	}
	results := []result{
		{Name: "edge: worker reports applied", Value: round(reportRate), Unit: "reports/s", Note: note},
		{Name: "edge: reports rate / status write ceiling", Value: round(reportRate / ceilingRate), Unit: "ratio", Goal: ">= 5",
			Note: fmt.Sprintf("%.0f reports carried by %.0f status writes (%.1f a write; nereid_controller_edge_reports_per_status_write)",
				carried, statusWrites, carried/max(1, statusWrites))},
		{Name: "edge: upserts sent back down per applied report", Value: round(upserts / max(1, float64(rep.applied))), Unit: "upserts", Goal: "0",
			Note: fmt.Sprintf("%.0f object upserts to the nodes while %d reports were applied (a status write is not sent to the edge)", upserts, rep.applied)},
	}
	progress("edge: %d reports applied at %.0f/s (ceiling %.0f writes/s)", rep.applied, reportRate, ceilingRate)
	return results, workers, nil
}

// idle waits until the jobs and the hub are quiet, then counts the object
// messages the hub sends in o.idle of nothing changing, and measures the
// GlobalManager's memory after it (idleMemory).
func (e *edgeRun) idle(ctx context.Context) ([]result, error) {
	e.jobs.waitQuiet(ctx, 3*time.Second, time.Minute)
	waitHubQuiet(ctx, e.metricsAddr, 3*time.Second, 2*time.Minute)
	progress("edge: idle: counting the object messages the hub sends in %s of nothing changing", e.o.idle)
	m4, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return nil, err
	}
	idle0, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return nil, err
	}
	idleStart := time.Now()
	select {
	case <-time.After(e.o.idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	idle1, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return nil, err
	}
	idleTook := time.Since(idleStart)
	m5, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return nil, err
	}
	sent := func(m metricsSample, t edgeproto.Type) float64 {
		return m.Get(fmt.Sprintf(`nereid_edgehub_messages_sent_total{type=%q}`, t))
	}
	idleObjects := sent(m5, edgeproto.TypeUpsert) + sent(m5, edgeproto.TypeDelete) - sent(m4, edgeproto.TypeUpsert) - sent(m4, edgeproto.TypeDelete)
	messages := result{Name: "edge: object messages sent while idle", Value: idleObjects, Unit: "messages", Goal: "0",
		Note: fmt.Sprintf("upserts+deletes in %s with nothing changing (nereid_edgehub_messages_sent_total); heartbeats %.0f; what the connected fleet costs with nothing changing, against which the ceiling and the burst write: %s",
			e.o.idle, sent(m5, edgeproto.TypeHeartbeat)-sent(m4, edgeproto.TypeHeartbeat), describeUsage(idle0, idle1, idleTook))}
	memory, err := e.idleMemory(ctx, m5)
	if err != nil {
		return nil, err
	}
	return []result{messages, memory}, nil
}

// idleMemory measures the GlobalManager's resident memory after idling and
// saves its heap profile; m is its metrics at the end of the idle time.
func (e *edgeRun) idleMemory(ctx context.Context, m metricsSample) (result, error) {
	rssIdle, err := residentMiB(e.gm.Pid())
	if err != nil {
		return result{}, err
	}
	partsIdle := residentParts(e.gm.Pid())
	heapFile := filepath.Join(e.outDir, "globalmanager-edge-heap.pb.gz")
	if err := saveHeapProfile(ctx, e.metricsAddr, heapFile); err != nil {
		return result{}, err
	}
	return result{Name: fmt.Sprintf("edge: GlobalManager resident memory, %d connected, after idling", e.o.nodes), Value: round(rssIdle), Unit: "MiB", Goal: e.goals.memory,
		Note: fmt.Sprintf("after the reports and %s idle: %s, %s; heap profile %s (go tool pprof -top -sample_index=inuse_space); meanwhile TokenReviews confirmed %.0f of the tokens the hub had accepted itself and refused %.0f",
			e.o.idle, partsIdle, describeMemory(m), heapFile,
			m.Get(`nereid_edgehub_tokens_confirmed_total{result="confirmed"}`), m.Get(`nereid_edgehub_tokens_confirmed_total{result="refused"}`))}, nil
}

// restart stops the GlobalManager (SIGTERM) and starts it again, and
// measures until every link is synced again.
func (e *edgeRun) restart(ctx context.Context) ([]result, error) {
	progress("edge: restart: SIGTERM to the GlobalManager, then start it again")
	stopAt := time.Now()
	if err := e.gm.Signal(syscall.SIGTERM, 30*time.Second); err != nil {
		return nil, err
	}
	exited := time.Now()
	u0, err := sampleUsage(ctx, e.kube, 0)
	if err != nil {
		return nil, err
	}
	if err := e.gm.Start(); err != nil {
		return nil, err
	}
	restarted := time.Now()
	apiProfiled := profileAPIServer(ctx, e.kube, restartProfileTime, filepath.Join(e.outDir, "apiserver-"+e.o.name()+"-restart-cpu.pb.gz"))
	metricsAddr, err := waitForHub(ctx, e.gm, e.caFile, e.metricsAddr)
	if err != nil {
		return nil, err
	}
	e.metricsAddr = metricsAddr
	gmProfiled := profileGlobalManager(ctx, e.metricsAddr, restartProfileTime, filepath.Join(e.outDir, "globalmanager-"+e.o.name()+"-restart-cpu.pb.gz"))
	syncedAt, err := e.fl.waitSynced(ctx, stopAt, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("restart: %w (GlobalManager log: %s)", err, e.gmLog)
	}
	u1, err := sampleUsage(ctx, e.kube, e.gm.Pid())
	if err != nil {
		return nil, err
	}
	sampled := time.Since(restarted)
	listening := "?"
	if at, ok := lastLogTime(e.gm.Log(), `"Serving edge connections"`); ok && at.After(restarted.Add(-time.Second)) {
		listening = at.Sub(restarted).Round(time.Millisecond).String()
	}
	row := result{Name: fmt.Sprintf("edge: GlobalManager restart until all %d synced", e.o.nodes), Value: round(syncedAt.Sub(restarted).Seconds()), Unit: "s", Goal: e.goals.restart,
		Note: fmt.Sprintf("from the new process's start (its hub listened after %s; the links retry with jittered backoff from 0.5s); %s from the SIGTERM, of which the old one took %s to exit; since the start, %s; %s; %s",
			listening, syncedAt.Sub(stopAt).Round(time.Millisecond), exited.Sub(stopAt).Round(time.Millisecond),
			describeUsage(u0, u1, sampled), gmProfiled(), apiProfiled())}
	progress("edge: all synced %s after the restart", syncedAt.Sub(restarted).Round(time.Millisecond))
	return []result{row}, nil
}

// sustained measures the sustained joint inference reports (runSustained),
// on the restarted GlobalManager, unless -ji-services is 0.
func (e *edgeRun) sustained(ctx context.Context) ([]result, error) {
	steps, _ := e.o.ji.parse(e.o.nodes)
	if len(steps) == 0 {
		return nil, nil
	}
	row, err := runSustained(ctx, e.o.ji, steps, e.fl, e.kube, e.sedna, e.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("sustained: %w (GlobalManager log: %s)", err, e.gmLog)
	}
	return []result{row}, nil
}

// localControllerMemory stops the fleet and measures the resident memory of
// one idle LocalController process.
func (e *edgeRun) localControllerMemory(ctx context.Context) ([]result, error) {
	// One idle LocalController process, for the node of the first link,
	// which goes first so that the two do not replace each other's
	// connection.
	if err := e.fl.stop(30 * time.Second); err != nil {
		return nil, err
	}
	progress("edge: a LocalController process for %s, idle", e.nodes[0])
	rssLC, err := measureLocalController(ctx, e.lcBin, filepath.Join(e.outDir, "localcontroller-edge.log"), e.nodes[0], e.hubAddr, e.caFile, e.objs.tokenFiles[0], filepath.Join(e.dir, "lc-process"))
	if err != nil {
		return nil, err
	}
	return []result{{Name: "edge: LocalController process resident memory, idle", Value: round(rssLC), Unit: "MiB", Goal: "< 30",
		Note: "connected and synced, then 5s idle"}}, nil
}

// backlog stops the GlobalManager, appends -edge-reports reports (rounds
// after those of the burst) to the workers' outboxes meanwhile, starts it
// again and waits until the jobs' status counts them all and every link is
// synced.
func (e *edgeRun) backlog(ctx context.Context, workers []string, ceilingRate float64) ([]result, error) {
	kube, gm, fl, jobs, count := e.kube, e.gm, e.fl, e.jobs, e.o.reports
	progress("edge: backlog: SIGTERM to the GlobalManager, %d worker reports appended to the outboxes while it is down, then start it again", count)
	stopAt := time.Now()
	if err := gm.Signal(syscall.SIGTERM, 30*time.Second); err != nil {
		return nil, err
	}
	base, _ := jobs.reportsApplied()
	appendStart := time.Now()
	// Rounds past the burst's (count / nodes of them).
	if err := appendReports(ctx, fl, workers, count, count/len(workers)+2); err != nil {
		return nil, err
	}
	appendTook := time.Since(appendStart)
	u0, err := sampleUsage(ctx, kube, 0)
	if err != nil {
		return nil, err
	}
	if err := gm.Start(); err != nil {
		return nil, err
	}
	started := time.Now()
	profiled := profileAPIServer(ctx, kube, apiServerProfileTime, filepath.Join(e.outDir, "apiserver-"+e.o.name()+"-backlog-cpu.pb.gz"))
	if err := jobs.waitReports(ctx, base, count, 5*time.Minute); err != nil {
		applied, _ := jobs.reportsApplied()
		return nil, fmt.Errorf("%d of %d queued reports in status: %w", applied-base, count, err)
	}
	applied, at := jobs.reportsApplied()
	u1, err := sampleUsage(ctx, kube, gm.Pid())
	if err != nil {
		return nil, err
	}
	took := at.Sub(started)
	if _, err := fl.waitSynced(ctx, stopAt, 5*time.Minute); err != nil {
		return nil, err
	}
	// What runs next runs on this GlobalManager.
	if e.metricsAddr, err = waitForHub(ctx, gm, e.caFile, e.metricsAddr); err != nil {
		return nil, err
	}
	m, err := scrapeMetrics(ctx, e.metricsAddr)
	if err != nil {
		return nil, err
	}
	writes := m.Get(`nereid_controller_edge_reports_per_status_write_count{kind="federatedlearningjob"}`)
	rate := float64(applied-base) / took.Seconds()
	progress("edge: backlog of %d reports drained at %.0f/s", applied-base, rate)
	return []result{
		{Name: "edge: reports queued during an outage, drained after a restart", Value: round(rate), Unit: "reports/s",
			Note: fmt.Sprintf("%d reports appended in %s while the GlobalManager was down, all in status %s after its start (the links' reconnects included); %.0f status writes (%.1f a write); %s; %s",
				applied-base, appendTook.Round(time.Millisecond), took.Round(time.Millisecond), writes, float64(applied-base)/max(1, writes),
				// The GlobalManager's CPU is the new process's, all of it since its start.
				describeUsage(u0, u1, took), profiled())},
		{Name: "edge: backlog drain rate / status write ceiling", Value: round(rate / ceilingRate), Unit: "ratio",
			Note: "against the ceiling row; the burst's ratio above has the goal, with the appends in its window"},
	}, nil
}

// edgeGoals are the goals for a fleet's size: those of 1,000 nodes,
// or of 10,000 for a fleet near that (this machine holds 9,872 at most).
type edgeGoals struct{ connect, memory, p99, restart string }

func goalsFor(nodes int) edgeGoals {
	if nodes >= 9000 {
		return edgeGoals{connect: "< 60", memory: "< 1024", p99: "< 100"}
	}
	return edgeGoals{memory: "< 150", p99: "< 25", restart: "< 5"}
}

// fileLimitSpare is what the bench needs open besides the links: its API
// clients, logs and the GlobalManager's own.
const fileLimitSpare = 256

// raiseFileLimit lifts this process's limit on open files to at least need,
// which the GlobalManager it starts inherits: each simulated node holds a
// socket and its store's file open here, and a socket in the GlobalManager.
// The hard limit is raised too when need is above it, which takes root.
func raiseFileLimit(need uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	if lim.Cur >= need {
		return nil
	}
	want := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("the edge section needs %d open files (-edge-nodes %d) and the limit is %d (hard %d): %w; run as root or lower -edge-nodes",
			need, (need-fileLimitSpare)/2, lim.Cur, lim.Max, err)
	}
	progress("edge: open files limit raised from %d to %d", lim.Cur, need)
	return nil
}

// saveHeapProfile writes the GlobalManager's heap profile (--profiling),
// after a garbage collection, to file.
func saveHeapProfile(ctx context.Context, addr, file string) error {
	body, err := httpGet(ctx, "http://"+addr+"/debug/pprof/heap?gc=1")
	if err != nil {
		return fmt.Errorf("reading the GlobalManager's heap profile: %w", err)
	}
	return os.WriteFile(file, []byte(body), 0o644)
}

// waitForHub waits until the GlobalManager has written the hub's CA and
// serves its metrics at an address other than old, and returns that address.
func waitForHub(ctx context.Context, gm *framework.Process, caFile, old string) (string, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := os.Stat(caFile)
		if addr := gm.HealthAddress(); err == nil && info.Size() > 0 && addr != "" && addr != old {
			return addr, nil
		}
		if time.Now().After(deadline) {
			return "", errors.New("the GlobalManager did not start its edge hub within a minute")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// measureDownstream updates count Datasets at rate, each time the Dataset of
// another node, and returns for each update the time from the Update's
// return to the moment that node's store holds that resourceVersion (or a
// later one), and how many were not seen there within 30s.
func measureDownstream(ctx context.Context, sedna sednaclient.Interface, fl *fleet, datasets []*sednav1.Dataset, rate float64, count int) ([]time.Duration, int, error) {
	client := sedna.SednaV1alpha1().Datasets(edgeNamespace)
	n := len(datasets)
	order := rand.Perm(n)
	type slot struct {
		mu sync.Mutex
		ds *sednav1.Dataset
	}
	slots := make([]slot, n)
	for i := range slots {
		slots[i].ds = datasets[i]
	}
	var (
		mu       sync.Mutex
		lat      []time.Duration
		lost     int
		firstErr error
		wg       sync.WaitGroup
	)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for j := range count {
		if j > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				wg.Wait()
				return nil, 0, ctx.Err()
			}
		}
		i := order[j%n]
		wg.Go(func() {
			s := &slots[i]
			s.mu.Lock()
			updated, err := updateDataset(ctx, client, s.ds, fmt.Sprintf("/data/%d-%d.txt", i, j))
			returned := time.Now()
			if err == nil {
				s.ds = updated
			}
			s.mu.Unlock()
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
				return
			}
			key := store.Key{Kind: sednav1.DatasetKind.Kind, Namespace: edgeNamespace, Name: updated.Name}
			d, ok := waitStored(ctx, fl.lcs[i].store, key, updated.ResourceVersion, returned, 30*time.Second)
			mu.Lock()
			if ok {
				lat = append(lat, d)
			} else {
				lost++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, lost, firstErr
}

// updateDataset changes a Dataset's URL, reading it again after a conflict.
func updateDataset(ctx context.Context, client interface {
	Get(context.Context, string, metav1.GetOptions) (*sednav1.Dataset, error)
	Update(context.Context, *sednav1.Dataset, metav1.UpdateOptions) (*sednav1.Dataset, error)
}, ds *sednav1.Dataset, url string) (*sednav1.Dataset, error) {
	for try := 0; ; try++ {
		c := ds.DeepCopy()
		c.Spec.URL = url
		updated, err := client.Update(ctx, c, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) || try == 3 {
			return updated, err
		}
		if ds, err = client.Get(ctx, ds.Name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
}

// waitStored polls st every millisecond until it holds key at resourceVersion
// rv or later, and returns the time from from to then.
func waitStored(ctx context.Context, st *store.Store, key store.Key, rv string, from time.Time, timeout time.Duration) (time.Duration, bool) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := from.Add(timeout)
	for {
		if o, ok, err := st.GetObject(key); err == nil && ok && framework.VersionAtLeast(o.ResourceVersion, rv) {
			return max(0, time.Since(from)), true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, false
		}
	}
}

// ceilingResult is what measureStatusCeiling measured.
type ceilingResult struct {
	writes    int
	conflicts int
	took      time.Duration
}

// ceilingNode is the status.edgeNodes entry the ceiling's writes change, a
// node no report comes from.
const ceilingNode = "bench-ceiling"

// measureStatusCeiling writes the status of the n jobs, round robin, writes
// times (or for at most limit) from benchWriters goroutines with no client
// rate limit: the rate the API server takes the status writes that applying
// reports makes.
func measureStatusCeiling(ctx context.Context, sedna sednaclient.Interface, jobs *jobTracker, n, writes int, limit time.Duration) (ceilingResult, error) {
	client := sedna.SednaV1alpha1().FederatedLearningJobs(edgeNamespace)
	type slot struct {
		mu  sync.Mutex
		job *sednav1.FederatedLearningJob
	}
	slots := make([]slot, n)
	for i := range slots {
		j, err := jobs.lister.FederatedLearningJobs(edgeNamespace).Get(edgeJob(i))
		if err != nil {
			return ceilingResult{}, err
		}
		slots[i].job = j.DeepCopy()
	}
	var done, conflicts atomic.Int64
	start := time.Now()
	deadline := start.Add(limit)
	err := framework.ForEach(ctx, writes, benchWriters, func(ctx context.Context, k int) error {
		if time.Now().After(deadline) {
			return nil
		}
		s := &slots[k%n]
		s.mu.Lock()
		defer s.mu.Unlock()
		for try := 0; ; try++ {
			job := s.job.DeepCopy()
			job.Status.EdgeNodes = setEdgeNode(job.Status.EdgeNodes, sednav1.EdgeNodeStatus{
				Name: ceilingNode, LastHeardTime: metav1.Now(), LastReportID: int64(k + 1),
				Worker: "bench", Stage: "train", State: "running",
			})
			updated, err := client.UpdateStatus(ctx, job, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) && try < 5 {
				conflicts.Add(1)
				if s.job, err = client.Get(ctx, job.Name, metav1.GetOptions{}); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			s.job = updated
			done.Add(1)
			return nil
		}
	})
	return ceilingResult{writes: int(done.Load()), conflicts: int(conflicts.Load()), took: time.Since(start)}, err
}

// setEdgeNode puts e in place of the entry of its node, keeping the list
// ordered by name as the GlobalManager does.
func setEdgeNode(nodes []sednav1.EdgeNodeStatus, e sednav1.EdgeNodeStatus) []sednav1.EdgeNodeStatus {
	out := make([]sednav1.EdgeNodeStatus, 0, len(nodes)+1)
	for _, n := range nodes {
		if n.Name != e.Name {
			out = append(out, n)
		}
	}
	out = append(out, e)
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// reportsResult is what measureReports measured.
type reportsResult struct {
	applied    int64
	appendTook time.Duration // appending them all to the outboxes
	took       time.Duration // from the first append to the last in status
	timedOut   bool
}

// measureReports appends count training worker reports to the outboxes, as
// the worker API does, report k to node k mod N, benchWriters at a time, and
// waits until the jobs' status counts them all.
func measureReports(ctx context.Context, fl *fleet, jobs *jobTracker, workers []string, count int, timeout time.Duration) (reportsResult, error) {
	base, _ := jobs.reportsApplied()
	start := time.Now()
	if err := appendReports(ctx, fl, workers, count, 1); err != nil {
		return reportsResult{}, err
	}
	res := reportsResult{appendTook: time.Since(start)}
	err := jobs.waitReports(ctx, base, count, timeout)
	if err != nil && ctx.Err() != nil {
		return reportsResult{}, err
	}
	applied, at := jobs.reportsApplied()
	res.applied, res.took, res.timedOut = applied-base, at.Sub(start), err != nil
	if res.timedOut {
		res.took = time.Since(start)
	}
	return res, nil
}

// appendReports appends count training worker reports to the outboxes, as
// the worker API does, report k to node k mod N (of round firstRound + k/N),
// benchWriters at a time.
func appendReports(ctx context.Context, fl *fleet, workers []string, count, firstRound int) error {
	n := len(workers)
	err := framework.ForEach(ctx, count, benchWriters, func(ctx context.Context, k int) error {
		i := k % n
		data, err := reportData(i, workers[i], firstRound+k/n)
		if err != nil {
			return err
		}
		_, err = fl.lcs[i].link.Outbox().AppendReport(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("appending to the outboxes: %w", err)
	}
	return nil
}

// reportData is what the worker API appends to the outbox for a report of
// job i's training worker (the pod worker) in a round.
func reportData(i int, worker string, round int) ([]byte, error) {
	body, err := json.Marshal(edgeproto.WorkerInfo{
		Name: worker, Namespace: edgeNamespace, OwnerName: edgeJob(i),
		OwnerKind: edgeproto.OwnerFederatedLearningJob, Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning,
		OwnerInfo: json.RawMessage(fmt.Sprintf(`{"currentRound":%d}`, round)),
	})
	if err != nil {
		return nil, err
	}
	return edgeproto.OutboxRecord(edgeproto.Report{Worker: worker, Body: body, ReceivedAt: time.Now().UTC()})
}

// measureLocalController runs a LocalController process for node until it is
// connected and synced, lets it idle 5s, and returns its resident memory.
func measureLocalController(ctx context.Context, bin, logPath, node, hubAddr, caFile, tokenFile, dataDir string) (float64, error) {
	workerPort, err := framework.PickFreePort()
	if err != nil {
		return 0, err
	}
	healthPort, err := framework.PickFreePort()
	if err != nil {
		return 0, err
	}
	health := "127.0.0.1:" + strconv.Itoa(healthPort)
	_ = os.Remove(logPath)
	cmd := localrun.LocalController{
		Node: node, Hub: hubAddr, CAFile: caFile, TokenFile: tokenFile,
		WorkerAddress: "127.0.0.1:" + strconv.Itoa(workerPort), HealthAddress: health,
		DataDir: dataDir, NodeRoot: dataDir + "-root",
	}
	lc := framework.NewProcess("localcontroller-"+node, bin, logPath, cmd.Args()...)
	if err := lc.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = lc.Signal(syscall.SIGTERM, 15*time.Second) }()
	deadline := time.Now().Add(time.Minute)
	for {
		if body, err := httpGet(ctx, "http://"+health+"/healthz"); err == nil && strings.Contains(body, "store in sync") {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the LocalController for %s was not synced within a minute (log: %s)", node, logPath)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(5 * time.Second):
	}
	return residentMiB(lc.Pid())
}

func httpGet(ctx context.Context, url string) (string, error) {
	return httpGetWithin(ctx, url, 10*time.Second)
}

// httpGetWithin is httpGet bounded by timeout rather than 10s.
func httpGetWithin(ctx context.Context, url string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}

// metricsSample is one reading of a /metrics page.
type metricsSample = framework.Metrics

func scrapeMetrics(ctx context.Context, addr string) (metricsSample, error) {
	return framework.ScrapeMetrics(ctx, "http://"+addr)
}

// waitLinksWritten waits until the Leases of n edge nodes say their link is
// connected (the hub writes them as nodes connect), and returns when.
func waitLinksWritten(ctx context.Context, kube kubernetes.Interface, n int, timeout time.Duration) (time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithNamespace(edgeNamespace),
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = links.LabelEdgeNode }))
	leases := factory.Coordination().V1().Leases()
	lister := leases.Lister()
	leases.Informer()
	factory.Start(ctx.Done())
	defer func() {
		cancel() // first: Shutdown waits for the informers to stop
		factory.Shutdown()
	}()
	var connected int
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		all, err := lister.List(labels.Everything())
		if err != nil {
			return false, err
		}
		connected = 0
		for _, l := range all {
			if l.Annotations[links.AnnotationLink] == links.LinkConnected {
				connected++
			}
		}
		return connected >= n, nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("only %d of %d edge nodes' Leases say connected: %w", connected, n, err)
	}
	return time.Now(), nil
}

// waitHubQuiet waits until the hub has sent no object message for quiet,
// for at most timeout.
func waitHubQuiet(ctx context.Context, addr string, quiet, timeout time.Duration) {
	waitQuiet(ctx, 500*time.Millisecond, quiet, timeout, func() (float64, bool) {
		m, err := scrapeMetrics(ctx, addr)
		if err != nil {
			return -1, false
		}
		return m.Get(`nereid_edgehub_messages_sent_total{type="upsert"}`) + m.Get(`nereid_edgehub_messages_sent_total{type="delete"}`), false
	})
}

// waitQuiet samples a count every poll until it has neither moved nor had
// work waiting (sample's busy) for quiet, or until timeout or ctx ends. It
// returns how far the count moved, how long after the start it last moved,
// and whether it went quiet.
func waitQuiet(ctx context.Context, poll, quiet, timeout time.Duration, sample func() (count float64, busy bool)) (moved float64, lastMove time.Duration, ok bool) {
	start := time.Now()
	first, _ := sample()
	last, since := first, start
	for time.Since(start) < timeout {
		if time.Since(since) >= quiet {
			return last - first, since.Sub(start), true
		}
		select {
		case <-ctx.Done():
			return last - first, since.Sub(start), false
		case <-time.After(poll):
		}
		if cur, busy := sample(); cur != last || busy {
			last, since = cur, time.Now()
		}
	}
	return last - first, since.Sub(start), false
}

// slowAcks says how many of the object acks the hub received between two
// samples took more than about 4s (its ack latency histogram's bucket just
// under the 5s after which it resends).
func slowAcks(before, after metricsSample) string {
	const prefix = `nereid_edgehub_object_ack_latency_seconds_bucket{le="`
	le, within := -1.0, 0.0
	for series, v := range after {
		b, ok := strings.CutPrefix(series, prefix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSuffix(b, `"}`), 64)
		if err == nil && f < 5 && f > le {
			le, within = f, v-before.Get(series)
		}
	}
	const count = "nereid_edgehub_object_ack_latency_seconds_count"
	all := after.Get(count) - before.Get(count)
	if le < 0 {
		return "no ack latency histogram"
	}
	return fmt.Sprintf("object acks slower than %gs: %.0f of %.0f", le, all-within, all)
}

// describeMemory summarises the Go runtime's memory metrics of a sample.
func describeMemory(m metricsSample) string {
	const mib = 1 << 20
	return fmt.Sprintf("Go heap in use %.1f MiB (next GC at %.1f; GC target %.0f%%), heap free but not returned %.1f MiB, stacks %.1f MiB, runtime's own %.1f MiB, %.0f goroutines",
		m.Get("go_memstats_heap_inuse_bytes")/mib, m.Get("go_memstats_next_gc_bytes")/mib, m.Get("go_gc_gogc_percent"),
		(m.Get("go_memstats_heap_idle_bytes")-m.Get("go_memstats_heap_released_bytes"))/mib,
		m.Get("go_memstats_stack_inuse_bytes")/mib,
		(m.Get("go_memstats_mspan_sys_bytes")+m.Get("go_memstats_mcache_sys_bytes")+m.Get("go_memstats_gc_sys_bytes")+
			m.Get("go_memstats_other_sys_bytes")+m.Get("go_memstats_buck_hash_sys_bytes"))/mib,
		m.Get("go_goroutines"))
}

// lastLogTime is the time of the last klog line of log that contains what.
// klog's header has no year: it is taken to be this year, in local time.
func lastLogTime(log, what string) (time.Time, bool) {
	var header string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, what) {
			header = line
		}
	}
	f := strings.Fields(header)
	if len(f) < 2 || len(f[0]) != 5 {
		return time.Time{}, false
	}
	now := time.Now()
	t, err := time.ParseInLocation("0102 15:04:05.000000", f[0][1:]+" "+f[1], time.Local)
	if err != nil {
		return time.Time{}, false
	}
	return t.AddDate(now.Year(), 0, 0), true
}
