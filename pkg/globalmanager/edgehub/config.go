package edgehub

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/certs"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/globalmanager/owner"
)

// Defaults of Config.
const (
	DefaultHeartbeatPeriod   = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultResendAfter       = 5 * time.Second
	DefaultLeaseUpdatePeriod = 10 * time.Second
	// DefaultLeaseWriteRate is Config.LeaseWriteRate's default: 1,000
	// connected nodes renewed every 20s, 10,000 every 200s.
	DefaultLeaseWriteRate = 50.0
	// DefaultSendWindow is how many Upserts and Deletes the hub keeps sent
	// and unacknowledged per node: enough to keep a LocalController busy
	// between two Acks, few enough that a node with a slow disk works through
	// them well within ResendAfter's worth of Acks.
	DefaultSendWindow = 1000
	// DefaultReportWrites is Config.ReportWrites' default: enough writes
	// at once to keep an API server busy (at 30 ms a write, 8 make 260 a
	// second), few enough that reports gather. Measured with `make bench`
	// at 1,000 nodes on 2 cores: 16 gave 4.6 reports a write's worth of
	// the ceiling, 8 gave 5.5, 4 gave 5.4.
	DefaultReportWrites = 8

	// DefaultTokenAudience is the audience of the projected ServiceAccount
	// token a LocalController presents. A token for the API server (the
	// default audience every Pod gets) is refused.
	DefaultTokenAudience = "nereid-edgehub"
	// DefaultServiceAccount is the one ServiceAccount accepted by default,
	// namespace/name: the LocalController's.
	DefaultServiceAccount = "nereid-system/nereid-localcontroller"
	// DefaultDaemonSet is the LocalControllers' DaemonSet, namespace/name:
	// the chart's, with its default release name and namespace.
	DefaultDaemonSet = "nereid-system/nereid-localcontroller"
	// DefaultNodeSelector selects the edge nodes a LocalController may
	// connect from: KubeEdge's edge node role.
	DefaultNodeSelector = links.EdgeNodeRole
	// EveryNode as NodeSelector lets a LocalController on any node connect,
	// as Sedna runs one on every node (an empty NodeSelector is the default).
	EveryNode = "*"
	// DefaultMaxRefusalsPerAddress is Config.MaxRefusalsPerAddress's
	// default: a LocalController refused for its token tries again with
	// backoff (at most every 30 s, two a minute), so sixty refusals a
	// minute from one address is dozens of broken LocalControllers behind
	// it, or someone trying tokens.
	DefaultMaxRefusalsPerAddress = 60

	DefaultReviewCacheTTL       = 10 * time.Second
	DefaultMaxCachedReviews     = 20000
	DefaultMaxConcurrentReviews = 64
	DefaultReviewQueueTimeout   = 10 * time.Second
)

// ConnectPath is the path LocalControllers connect to.
const ConnectPath = "/edge/v1/connect"

// Names of the objects the hub keeps in Config.Namespace.
const (
	// TLSSecretName is the Secret holding the generated serving certificate
	// (tls.crt, tls.key) and its CA (ca.crt, ca.key).
	TLSSecretName = certs.SecretName
	// CAConfigMapName is the ConfigMap publishing the CA (key ca.crt) that
	// LocalControllers trust.
	CAConfigMapName = certs.CAConfigMapName
	// CAKey is the key of the CA certificate in the Secret and the ConfigMap.
	CAKey = certs.CAKey
)

