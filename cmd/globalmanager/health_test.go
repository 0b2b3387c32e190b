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
