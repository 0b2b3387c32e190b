package edgehub

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// Renewals go out at most LeaseWriteRate a second, those written longest ago
// first, each Lease valid for as long as a round of them takes; connects and
// disconnects are written at once whatever the rate.
func TestLeaseRenewalsKeepToTheWriteRate(t *testing.T) {
	client := kubefake.NewClientset()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	l := newLinks(client, Config{Namespace: "ns", LeaseUpdatePeriod: 10 * time.Second, LeaseWriteRate: 1, ReadTimeout: 30 * time.Second},
		func() time.Time { return now })
	for i := range 30 {
		k := l.get(fmt.Sprintf("edge-%02d", i))
		k.connected, k.changed, k.lastHeard = true, true, now
	}
	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" || a.GetVerb() == "update" {
				n++
			}
		}
		client.ClearActions()
		return n
	}
	l.writeDue(t.Context(), false)
	if got := writes(); got != 10 {
		t.Fatalf("first round wrote %d Leases, want 10 (1/s for a 10s period)", got)
	}
	leases, err := client.CoordinationV1().Leases("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(leases.Items) != 10 {
		t.Fatalf("leases: %v, %d, want 10", err, len(leases.Items))
	}
	// 30 connected nodes at 1/s: each renewed every 30s, plus the read timeout.
	if d := *leases.Items[0].Spec.LeaseDurationSeconds; d != 60 {
		t.Errorf("leaseDurationSeconds %d, want 60", d)
	}

	now = now.Add(10 * time.Second)
	l.mu.Lock()
	for _, k := range l.nodes {
		k.changed = true
	}
	// Five nodes not written yet connect again.
	urgent := 0
	for _, k := range l.nodes {
		if k.lastWritten.IsZero() && urgent < 5 {
			k.urgent = true
			urgent++
		}
	}
	l.mu.Unlock()
	l.writeDue(t.Context(), false)
	if got := writes(); got != 15 {
		t.Fatalf("second round wrote %d Leases, want the 5 urgent and 10 renewals", got)
	}
	// Renewals go to those never written before those written a round ago.
	l.mu.Lock()
	defer l.mu.Unlock()
	unwritten := 0
	for _, k := range l.nodes {
		if !k.lastWritten.Equal(now) && !k.lastWritten.Equal(now.Add(-10*time.Second)) {
			unwritten++
		}
	}
	if unwritten != 5 {
		t.Errorf("%d nodes never written after two rounds, want 5", unwritten)
	}
}
