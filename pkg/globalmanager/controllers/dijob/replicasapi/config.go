package replicasapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/serving"
	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	dilisters "github.com/nereid-ml/nereid/pkg/client/listers/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// Defaults of Config.
const (
	// DefaultPort is the port DI-engine workers listen on (DI's DefaultPort).
	DefaultPort int32 = 22270
	// DefaultMaxBodyBytes bounds a request body: a replicas request is a few
	// dozen bytes, a job's profilings a few KiB.
	DefaultMaxBodyBytes int64 = 64 << 10
	// DefaultMaxReplicasPerTask is the most replicas a task may be scaled to
	// through this API.
	DefaultMaxReplicasPerTask int32 = div2alpha1.MaxTaskReplicas
	// DefaultServiceDomain ends the DNS names of pods without an IP.
	DefaultServiceDomain = "svc"

	DefaultReviewCacheTTL       = 10 * time.Second
	DefaultMaxCachedReviews     = 4096
	DefaultMaxConcurrentReviews = 32
	DefaultMaxReviewsPerSecond  = 200
	// DefaultMaxRefusalsPerAddress is the edge hub's
	// (edgehub.DefaultMaxRefusalsPerAddress).
	DefaultMaxRefusalsPerAddress = 60
	DefaultMaxWritesPerSecond    = 20
	DefaultMaxRequestsInFlight   = 1024
	DefaultRequestTimeout        = 30 * time.Second

	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 45 * time.Second
	DefaultIdleTimeout       = 90 * time.Second
	DefaultMaxHeaderBytes    = 32 << 10
	DefaultMaxConnections    = 1024
)

// Config is what the server needs. Kube, DI, Jobs and Pods are required; a
// zero value of any other field takes its default.
type Config struct {
	// Kube creates TokenReviews and SubjectAccessReviews, and reads a
	// worker's pod that Pods does not have yet.
	Kube kubernetes.Interface
	// DI updates DIJobs (spec and status).
	DI versioned.Interface
	// Jobs is the informer's lister of DIJobs.
	Jobs dilisters.DIJobLister
	// Pods is the pod informer's cache, indexed by owner
	// (common.IndexChildren): a job's replicas are found by one lookup, not
	// by matching every pod of its namespace.
	Pods cache.Indexer

	// Port is the port of a replica whose pod names none "di-port" (22270).
	Port int32
	// ServiceDomain ends the DNS name given for a pod without an IP,
	// <pod>.di-<job>.<namespace>.<ServiceDomain> ("svc"; "svc.cluster.local"
	// for a fully qualified name).
	ServiceDomain string
	// Audiences, when set, are the audiences a token must be valid for; the
	// TokenReview names them. When empty, tokens for the API server are taken.
	Audiences []string
	// MaxBodyBytes bounds a request body (64 KiB); larger ones get 413.
	MaxBodyBytes int64
	// MaxReplicasPerTask bounds a task's replicas (1024).
	MaxReplicasPerTask int32

	// ReviewCacheTTL is how long the outcome of a TokenReview is reused for
	// the same token (10s); negative turns the cache off.
	ReviewCacheTTL time.Duration
	// MaxCachedReviews bounds the cache of TokenReviews (4096 tokens).
	MaxCachedReviews int
	// MaxConcurrentReviews bounds the TokenReviews and SubjectAccessReviews
	// in flight (32).
	MaxConcurrentReviews int
	// MaxReviewsPerSecond bounds the rate of the API calls made for callers
	// before they are authorized: TokenReviews, SubjectAccessReviews and
	// reads of a token's pod (200, bursts of twice that).
	MaxReviewsPerSecond float64
	// MaxRefusalsPerAddress is how many requests from one client address
	// (an IPv6 address's /64) may be refused for their token (401) within a
	// minute (60); past it, for a minute, only a token the API server's keys
	// verify is reviewed, any other is answered 429 with Retry-After
	// (tokenreview.AddressLimiter). Negative sets no limit.
	MaxRefusalsPerAddress int
	// Keys, when set, are the API server's ServiceAccount token keys,
	// read (IssuerKeys.Run) by the caller; when nil, the server reads them
	// through Kube while it serves (none with a fake clientset). A token
	// they do not verify is refused without a TokenReview.
	Keys *tokenreview.IssuerKeys
	// MaxWritesPerSecond bounds the rate of requests that write a DIJob
	// (scaling, profilings), every job's together (20, bursts of twice that).
	MaxWritesPerSecond float64
	// MaxRequestsInFlight bounds the requests handled at a time (1024);
	// past it, a request is answered 503 at once.
	MaxRequestsInFlight int
	// RequestTimeout bounds the work on one request, API calls included (30s).
	RequestTimeout time.Duration

	// Limits are the http.Server's bounds on its clients: ReadHeaderTimeout
	// 5s, ReadTimeout 15s, WriteTimeout 45s, IdleTimeout 90s, MaxHeaderBytes
	// 32 KiB, MaxConnections 1024 (past it, new ones wait to be accepted).
	serving.Limits

	// V1 is the v1 replicas server's (V1Handler).
	V1 V1Config

	// Recorder, when set, records on a v1 job why replicas its coordinator
	// asked for could not be made (v1Note).
	Recorder record.EventRecorder
	// Registerer, when set, gets the server's request counter.
	Registerer prometheus.Registerer

	// Authenticator and Authorizer replace the TokenReview and
	// SubjectAccessReview made through Kube (for tests).
	Authenticator Authenticator
	Authorizer    Authorizer

	// Clock is the server's time: the review cache's, and a request's
	// duration in its log line (kinds.Deps.Clock). Nil is the real clock.
	Clock clock.PassiveClock
}

// withDefaults returns cfg with its zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.ServiceDomain == "" {
		cfg.ServiceDomain = DefaultServiceDomain
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxReplicasPerTask <= 0 {
		cfg.MaxReplicasPerTask = DefaultMaxReplicasPerTask
	}
	if cfg.ReviewCacheTTL == 0 {
		cfg.ReviewCacheTTL = DefaultReviewCacheTTL
	}
	if cfg.MaxCachedReviews <= 0 {
		cfg.MaxCachedReviews = DefaultMaxCachedReviews
	}
	if cfg.MaxConcurrentReviews <= 0 {
		cfg.MaxConcurrentReviews = DefaultMaxConcurrentReviews
	}
	if cfg.MaxReviewsPerSecond <= 0 {
		cfg.MaxReviewsPerSecond = DefaultMaxReviewsPerSecond
	}
	if cfg.MaxRefusalsPerAddress == 0 {
		cfg.MaxRefusalsPerAddress = DefaultMaxRefusalsPerAddress
	}
	if cfg.MaxWritesPerSecond <= 0 {
		cfg.MaxWritesPerSecond = DefaultMaxWritesPerSecond
	}
	if cfg.MaxRequestsInFlight <= 0 {
		cfg.MaxRequestsInFlight = DefaultMaxRequestsInFlight
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	cfg.V1 = cfg.V1.withDefaults()
	return cfg
}
