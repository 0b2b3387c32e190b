package register

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/replicasapi"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// DefaultV1ServerURL is DI-orchestrator's default KUBERNETES_SERVER_URL
// (its common.DefaultServerURL).
const DefaultV1ServerURL = "di-server.di-system:8080"

// v1ServerFlags are the flags of the v1 replicas server.
type v1ServerFlags struct {
	address, url, aggregatorConfig string
}

func (f *v1ServerFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.address, "di-v1-server-address", "",
		"Address of the v1 replicas server, plain HTTP: DI-orchestrator v0.2.2's di-server routes (GET, POST, DELETE /v1alpha1/replicas, POST /v1alpha1/replicas/failed, "+
			"GET /healthz), which DI-engine's v1 coordinator and aggregators call to get, add, remove and replace the collectors and learners of a v1alpha1 DIJob. "+
			"A request without a token is taken only from the address of the coordinator or aggregator pod it names; one with a token, when the token may update the DIJob. "+
			"Empty serves none.")
	fs.StringVar(&f.url, "di-v1-server-url", DefaultV1ServerURL,
		"host:port put into the pods of v1alpha1 DIJobs as KUBERNETES_SERVER_URL: where DI-engine reaches the v1 replicas server "+
			"(the Service in front of --di-v1-server-address; DI-orchestrator's default is "+DefaultV1ServerURL+").")
	fs.StringVar(&f.aggregatorConfig, "di-aggregator-config", replicasapi.DefaultAggregatorConfig.String(),
		"<namespace>/<name> of the AggregatorConfig (diengine.opendilab.org/v1alpha1) the v1 replicas server makes aggregators from, "+
			"for learners that ask for more than one GPU. With --namespace, it must be in that namespace: the GlobalManager caches no other.")
}

func (f *v1ServerFlags) validate() []error {
	var errs []error
	if f.address != "" {
		if _, _, err := net.SplitHostPort(f.address); err != nil {
			errs = append(errs, fmt.Errorf("--di-v1-server-address %q: %w", f.address, err))
		}
	}
	if f.url != "" {
		host, port, err := net.SplitHostPort(f.url)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || host == "" || p < 1 || p > 65535 || strings.Contains(f.url, "/") {
			errs = append(errs, fmt.Errorf("--di-v1-server-url %q: want host:port, as DI-engine reads KUBERNETES_SERVER_URL (no scheme, no path)", f.url))
		}
	}
	if _, err := parseNamespacedName(f.aggregatorConfig); err != nil {
		errs = append(errs, fmt.Errorf("--di-aggregator-config: %w", err))
	}
	return errs
}

// parseNamespacedName reads <namespace>/<name>.
func parseNamespacedName(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return types.NamespacedName{}, fmt.Errorf("%q: want <namespace>/<name>", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// config is the v1 server's part of the replicas API's Config; it starts
// the cache of AggregatorConfigs only when the server is served.
func (f *v1ServerFlags) config(d kinds.Deps, edgeLinkGrace time.Duration) replicasapi.V1Config {
	cfg := replicasapi.V1Config{ServerURL: f.url, EdgeLinkGrace: edgeLinkGrace}
	cfg.AggregatorConfig, _ = parseNamespacedName(f.aggregatorConfig) // validated
	if f.address != "" {
		ag := d.Informers.Diengine().V1alpha1().AggregatorConfigs()
		cfg.AggregatorConfigs, cfg.AggregatorConfigsSynced = ag.Lister(), ag.Informer().HasSynced
	}
	return cfg
}

// serveV1 serves the v1 replicas server on --di-v1-server-address until
// ctx is done.
func (r *runner) serveV1(ctx context.Context) error {
	ln, err := net.Listen("tcp", r.v1Address)
	if err != nil {
		return fmt.Errorf("listening on --di-v1-server-address %s: %w", r.v1Address, err)
	}
	return r.api.ServeV1(ctx, ln)
}