// Config is the hub's configuration. A zero duration takes its default.
type Config struct {
	// Address is where the hub listens, host:port (e.g. "0.0.0.0:10351").
	Address string
	// CertFile and KeyFile are the serving certificate and its key, PEM.
	// When both are empty the hub uses the certificate in the Secret
	// TLSSecretName, generating it (and a CA) the first time.
	CertFile, KeyFile string
	// Namespace holds the TLS Secret, the CA ConfigMap and the per-node Leases.
	Namespace string
	// Hostnames are the names and IP addresses LocalControllers reach the hub
	// by, put into a generated certificate; 127.0.0.1 and localhost always are.
	Hostnames []string
	// CAOutFile, when set, is where the hub also writes the CA's PEM (for a
	// local run, where LocalControllers read it from a file).
	CAOutFile string
	// Owner, when set, says what owns the Leases, Secret and ConfigMap the
	// hub creates in Namespace, as they are made (see owner.Follow).
	Owner owner.Owner
	// Pod is the GlobalManager's own Pod, labelled LabelServing while the
	// hub listens (see SetServing); zero outside a Pod.
	Pod PodRef

	// HeartbeatPeriod is how often the hub sends a Heartbeat (default 10s).
	HeartbeatPeriod time.Duration
	// ReadTimeout is how long the hub waits for any frame from a
	// LocalController, the Hello included, before it drops the connection
	// (default 30s).
	ReadTimeout time.Duration
	// ResendAfter is how long an Upsert or Delete waits for its Ack before it
	// is sent again (default 5s).
	ResendAfter time.Duration
	// LeaseUpdatePeriod is the most often a connected node's Lease is renewed
	// (default 10s); connects and disconnects are written at once.
	LeaseUpdatePeriod time.Duration
	// LeaseWriteRate bounds the renewals of all nodes' Leases, in writes a
	// second (default DefaultLeaseWriteRate), in rounds of a tenth of
	// LeaseUpdatePeriod, each with its share: with more connected nodes
	// than LeaseUpdatePeriod allows at that rate, each is renewed less
	// often, and its Lease's leaseDurationSeconds says so. Connects and
	// disconnects are written at once whatever the rate.
	LeaseWriteRate float64
	// SendWindow is the most Upserts and Deletes sent to a node and not yet
	// acknowledged (default DefaultSendWindow); the rest of a difference goes
	// out as Acks come in.
	SendWindow int
	// ReportWindow is how long a lane of reports (one object's, from one
	// node) waits, after the report that starts it, for more before it
	// applies them: a node's burst, which reaches the hub over some
	// milliseconds, then costs one status write instead of two. 0 waits
	// for no more than the lane's turn.
	ReportWindow time.Duration
	// ReportWrites is how many lanes of reports apply at once, across
	// nodes (default DefaultReportWrites): a lane takes its reports when
	// its turn comes, so while the API server is slower than the reports,
	// they gather into fewer, larger writes rather than queue there one
	// write each.
	ReportWrites int

	// TokenAudience is the audience a LocalController's token must have
	// (default DefaultTokenAudience); the TokenReview names it.
	TokenAudience string
	// ServiceAccounts are the ServiceAccounts, namespace/name, whose tokens
	// are accepted (default DefaultServiceAccount). Any other Pod's token,
	// on any node, is refused.
	ServiceAccounts []string
	// DaemonSet is the LocalControllers' DaemonSet, namespace/name
	// (default DefaultDaemonSet): a token is accepted only from a Pod whose
	// controller is this DaemonSet, by UID, in its namespace, where the
	// ServiceAccounts must be too. A bare Pod of the ServiceAccount, or one
	// of another controller, is refused.
	DaemonSet string
	// MaxOutboxReports is the most reports a LocalController's outbox holds
	// (its --max-outbox-reports; 0 takes edgeproto.DefaultMaxOutboxReports).
	// A Hello may state a LastReportID at most twice that past the last ID
	// the cloud recorded of its store (the outbox, and the reports
	// acknowledged after the node's Lease was last written when a hub
	// stopped without writing it); one further ahead is refused, since its
	// reports would make the store's later ones look applied.
	MaxOutboxReports int
	// ReachPeriod is how often every object's nodes are looked at for the
	// EdgeLinked condition (default DefaultReachPeriod; negative: never,
	// for tests of other things; reach.go).
	ReachPeriod time.Duration
	// NodeSelector is a label selector the node of the token's Pod must
	// match (default DefaultNodeSelector; EveryNode for any node).
	NodeSelector string
	// MaxRefusalsPerAddress is how many connections from one client
	// address (an IPv6 address's /64) may be refused for their token (401,
	// 403) within a minute; past it, for a minute, the address is refused
	// (429 with Retry-After) but for a token the hub verifies itself (a
	// LocalController's), and no token of it is reviewed. 0 takes
	// DefaultMaxRefusalsPerAddress; a negative value sets no limit.
	// Successes are not counted: thousands of nodes behind one address
	// connect as they would alone.
	MaxRefusalsPerAddress int
	// ReviewCacheTTL is how long the outcome of a token's review is reused
	// for the same token (default 10s; never past the token's expiry).
	ReviewCacheTTL time.Duration
	// MaxCachedReviews bounds the review cache (default 20000).
	MaxCachedReviews int
	// MaxConcurrentReviews bounds the TokenReviews in flight (default 64);
	// up to 16 times as many connections wait for one up to
	// ReviewQueueTimeout (default 10s), the rest get 503 at once, with a
	// Retry-After that gives each its turn (retryPlanner).
	MaxConcurrentReviews int
	ReviewQueueTimeout   time.Duration
	// ReviewEveryToken sends every token to a TokenReview. By default the
	// hub verifies a token itself when it can (auth.Authenticator.VerifyLocally: the
	// signature against the API server's ServiceAccount keys, read from
	// its /openid/v1/jwks, and the token's ServiceAccount and Pod by UID
	// in its caches) and reviews only the others.
	ReviewEveryToken bool

	// nodeSelector is NodeSelector parsed, by validate.
	nodeSelector labels.Selector
	// clock is where the hub's time comes from, its timers included: the
	// real clock unless a test sets a fake one.
	clock clock.WithTickerAndDelayedExecution
}

