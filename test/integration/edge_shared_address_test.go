package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/test/framework"
)

// TestJunkFromALocalControllersAddressDoesNotLockItOut sends the hub 2,000
// junk tokens from the address a LocalController connects from (a NAT, or
// any process on its node: here 127.0.0.1) while that LocalController
// restarts. The junk blocks the address (429) past its refusals, and the
// LocalController, whose token the hub verifies itself, still connects
// through the block: its store is in sync within 5 s of its restart.
func TestJunkFromALocalControllersAddressDoesNotLockItOut(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	hubMetric := func(series string) float64 {
		m, err := framework.ScrapeMetrics(t.Context(), "http://"+hub.HealthAddress())
		if err != nil {
			t.Fatal(err)
		}
		return m.Get(series)
	}
	framework.Eventually(t, 30*time.Second, "the hub to hold the issuer's keys", func(context.Context) (bool, error) {
		return hubMetric("nereid_edgehub_token_issuer_keys") > 0, nil
	})
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	synced := func(ctx context.Context) (bool, error) {
		m, err := framework.ScrapeMetrics(ctx, lc.HealthURL)
		return err == nil && m.Get("nereid_cloudlink_synced") == 1, nil // an error: restarting
	}
	framework.Eventually(t, 30*time.Second, "edge-0's store in sync", synced)
	lc.Stop(t)

	// Junk shaped like edge-0's token: its claims, a made-up key ID and
	// random signature bytes.
	real := boundToken(t, framework.EdgeDaemonSetPod(t, ns, "edge-0"))
	claims, err := base64.RawURLEncoding.DecodeString(strings.Split(real, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	const total, senders = 2000, 4
	var sent, tooMany, other atomic.Int64
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// At most 200 a second in all, so that the junk still flows
			// while the LocalController restarts and syncs.
			tick := time.NewTicker(senders * 5 * time.Millisecond)
			defer tick.Stop()
			for i := sent.Add(1); i <= total && t.Context().Err() == nil; i = sent.Add(1) {
				<-tick.C
				conn, resp, err := dialEdge(t, hub, junkToken(t, claims, fmt.Sprintf("made-up-%d", i%8), "", nil))
				switch {
				case err == nil:
					conn.Close()
					other.Add(1)
				case resp != nil && resp.StatusCode == http.StatusTooManyRequests:
					tooMany.Add(1)
				case resp == nil || resp.StatusCode != http.StatusUnauthorized:
					other.Add(1)
				}
			}
		}()
	}
	t.Cleanup(wg.Wait) // bounded: total dials
	framework.Eventually(t, 60*time.Second, "the junk's address to be blocked (429)", func(context.Context) (bool, error) {
		return tooMany.Load() > 0, nil
	})

	restarted := time.Now()
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 5*time.Second, "edge-0's LocalController, restarted behind the junk, in sync", synced)
	if n := sent.Load(); n >= total {
		t.Errorf("the junk had all been sent (%d) when edge-0 was in sync %v after its restart: the test did not show it got through junk", n, time.Since(restarted))
	}
	wg.Wait()
	if n := other.Load(); n != 0 {
		t.Errorf("%d junk connections were upgraded or answered other than 401 or 429", n)
	}
	if n := hubMetric(`nereid_edgehub_connections_refused_total{reason="too_many_refusals"}`); n == 0 {
		t.Error("no connection refused as too_many_refusals: the address was never blocked")
	}
}
