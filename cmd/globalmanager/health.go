package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
)

// health is what /healthz and /readyz answer from.
type health struct {
	// ready is "" once the controllers act (caches synced, the edge hub
	// listening), else why not.
	ready *atomic.Value
	// failed is why the GlobalManager cannot work, "" while it can.
	failed *atomic.Value
	// following is the identity of the replica that leads while this one
	// stands by, "" otherwise.
	following *atomic.Value
	election  *leaderelection.HealthzAdaptor
	// profiling serves Go's profiles under /debug/pprof/.
	profiling bool
}

// serveHealth serves /healthz (the process and its lease are alive, and it
// has not failed), /readyz and /metrics. /readyz is "ok" once the
// controllers act (caches synced, the edge hub listening), and "ok: standby"
// for a replica that follows a leader: a standby is ready to take over, so
// that a PodDisruptionBudget lets either replica's node be drained; the hub's
// Service selects the leader by its label, not by readiness.
func serveHealth(ctx context.Context, addr string, reg *prometheus.Registry, h health) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if why := h.failed.Load().(string); why != "" {
			http.Error(w, "the GlobalManager cannot work: "+why, http.StatusInternalServerError)
			return
		}
		if err := h.election.Check(r); err != nil {
			http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		why := h.ready.Load().(string)
		if why == "" {
			fmt.Fprintln(w, "ok")
			return
		}
		if leader := h.following.Load().(string); leader != "" && h.failed.Load().(string) == "" {
			fmt.Fprintf(w, "ok: standby, %s leads\n", leader)
			return
		}
		http.Error(w, why, http.StatusServiceUnavailable)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if h.profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on --health-address %s: %w", addr, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Health server stopped")
		}
	}()
	klog.FromContext(ctx).Info("Serving health and metrics", "address", ln.Addr().String())
	return srv, nil
}
