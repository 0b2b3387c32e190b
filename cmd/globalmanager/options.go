package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/internal/command"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/pkg/globalmanager/jobmetrics"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"

	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
)

// defaultGCPercent is --gc-percent's default: with 1,000 edge nodes
// connected the GlobalManager's live heap is about 45 MB and Go's default
// (100) lets it grow to twice that between collections; at 50 its resident
// memory measured a fifth lower (docs/benchmark.md).
const defaultGCPercent = 50

// options are the GlobalManager's settings, from flags and an optional config file.
type options struct {
	kubeconfig     string
	namespace      string
	qps            float64
	burst          int
	apiCompression bool

	lcServer       string
	lcPort         int
	workerLogLevel string
	dataPathPrefix string

	gangScheduler string
	quotaBackfill int
	// metricsMaxJobs bounds the jobs the per-job gauges export.
	metricsMaxJobs int

	leaderElect      bool
	leaseNamespace   string
	leaseName        string
	leaseDuration    time.Duration
	renewDeadline    time.Duration
	retryPeriod      time.Duration
	healthAddress    string
	childBatchPeriod time.Duration
	reportWindow     time.Duration
	reportWrites     int
	profiling        bool
	gcPercent        int
	gcPercentGiven   bool // --gc-percent was given, on the command line or in --config
	memLimitPercent  int
	memLimitGiven    bool // --memory-limit-percent was given, likewise

	edgeAddress        string
	edgeCertFile       string
	edgeKeyFile        string
	edgeNamespace      string
	edgeHostnames      string
	edgeCAOut          string
	podName            string
	adoptSednaWorkers  bool
	ownerDeployment    string
	podNamespace       string
	edgeAudience       string
	edgeReviewAll      bool
	edgeSAs            string
	edgeDaemonSet      string
	edgeMaxRefusals    int
	edgeMaxOutbox      int
	edgeNodeSelector   string
	shutdownGracePhase time.Duration
}

