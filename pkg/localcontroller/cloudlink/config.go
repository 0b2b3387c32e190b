package cloudlink

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of Config. The read timeout is three heartbeat periods so that one
// late heartbeat does not drop a link that is only slow.
const (
	DefaultHeartbeatPeriod  = 10 * time.Second
	DefaultReadTimeout      = 30 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultBackoffMin       = 500 * time.Millisecond
	DefaultBackoffMax       = 30 * time.Second
	DefaultReportBatch      = 100
)

// ConnectPath is the path of the GlobalManager's edge endpoint.
const ConnectPath = "/edge/v1/connect"

// Config is the cloud link's configuration. A zero duration or batch takes its
// default.
type Config struct {
	// URL is the GlobalManager's edge endpoint,
	// wss://host:port/edge/v1/connect. Only wss is accepted: the channel's
	// identity guarantee rests on TLS.
	URL string
	// CAFile is the PEM file of the CA that signed the GlobalManager's serving
	// certificate. It is read again on every connection attempt, so a rotated
	// CA is picked up without a restart. Empty means the system's roots.
	CAFile string
	// TokenFile holds the projected ServiceAccount token of this
	// LocalController's Pod, with the edge hub's audience, sent as
	// "Authorization: Bearer". It is read again on every connection attempt
	// because the kubelet rotates projected tokens.
	TokenFile string
	// Node is the node this LocalController runs on, stated in the Hello.
	Node string

	// HeartbeatPeriod is how often the link sends a Heartbeat (default 10s).
	HeartbeatPeriod time.Duration
	// ReadTimeout is how long the link waits for any frame from the
	// GlobalManager before it drops the connection (default 30s). It must be
	// longer than the GlobalManager's heartbeat period.
	ReadTimeout time.Duration
	// HandshakeTimeout bounds the TCP, TLS and websocket handshakes of one
	// connection attempt (default 10s).
	HandshakeTimeout time.Duration
	// BackoffMin and BackoffMax bound the jittered exponential wait between
	// connection attempts (defaults 500ms and 30s).
	BackoffMin time.Duration
	BackoffMax time.Duration
	// ReportBatch is how many outbox reports the link reads from the store at
	// a time (default 100).
	ReportBatch int
	// Clock is the link's time: its heartbeats, read timeout, backoff and
	// Status (default the real clock). Socket write deadlines alone stay on
	// the wall clock, since they bound a write the kernel holds.
	Clock clock.WithTicker
}

func (c Config) withDefaults() Config {
	setDefault := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDefault(&c.HeartbeatPeriod, DefaultHeartbeatPeriod)
	setDefault(&c.ReadTimeout, DefaultReadTimeout)
	setDefault(&c.HandshakeTimeout, DefaultHandshakeTimeout)
	setDefault(&c.BackoffMin, DefaultBackoffMin)
	setDefault(&c.BackoffMax, DefaultBackoffMax)
	if c.ReportBatch <= 0 {
		c.ReportBatch = DefaultReportBatch
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// validate checks a Config that has its defaults.
func (c Config) validate() error {
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		errs = append(errs, errors.New("URL is required"))
	case err != nil:
		errs = append(errs, fmt.Errorf("URL: %w", err))
	case u.Scheme != "wss":
		errs = append(errs, fmt.Errorf("URL %q: scheme must be wss", c.URL))
	case u.Host == "":
		errs = append(errs, fmt.Errorf("URL %q: host is required", c.URL))
	}
	if c.TokenFile == "" {
		errs = append(errs, errors.New("TokenFile is required"))
	}
	if c.Node == "" {
		errs = append(errs, errors.New("Node is required"))
	}
	if c.ReadTimeout <= c.HeartbeatPeriod {
		errs = append(errs, fmt.Errorf("ReadTimeout %s must be longer than HeartbeatPeriod %s", c.ReadTimeout, c.HeartbeatPeriod))
	}
	if c.BackoffMax < c.BackoffMin {
		errs = append(errs, fmt.Errorf("BackoffMax %s is below BackoffMin %s", c.BackoffMax, c.BackoffMin))
	}
	return errors.Join(errs...)
}
