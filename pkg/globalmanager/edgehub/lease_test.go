package edgehub

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// Renewals go out at most LeaseWriteRate a second, in rounds of a tenth of
// the period, those written longest ago first, each Lease valid for as long
// as a turn of them all takes; connects and disconnects are written at once
// whatever the rate, and rounds between ticks do not add to it.
func TestLeaseRenewalsKeepToTheWriteRate(t *testing.T) {
	client := kubefake.NewClientset()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	l := newLinks(client, Config{Namespace: "ns", LeaseUpdatePeriod: 10 * time.Second, LeaseWriteRate: 2, ReadTimeout: 30 * time.Second},
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
	// Ten rounds, a second apart: 2 a round, never more.
	for round := range 10 {
		l.writeDue(t.Context(), false)
		if got := writes(); got != 2 {
			t.Fatalf("round %d wrote %d Leases, want 2 (2/s, a round a second)", round, got)
		}
		// A kick in the same instant (a node connecting) renews no more.
		l.writeDue(t.Context(), false)
		if got := writes(); got != 0 {
			t.Fatalf("a second round at the same time wrote %d Leases, want 0", got)
		}
		now = now.Add(time.Second)
	}
	leases, err := client.CoordinationV1().Leases("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(leases.Items) != 20 {
		t.Fatalf("leases: %v, %d, want 20", err, len(leases.Items))
	}
	// 30 connected nodes at 2/s: each renewed every 15s, plus the read timeout.
	if d := *leases.Items[0].Spec.LeaseDurationSeconds; d != 45 {
		t.Errorf("leaseDurationSeconds %d, want 45", d)
	}

	// A quiet spell does not save up renewals for a burst: at most a
	// round's worth goes out at once.
	now = now.Add(time.Minute)
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
	if got := writes(); got != 7 {
		t.Fatalf("after a minute a round wrote %d Leases, want the 5 urgent and 2 renewals", got)
	}
	// Renewals go to those never written before those written earlier.
	l.mu.Lock()
	defer l.mu.Unlock()
	unwritten := 0
	for _, k := range l.nodes {
		if k.lastWritten.IsZero() {
			unwritten++
		}
	}
	if unwritten != 3 {
		t.Errorf("%d nodes never written, want 3", unwritten)
	}
}

// A rate below one renewal a round still renews: one a round at most, and
// only as the rate has allowed since.
func TestLeaseRenewalsBelowOneARound(t *testing.T) {
	client := kubefake.NewClientset()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	l := newLinks(client, Config{Namespace: "ns", LeaseUpdatePeriod: 10 * time.Second, LeaseWriteRate: 0.25, ReadTimeout: 30 * time.Second},
		func() time.Time { return now })
	for i := range 5 {
		k := l.get(fmt.Sprintf("edge-%d", i))
		k.connected, k.changed, k.lastHeard = true, true, now
	}
	var wrote []int // the seconds in which a renewal went out
	for sec := range 20 {
		l.writeDue(t.Context(), false)
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" || a.GetVerb() == "update" {
				wrote = append(wrote, sec)
			}
		}
		client.ClearActions()
		now = now.Add(time.Second)
	}
	// 0.25/s: the first round's one, then one every 4 s.
	if want := []int{0, 4, 8, 12, 16}; fmt.Sprint(wrote) != fmt.Sprint(want) {
		t.Errorf("renewals went out in seconds %v, want %v", wrote, want)
	}
}