// addFlags adds the GlobalManager's flags, those of every kind among them.
func (o *options) addFlags(fs *flag.FlagSet) {
	kinds.AddFlags(fs, kinds.All())
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"Path to the kubeconfig of the cluster to manage; empty means in-cluster configuration. Defaults to $KUBECONFIG.")
	fs.StringVar(&o.namespace, "namespace", "",
		"Only manage objects in this namespace; empty manages every namespace.")
	fs.Float64Var(&o.qps, "kube-api-qps", 500,
		"Steady requests per second the GlobalManager may send to the API server.")
	fs.IntVar(&o.burst, "kube-api-burst", 1000,
		"Requests the GlobalManager may send at once above --kube-api-qps.")
	fs.BoolVar(&o.apiCompression, "kube-api-compression", false,
		"Ask the API server for gzip-compressed responses. Off by default: the API server then compresses every watch event for this client, CPU it rather spends on requests; turn it on when the GlobalManager reaches the API server over a slow link.")
	fs.StringVar(&o.gangScheduler, "gang-scheduler", string(gang.Auto),
		"Where multi-pod jobs (federated learning jobs, DIJobs) go to be placed all together or not at all: "+
			"kubernetes (a Workload and a PodGroup of scheduling.k8s.io/v1beta1: Kubernetes 1.37 with the GenericWorkload gate), "+
			"volcano (a PodGroup of scheduling.volcano.sh/v1beta1, pods for the scheduler named volcano), "+
			"coscheduling (a PodGroup of scheduling.x-k8s.io/v1alpha1, for the scheduler-plugins coscheduling plugin), "+
			"none (pods are placed one by one), or auto: the first of kubernetes, volcano, coscheduling the API server serves, else none. "+
			"A job's annotation "+gang.AnnotationScheduler+" overrides it. A mode named here that the API server does not serve stops the GlobalManager.")
	fs.IntVar(&o.metricsMaxJobs, "metrics-max-jobs", jobmetrics.DefaultMaxJobs,
		"The per-job gauges (nereid_job_*) export at most this many jobs, the first by kind, namespace and name; nereid_job_metrics_omitted_jobs counts the others.")
	fs.IntVar(&o.quotaBackfill, "quota-backfill-limit", admission.DefaultBackfillLimit,
		"In a namespace with ResourceQuotas, jobs are admitted whole, highest pod priority first, then oldest first. "+
			"A job that does not fit lets later, smaller jobs that fit go ahead of it at most this many times; "+
			"then the jobs behind it wait until it fits. 0 keeps strict order.")
	fs.StringVar(&o.lcServer, "lc-server", "",
		"LC_SERVER put into every worker as is. Empty: http://<the worker's node address>:--lc-port, the address from the downward API (status.hostIP), "+
			"since the LocalController listens on its node's host network. A worker template that sets LC_SERVER itself keeps it.")
	fs.IntVar(&o.lcPort, "lc-port", 9100,
		"Port of the LocalControllers' worker API (their --worker-address) on every edge node, for LC_SERVER.")
	fs.StringVar(&o.workerLogLevel, "worker-log-level", "INFO",
		"LOG_LEVEL put into every worker.")
	fs.StringVar(&o.dataPathPrefix, "data-path-prefix", "/home/data",
		"Where model and dataset paths on a node are mounted inside workers (DATA_PATH_PREFIX).")
	fs.BoolVar(&o.leaderElect, "leader-elect", true,
		"Take a Lease before acting, so that of several replicas exactly one acts.")
	fs.StringVar(&o.leaseNamespace, "leader-elect-namespace", "kube-system",
		"Namespace of the leader election Lease.")
	fs.StringVar(&o.leaseName, "leader-elect-name", "nereid-globalmanager",
		"Name of the leader election Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long a standby waits after the last renewal before taking the lease.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader keeps trying to renew before it gives up and stops.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How often candidates try to take or renew the lease.")
	fs.DurationVar(&o.childBatchPeriod, "child-event-batch-period", 0,
		"How long events of a job's pods are gathered into one sync (and one status write); spec edits are never delayed. 0 syncs on every event.")
	fs.DurationVar(&o.reportWindow, "edge-report-window", 50*time.Millisecond,
		"How long the hub waits, after a node's report about an object, for more of that node's reports about it before it applies them together in one status write (a node's burst reaches the hub over some milliseconds). Reports that arrive while the object's previous write waits for its turn or is in flight, from any node, always go into its next write together. 0 waits for no more than the turn.")
	fs.IntVar(&o.reportWrites, "edge-report-writes", edgehub.DefaultReportWrites,
		"Status writes of edge reports in flight at once, across objects, nodes and kinds. A write takes the reports about its object when its turn comes, so while the API server is slower than the reports they gather into fewer, larger writes instead of each queueing there for a write of its own (nereid_edgehub_report_lanes_waiting shows those waiting). Enough to keep the API server busy; more only lengthens its queue.")
	fs.IntVar(&o.gcPercent, "gc-percent", defaultGCPercent,
		"How far the Go heap may grow past what is live before the garbage collector runs, in percent (Go's GOGC). "+
			"The default is below Go's 100: most of the GlobalManager's heap is live (its caches and connections), and at Go's 100 its resident memory "+
			"is about a quarter higher (1,000 edge nodes after a report burst: 165 against 132 MiB), for less frequent collections (docs/benchmark.md). "+
			"When this flag is not given, a GOGC environment variable wins (GOGC=off with GOMEMLIMIT for a limit alone).")
	command.AddMemoryLimitFlag(fs, &o.memLimitPercent)
	fs.BoolVar(&o.profiling, "profiling", false,
		"Serve Go's profiles (heap, goroutines, CPU) under /debug/pprof/ on --health-address. Off by default: a heap profile shows what the GlobalManager holds, so turn it on only where that address is reachable by those who may see it.")
	fs.StringVar(&o.edgeAddress, "edge-address", "",
		"Address of the edge hub: the wss endpoint (/edge/v1/connect) LocalControllers connect to. Empty runs no hub.")
	fs.StringVar(&o.edgeCertFile, "edge-cert-file", "",
		"Serving certificate of the edge hub (PEM). Empty: one is generated, with its CA, and kept in the Secret nereid-edgehub-tls of --edge-namespace.")
	fs.StringVar(&o.edgeKeyFile, "edge-key-file", "",
		"Private key of --edge-cert-file (PEM).")
	fs.StringVar(&o.edgeNamespace, "edge-namespace", "nereid-system",
		"Namespace of the edge hub's Secret, of the ConfigMap nereid-edgehub-ca (the CA LocalControllers trust) and of one Lease per edge node showing its link (kubectl get lease -l nereid.io/edge-node).")
	fs.StringVar(&o.edgeHostnames, "edge-hostnames", "",
		"Comma-separated DNS names and IPs LocalControllers use to reach the hub, put in a generated certificate (127.0.0.1 and localhost are always in).")
	fs.StringVar(&o.edgeCAOut, "edge-ca-out", "",
		"Also write the edge hub's CA (PEM) to this file, for LocalControllers started beside the GlobalManager.")
	fs.StringVar(&o.podName, "pod-name", os.Getenv("POD_NAME"),
		"The GlobalManager's own Pod (default $POD_NAME, from the downward API). While its edge hub listens, the Pod carries the label "+
			edgehub.LabelServing+"="+edgehub.ServingValue+", which the hub's Service selects, so edge nodes reach the leader and never a standby. Empty labels nothing.")
	fs.BoolVar(&o.adoptSednaWorkers, "adopt-sedna-workers", false,
		"At start, adopt and then replace the worker pods, Services, Deployments and autoscalers that Sedna's GlobalManager left for its jobs "+
			"(a switch from Sedna in place), so no job has two sets of workers. Needs patch on those kinds and delete on Services and Deployments; "+
			"leave it off once the switch is done.")
	fs.StringVar(&o.ownerDeployment, "owner-deployment", "",
		"The GlobalManager's Deployment in --edge-namespace. What the GlobalManager creates there (one Lease per edge node, the hub's Secret and CA ConfigMap, "+
			"and the leader election Lease when --leader-elect-namespace is the same) is owned by it, so deleting it (helm uninstall) deletes them too. "+
			"It is followed with a watch, not read once: what is made is owned by the Deployment as it is then (none while it is not there). Empty: no owner.")
	fs.StringVar(&o.podNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"),
		"Namespace of --pod-name (default $POD_NAMESPACE).")
	fs.StringVar(&o.edgeAudience, "edge-token-audience", edgehub.DefaultTokenAudience,
		"Audience a LocalController's token must have: the LocalController presents a projected ServiceAccount token with this audience, and the hub's TokenReview names it. A Pod's default token (for the API server) is refused.")
	fs.BoolVar(&o.edgeReviewAll, "edge-review-every-token", false,
		"Send every LocalController token the hub does not refuse itself to a TokenReview. By default the hub verifies a token itself when it can, as the API server would, "+
			"and costs it nothing: the signature against the API server's ServiceAccount keys (read from its /openid/v1/jwks, which every ServiceAccount may read), "+
			"the issuer, the audience and the times, and the token's ServiceAccount and Pod by UID in the hub's caches; any token it cannot verify so is reviewed. "+
			"A token the hub accepted itself is still reviewed after its connection starts, at most 20 a second, and a refusal closes the connection. "+
			"Either way, while the hub holds the keys, a token they do not verify (junk: another key, a made-up key ID, wrong claims) is refused without a review.")
	fs.StringVar(&o.edgeSAs, "edge-service-accounts", edgehub.DefaultServiceAccount,
		"Comma-separated namespace/name of the ServiceAccounts whose tokens the edge hub accepts: the LocalControllers'. Any other Pod's token, on any node, is refused.")
	fs.StringVar(&o.edgeDaemonSet, "edge-daemonset", edgehub.DefaultDaemonSet,
		"namespace/name of the LocalControllers' DaemonSet: the edge hub accepts a token only from a Pod this DaemonSet controls (the Pod's controller "+
			"ownerReference names it with its current UID), so a bare Pod of an --edge-service-accounts ServiceAccount, or one of another controller, is refused (403). "+
			"The default is the chart's DaemonSet under its default release name and namespace; the ServiceAccounts must be in its namespace. "+
			"It cannot be empty: without it any Pod made to run as the ServiceAccount would be a LocalController, so the GlobalManager does not start. "+
			"The GlobalManager needs get, list and watch on this DaemonSet.")
	fs.IntVar(&o.edgeMaxRefusals, "edge-max-refusals-per-address", edgehub.DefaultMaxRefusalsPerAddress,
		"Connections from one client address (an IPv6 address's /64) the edge hub refuses for their token (401 or 403) within a minute before it refuses "+
			"that address for a minute, 429 with Retry-After, without a TokenReview, but for a token the hub verifies itself (a LocalController's): junk "+
			"sent from a LocalController's address (its node, a NAT) never keeps it out. Only refusals count: any number of LocalControllers behind one "+
			"address connect. Behind a proxy that hides client addresses (a LoadBalancer Service with externalTrafficPolicy Cluster), every client shares "+
			"the proxy's: raise it, or set 0 for no limit.")
	fs.IntVar(&o.edgeMaxOutbox, "edge-max-outbox-reports", edgeproto.DefaultMaxOutboxReports,
		"The most reports a LocalController's outbox holds (the LocalControllers' --max-outbox-reports). A LocalController's hello states the last "+
			"report ID its store gave; one more than twice this past the last ID the cloud recorded of that store (the node's Lease, "+
			"nereid.io/last-report-id) is refused, since its reports would make the store's later reports look applied. Raise it with theirs.")
	fs.StringVar(&o.edgeNodeSelector, "edge-node-selector", edgehub.DefaultNodeSelector,
		"Label selector the node of a LocalController's Pod must match: a LocalController's Pod on any other node is refused. "+
			"Empty (--edge-node-selector=) accepts every node, for LocalControllers on every node as Sedna runs them. "+
			"Datasets and pinned workers on nodes it does not match get the EdgeLinked condition, reason NoLocalController.")
	fs.StringVar(&o.healthAddress, "health-address", "127.0.0.1:10350",
		"Address of /healthz, /readyz and /metrics (Prometheus).")
	fs.DurationVar(&o.shutdownGracePhase, "shutdown-timeout", 10*time.Second,
		"How long SIGTERM waits for workers to finish their current sync.")
}