func (c Config) withDefaults() Config {
	setDefault := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDefault(&c.HeartbeatPeriod, DefaultHeartbeatPeriod)
	setDefault(&c.ReadTimeout, DefaultReadTimeout)
	setDefault(&c.ResendAfter, DefaultResendAfter)
	setDefault(&c.LeaseUpdatePeriod, DefaultLeaseUpdatePeriod)
	if c.ReachPeriod == 0 {
		c.ReachPeriod = DefaultReachPeriod
	}
	if c.LeaseWriteRate == 0 {
		c.LeaseWriteRate = DefaultLeaseWriteRate
	}
	setDefault(&c.ReviewCacheTTL, DefaultReviewCacheTTL)
	setDefault(&c.ReviewQueueTimeout, DefaultReviewQueueTimeout)
	if c.TokenAudience == "" {
		c.TokenAudience = DefaultTokenAudience
	}
	if len(c.ServiceAccounts) == 0 {
		c.ServiceAccounts = []string{DefaultServiceAccount}
	}
	if c.DaemonSet == "" {
		c.DaemonSet = DefaultDaemonSet
	}
	if c.NodeSelector == "" {
		c.NodeSelector = DefaultNodeSelector
	}
	if c.MaxRefusalsPerAddress == 0 {
		c.MaxRefusalsPerAddress = DefaultMaxRefusalsPerAddress
	}
	if c.MaxOutboxReports <= 0 {
		c.MaxOutboxReports = edgeproto.DefaultMaxOutboxReports
	}
	if c.MaxCachedReviews <= 0 {
		c.MaxCachedReviews = DefaultMaxCachedReviews
	}
	if c.MaxConcurrentReviews <= 0 {
		c.MaxConcurrentReviews = DefaultMaxConcurrentReviews
	}
	if c.SendWindow <= 0 {
		c.SendWindow = DefaultSendWindow
	}
	if c.ReportWrites <= 0 {
		c.ReportWrites = DefaultReportWrites
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return c
}

// validate checks a Config that has its defaults, and parses NodeSelector.
func (c *Config) validate() error {
	var errs []error
	if c.Address == "" {
		errs = append(errs, errors.New("Address is required"))
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("Namespace is required"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("CertFile and KeyFile are set together or not at all"))
	}
	if c.ReadTimeout <= c.HeartbeatPeriod {
		errs = append(errs, errors.New("ReadTimeout must be longer than HeartbeatPeriod"))
	}
	if c.ReportWindow < 0 {
		errs = append(errs, errors.New("ReportWindow must not be negative"))
	}
	if c.LeaseWriteRate < 0 || math.IsNaN(c.LeaseWriteRate) || math.IsInf(c.LeaseWriteRate, 0) {
		errs = append(errs, errors.New("LeaseWriteRate must be a finite number, not negative"))
	}
	dsNamespace, _, _ := strings.Cut(c.DaemonSet, "/")
	if err := CheckNamespacedName(c.DaemonSet); err != nil {
		errs = append(errs, fmt.Errorf("DaemonSet: %w", err))
	}
	for _, sa := range c.ServiceAccounts {
		if err := CheckNamespacedName(sa); err != nil {
			errs = append(errs, fmt.Errorf("ServiceAccounts: %w", err))
		} else if ns, _, _ := strings.Cut(sa, "/"); ns != dsNamespace {
			errs = append(errs, fmt.Errorf("ServiceAccount %s is not in the namespace of the DaemonSet %s: its Pods could not be the DaemonSet's", sa, c.DaemonSet))
		}
	}
	sel, err := labels.Everything(), error(nil)
	if c.NodeSelector != EveryNode {
		sel, err = labels.Parse(c.NodeSelector)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("NodeSelector %q: %w", c.NodeSelector, err))
	}
	c.nodeSelector = sel
	return errors.Join(errs...)
}

// CheckNamespacedName checks that s is namespace/name.
func CheckNamespacedName(s string) error {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%q is not namespace/name", s)
	}
	return nil
}

// authConfig is what the authenticator takes of c (with its defaults),
// counting in m.
func (c Config) authConfig(client kubernetes.Interface, m *metrics) auth.Config {
	dsNamespace, dsName, _ := strings.Cut(c.DaemonSet, "/")
	return auth.Config{
		Client: client, Audience: c.TokenAudience, ServiceAccounts: c.ServiceAccounts,
		DaemonSet:    types.NamespacedName{Namespace: dsNamespace, Name: dsName},
		NodeSelector: c.nodeSelector, ReviewEvery: c.ReviewEveryToken,
		ReviewCacheTTL: c.ReviewCacheTTL, MaxCachedReviews: c.MaxCachedReviews,
		MaxConcurrentReviews: c.MaxConcurrentReviews, ReviewQueueTimeout: c.ReviewQueueTimeout,
		Clock: c.clock, Verified: m.tokenVerified, Reviewed: m.tokenReviewed,
	}
}

// certsConfig is what the serving certificate takes of c (with its
// defaults).
func (c Config) certsConfig(client kubernetes.Interface) certs.Config {
	return certs.Config{
		Client: client, Namespace: c.Namespace, CertFile: c.CertFile, KeyFile: c.KeyFile,
		Hostnames: c.Hostnames, CAOutFile: c.CAOutFile, Clock: c.clock,
		Own: func(m *metav1.ObjectMeta) bool { return owner.OwnedBy(m, c.Owner.Ref()) },
	}
}
