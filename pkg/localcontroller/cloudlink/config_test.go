package cloudlink

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2/ktesting"

	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	ok := Config{URL: "wss://gm.example:10000" + ConnectPath, TokenFile: "/token", Node: "edge-1"}
	cases := map[string]struct {
		mutate   func(*Config)
		wantErrs []string
	}{
		"complete":                 {mutate: func(*Config) {}},
		"nothing":                  {mutate: func(c *Config) { *c = Config{} }, wantErrs: []string{"URL is required", "TokenFile", "Node"}},
		"plain ws":                 {mutate: func(c *Config) { c.URL = "ws://gm:1" + ConnectPath }, wantErrs: []string{"scheme must be wss"}},
		"no host":                  {mutate: func(c *Config) { c.URL = "wss://" + ConnectPath }, wantErrs: []string{"host is required"}},
		"read timeout ≤ heartbeat": {mutate: func(c *Config) { c.HeartbeatPeriod = time.Minute }, wantErrs: []string{"ReadTimeout 30s must be longer than HeartbeatPeriod 1m0s"}},
		"backoff upside down":      {mutate: func(c *Config) { c.BackoffMin = time.Hour }, wantErrs: []string{"BackoffMax 30s is below BackoffMin 1h0m0s"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st, err := store.Open(t.TempDir()+"/lc.db", store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cfg := ok
			tc.mutate(&cfg)
			logger, _ := ktesting.NewTestContext(t)
			_, err = New(logger, cfg, st, prometheus.NewRegistry())
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v", cfg)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

func TestNewRegistersItsMetricsOnce(t *testing.T) {
	st, err := store.Open(t.TempDir()+"/lc.db", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Config{URL: "wss://gm:1" + ConnectPath, TokenFile: "/token", Node: "edge-1"}
	reg := prometheus.NewRegistry()
	logger, _ := ktesting.NewTestContext(t)
	if _, err := New(logger, cfg, st, reg); err != nil {
		t.Fatalf("New: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range families {
		got[f.GetName()] = true
	}
	for _, name := range []string{"connected", "connects_total", "disconnects_total", "objects_applied_total",
		"reports_sent_total", "reports_acked_total", "reports_refused_total", "outbox_reports"} {
		if !got["nereid_cloudlink_"+name] {
			t.Errorf("nereid_cloudlink_%s is not registered", name)
		}
	}
	if _, err := New(logger, cfg, st, reg); err == nil {
		t.Error("a second link registered the same metrics")
	}
}

func TestBackoffGrowsWithinBounds(t *testing.T) {
	const minDelay, maxDelay = 500 * time.Millisecond, 30 * time.Second
	cases := map[string]struct {
		failures int
		lo, hi   time.Duration
	}{
		"first retry":         {0, minDelay / 2, minDelay},
		"after three":         {3, 4 * minDelay / 2 * 2, 8 * minDelay},
		"capped":              {7, maxDelay / 2, maxDelay},
		"far past the cap":    {1000, maxDelay / 2, maxDelay},
		"past 64 bit doubles": {70, maxDelay / 2, maxDelay},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for range 1000 {
				if d := backoff(minDelay, maxDelay, tc.failures); d < tc.lo || d > tc.hi {
					t.Fatalf("backoff(%d) = %s, want within [%s, %s]", tc.failures, d, tc.lo, tc.hi)
				}
			}
		})
	}
}

// A connection nothing accepted (the GlobalManager restarting) is retried
// within refusedBackoffMax however many failed before; any other failure
// backs off to BackoffMax.
func TestRetryDelayCapsRefusedConnections(t *testing.T) {
	const minDelay, maxDelay = 500 * time.Millisecond, 30 * time.Second
	refused := fmt.Errorf("connecting to the GlobalManager: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	for range 1000 {
		if d := retryDelay(minDelay, maxDelay, 10, refused); d < refusedBackoffMax/2 || d > refusedBackoffMax {
			t.Fatalf("after 10 refused connections: %s, want within [%s, %s]", d, refusedBackoffMax/2, refusedBackoffMax)
		}
		if d := retryDelay(minDelay, maxDelay, 10, errors.New("HTTP 503")); d < maxDelay/2 {
			t.Fatalf("after 10 failures the hub answered: %s, want at least %s", d, maxDelay/2)
		}
		if d := retryDelay(minDelay, time.Second, 10, refused); d > time.Second {
			t.Fatalf("with BackoffMax 1s: %s", d)
		}
	}
}

// A GlobalManager that refuses a connection as busy says when to come back:
// the link waits that long, spread over half as long again, however many
// failed before, within BackoffMin and BackoffMax.
func TestRetryDelayHonoursRetryAfter(t *testing.T) {
	const minDelay, maxDelay = 500 * time.Millisecond, 30 * time.Second
	busy := func(after time.Duration) error {
		return &busyError{after: after, err: errors.New("connecting to the GlobalManager: HTTP 503 Service Unavailable")}
	}
	for range 1000 {
		if d := retryDelay(minDelay, maxDelay, 10, busy(5*time.Second)); d < 5*time.Second || d > 7500*time.Millisecond {
			t.Fatalf("Retry-After 5s after 10 failures: %s, want within [5s, 7.5s]", d)
		}
		if d := retryDelay(minDelay, maxDelay, 0, busy(time.Hour)); d != maxDelay {
			t.Fatalf("Retry-After 1h: %s, want BackoffMax", d)
		}
	}
	resp := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"5"}}}
	if after, ok := retryAfter(resp); !ok || after != 5*time.Second {
		t.Errorf("retryAfter of a 503 with Retry-After: 5 = %s, %v", after, ok)
	}
	resp.Header.Set("Retry-After", "Wed, 21 Oct 2026 07:28:00 GMT")
	if _, ok := retryAfter(resp); ok {
		t.Error("a Retry-After date is taken for seconds")
	}
	resp = &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}}
	if after, ok := retryAfter(resp); !ok || after != 2*time.Second {
		t.Errorf("retryAfter of a 429 (the node connects too often) with Retry-After: 2 = %s, %v", after, ok)
	}
	resp = &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{"Retry-After": {"5"}}}
	if _, ok := retryAfter(resp); ok {
		t.Error("a 401 is taken for busy")
	}
}