// validate checks the GlobalManager's own flags and those of every kind.
func (o *options) validate() error {
	errs := kinds.Validate(kinds.All())
	if o.childBatchPeriod < 0 || o.reportWindow < 0 {
		errs = append(errs, errors.New("--child-event-batch-period and --edge-report-window must not be negative"))
	}
	if o.gcPercent < 1 {
		errs = append(errs, fmt.Errorf("--gc-percent %d: want at least 1 (to turn the collector's target off, set GOGC=off and GOMEMLIMIT instead)", o.gcPercent))
	}
	if err := command.ValidateMemoryLimitPercent(command.MemoryLimitFlag, o.memLimitPercent); err != nil {
		errs = append(errs, err)
	}
	if o.reportWrites <= 0 {
		errs = append(errs, errors.New("--edge-report-writes must be positive"))
	}
	if o.qps <= 0 || o.burst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if _, err := gang.ParseMode(o.gangScheduler); err != nil {
		errs = append(errs, fmt.Errorf("--gang-scheduler: %w", err))
	}
	if o.metricsMaxJobs < 1 {
		errs = append(errs, fmt.Errorf("--metrics-max-jobs %d: want at least 1", o.metricsMaxJobs))
	}
	if o.quotaBackfill < 0 {
		errs = append(errs, fmt.Errorf("--quota-backfill-limit %d: want 0 or more", o.quotaBackfill))
	}
	if o.podName != "" && o.podNamespace == "" {
		errs = append(errs, errors.New("--pod-name needs --pod-namespace (or $POD_NAMESPACE)"))
	}
	if o.lcPort < 1 || o.lcPort > 65535 {
		errs = append(errs, fmt.Errorf("--lc-port %d is not a port", o.lcPort))
	}
	if (o.edgeCertFile == "") != (o.edgeKeyFile == "") {
		errs = append(errs, errors.New("--edge-cert-file and --edge-key-file go together"))
	}
	dsNamespace, _, _ := strings.Cut(o.edgeDaemonSet, "/")
	if err := edgehub.CheckNamespacedName(o.edgeDaemonSet); err != nil {
		errs = append(errs, fmt.Errorf("--edge-daemonset: %w", err))
	}
	for _, sa := range o.edgeServiceAccounts() {
		if err := edgehub.CheckNamespacedName(sa); err != nil {
			errs = append(errs, fmt.Errorf("--edge-service-accounts: %w", err))
		} else if ns, _, _ := strings.Cut(sa, "/"); ns != dsNamespace {
			errs = append(errs, fmt.Errorf("--edge-service-accounts: %s is not in the namespace of --edge-daemonset %s, so none of its Pods could be a LocalController", sa, o.edgeDaemonSet))
		}
	}
	if len(o.edgeServiceAccounts()) == 0 {
		errs = append(errs, errors.New("--edge-service-accounts must name at least one ServiceAccount"))
	}
	if _, err := labels.Parse(o.edgeNodeSelector); err != nil && o.edgeNodeSelector != edgehub.EveryNode {
		errs = append(errs, fmt.Errorf("--edge-node-selector %q: %w", o.edgeNodeSelector, err))
	}
	if o.edgeMaxRefusals < 0 {
		errs = append(errs, fmt.Errorf("--edge-max-refusals-per-address %d: want 0 (no limit) or more", o.edgeMaxRefusals))
	}
	if o.edgeMaxOutbox < 1 {
		errs = append(errs, fmt.Errorf("--edge-max-outbox-reports %d: want 1 or more", o.edgeMaxOutbox))
	}
	if strings.TrimSpace(o.edgeAudience) == "" {
		errs = append(errs, errors.New("--edge-token-audience must not be empty"))
	}
	if o.leaderElect && o.renewDeadline >= o.leaseDuration {
		errs = append(errs, errors.New("--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"))
	}
	return errors.Join(errs...)
}

