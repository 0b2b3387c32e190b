package main

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/leaderelection"
)

// Profiles are served only when --profiling asks for them: a heap profile
// shows what the GlobalManager holds.
func TestHealthServerServesProfilesOnlyWhenAsked(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		var ready, failed, following atomic.Value
		ready.Store("")
		failed.Store("")
		following.Store("")
		srv, err := serveHealth(t.Context(), "127.0.0.1:0", prometheus.NewRegistry(), health{
			ready: &ready, failed: &failed, following: &following,
			election: leaderelection.NewLeaderHealthzAdaptor(0), profiling: profiling,
		})
		if err != nil {
			t.Fatal(err)
		}
		addr := srv.Addr
		t.Cleanup(func() { _ = srv.Close() })
		if addr == "" {
			t.Fatal("the health server does not say its address")
		}
		resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "heap profile")
		if served != profiling {
			t.Errorf("--profiling=%v: /debug/pprof/heap answered %d (a heap profile: %v)", profiling, resp.StatusCode, served)
		}
	}
}

// /readyz is ok once the controllers act, "ok: standby" for a replica that
// follows a leader (so that a PodDisruptionBudget lets either node drain),
// and not ready while the leader's caches fill or once it failed; /healthz
// says why the GlobalManager cannot work.
func TestReadinessCountsAStandbyAsReady(t *testing.T) {
	var ready, failed, following atomic.Value
	srv, err := serveHealth(t.Context(), "127.0.0.1:0", prometheus.NewRegistry(), health{
		ready: &ready, failed: &failed, following: &following, election: leaderelection.NewLeaderHealthzAdaptor(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + srv.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	for _, tc := range []struct {
		name                     string
		ready, failed, following string
		path                     string
		code                     int
		body                     string
	}{
		{"waiting for leadership, no leader known", "waiting for leadership", "", "", "/readyz", 503, "waiting for leadership"},
		{"a standby", "waiting for leadership", "", "gm-0_abc", "/readyz", 200, "ok: standby, gm-0_abc leads"},
		{"the leader filling its caches", "waiting for caches to sync", "", "", "/readyz", 503, "waiting for caches to sync"},
		{"the leader acting", "", "", "", "/readyz", 200, "ok"},
		{"a standby that failed", "stopped", "the hub cannot listen", "gm-0_abc", "/readyz", 503, "stopped"},
		{"failed", "stopped", "the hub cannot listen", "", "/healthz", 500, "the GlobalManager cannot work: the hub cannot listen"},
		{"alive", "", "", "", "/healthz", 200, "ok"},
	} {
		ready.Store(tc.ready)
		failed.Store(tc.failed)
		following.Store(tc.following)
		if code, body := get(tc.path); code != tc.code || body != tc.body {
			t.Errorf("%s: %s answered %d %q, want %d %q", tc.name, tc.path, code, body, tc.code, tc.body)
		}
	}
}
