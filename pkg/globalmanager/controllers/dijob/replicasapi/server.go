package replicasapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/serving"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// maxStreamsPerConnection bounds the HTTP/2 requests open at a time on one
// connection; a worker makes one request at a time.
const maxStreamsPerConnection = 8

// shutdownTimeout bounds how long Serve waits for requests in flight when
// its context ends.
const shutdownTimeout = 10 * time.Second

// Server is the replicas API of DIJobs. See the package documentation.
type Server struct {
	cfg     Config
	pods    corelisters.PodLister // of cfg.Pods
	authn   Authenticator
	authz   Authorizer
	metrics *metrics
	// turns bound the API calls made before a caller is authorized, writes
	// those made for one, and inFlight the requests handled at a time.
	turns  *reviewTurns
	writes *rate.Limiter
	// keys verify tokens before any review (nil: every token is reviewed),
	// read while serving when readKeys is set; addresses counts refusals
	// by address.
	keys      *tokenreview.IssuerKeys
	readKeys  sync.Once
	ownKeys   bool
	addresses *tokenreview.AddressLimiter
	inFlight  chan struct{}
	// v1Jobs and v1Answers are the v1 server's state of the jobs it
	// changes and its answers kept for an Idempotency-Key.
	v1Jobs    *v1Jobs
	v1Answers *v1Answers
}

// New returns a server of cfg. Kube, DI, Jobs and Pods must be set.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, pods: corelisters.NewPodLister(cfg.Pods), authn: cfg.Authenticator, authz: cfg.Authorizer, metrics: newMetrics(cfg.Registerer),
		turns:     newReviewTurns(cfg.MaxConcurrentReviews, cfg.MaxReviewsPerSecond),
		writes:    rate.NewLimiter(rate.Limit(cfg.MaxWritesPerSecond), burstOf(cfg.MaxWritesPerSecond)),
		inFlight:  make(chan struct{}, cfg.MaxRequestsInFlight),
		v1Jobs:    newV1Jobs(cfg.V1.MaxJobs, cfg.V1.RequestsPerSecond, cfg.Clock),
		v1Answers: newV1Answers(cfg.V1.IdempotencyTTL, cfg.V1.MaxIdempotencyKeys),
		keys:      cfg.Keys,
		addresses: tokenreview.NewAddressLimiter(cfg.MaxRefusalsPerAddress, cfg.Clock),
	}
	if s.keys == nil && cfg.Kube != nil {
		s.keys = tokenreview.NewIssuerKeys(cfg.Kube.CoreV1().RESTClient(), clock.RealClock{})
		s.ownKeys = s.keys != nil
	}
	if s.authn == nil {
		s.authn = &tokenReviewer{
			client:    cfg.Kube,
			audiences: cfg.Audiences,
			turns:     s.turns,
			cache:     tokenreview.NewCache[reviewOutcome](cfg.ReviewCacheTTL, cfg.MaxCachedReviews, cfg.Clock),
		}
	}
	if s.authz == nil {
		s.authz = &accessReviewer{client: cfg.Kube, turns: s.turns}
	}
	return s
}

// Handler returns the server's routes, for a caller that serves them itself.
func (s *Server) Handler() http.Handler {
	return s.serveWith(s.handle)
}

// Serve answers requests on l until ctx ends, over TLS (1.2 at least) when
// tlsConfig is not nil (it must hold a certificate), at most
// Config.MaxConnections connections at a time, each cut off by the
// Config's timeouts; then it shuts down gracefully: no new requests, those in
// flight get shutdownTimeout to finish. It returns nil once shut down, or why
// serving stopped before.
func (s *Server) Serve(ctx context.Context, l net.Listener, tlsConfig *tls.Config) error {
	return s.serve(ctx, l, tlsConfig, s.Handler(), "the DIJob replicas API")
}

// ServeV1 serves V1Handler on l as Serve does, over plain HTTP: DI-engine's
// v1 coordinator and aggregators speak nothing else.
func (s *Server) ServeV1(ctx context.Context, l net.Listener) error {
	return s.serve(ctx, l, nil, s.V1Handler(), "the DI v1 replicas server")
}

func (s *Server) serve(ctx context.Context, l net.Listener, tlsConfig *tls.Config, h http.Handler, what string) error {
	logger := klog.FromContext(ctx)
	if s.ownKeys {
		// Both servers share them: read while the first one's ctx lasts
		// (the GlobalManager gives both the same).
		s.readKeys.Do(func() { go s.keys.Run(ctx) })
	}
	limits := s.cfg.Limits
	srv := limits.Server(h)
	srv.ErrorLog = klog.NewStandardLogger("WARNING")
	// Over TLS, HTTP/2 multiplexes requests on a connection (250 by
	// default): MaxConnections would not bound them.
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: maxStreamsPerConnection}
	// Requests keep ctx's logger but not its end: Shutdown lets them
	// finish.
	srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	if tlsConfig != nil {
		srv.TLSConfig = tlsConfig.Clone()
		if srv.TLSConfig.MinVersion < tls.VersionTLS12 {
			srv.TLSConfig.MinVersion = tls.VersionTLS12
		}
	}

	logger.Info("Serving "+what, "address", l.Addr().String(), "tls", tlsConfig != nil)
	if err := serving.Run(ctx, srv, limits.Listener(l), shutdownTimeout); err != nil {
		if ctx.Err() == nil {
			return fmt.Errorf("serving %s: %w", what, err)
		}
		return fmt.Errorf("shutting down %s: %w", what, err)
	}
	logger.Info("Stopped serving " + what)
	return nil
}