// edgeServiceAccounts is --edge-service-accounts as a list.
// pod is the GlobalManager's own Pod, when it runs in one.
func (o *options) pod() edgehub.PodRef {
	return edgehub.PodRef{Namespace: o.podNamespace, Name: o.podName}
}

// edgeRefusalsPerAddress is --edge-max-refusals-per-address as
// edgehub.Config takes it: negative for no limit.
func (o *options) edgeRefusalsPerAddress() int {
	if o.edgeMaxRefusals == 0 {
		return -1
	}
	return o.edgeMaxRefusals
}

func (o *options) edgeServiceAccounts() []string {
	return command.SplitList(o.edgeSAs)
}

// applyConfigFile sets flags from a YAML file of flag names and values; flags
// given on the command line win over the file.
func applyConfigFile(fs *flag.FlagSet, path string, explicit map[string]bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("parsing config file %s: %w", path, err)
	}
	for name, v := range values {
		if fs.Lookup(name) == nil || name == "config" {
			return fmt.Errorf("config file %s: unknown setting %q (settings are flag names without dashes)", path, name)
		}
		if explicit[name] {
			continue
		}
		if err := fs.Set(name, strings.TrimSpace(fmt.Sprint(v))); err != nil {
			return fmt.Errorf("config file %s: %s: %w", path, name, err)
		}
	}
	return nil
}

// hubNodeSelector is --edge-node-selector for the hub: an empty one (the
// default is not) accepts every node.
func (o *options) hubNodeSelector() string {
	if o.edgeNodeSelector == "" {
		return edgehub.EveryNode
	}
	return o.edgeNodeSelector
}
