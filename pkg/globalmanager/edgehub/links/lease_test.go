package links

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// leaseFixture is a Writer over a fake client, with a clock the test moves
// and nodes connected at its start.
type leaseFixture struct {
	client *kubefake.Clientset
	clock  *testingclock.FakeClock
	l      *Writer
}

// newLeaseFixture has n nodes edge-000… connected, changed when changed,
// renewed at most rate a second over a 10 s period with a 30 s read timeout.
func newLeaseFixture(n int, rate float64, changed bool) *leaseFixture {
	f := &leaseFixture{client: kubefake.NewClientset(), clock: testingclock.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))}
	f.l = New(Config{Client: f.client, Namespace: "ns", Period: 10 * time.Second, Rate: rate, Grace: 30 * time.Second, Clock: f.clock})
	for i := range n {
		k := f.l.get(fmt.Sprintf("edge-%03d", i))
		k.connected, k.changed, k.lastHeard = true, changed, f.clock.Now()
	}
	return f
}

// written are the Leases created or updated since the last call.
func (f *leaseFixture) written() []*coordinationv1.Lease {
	var leases []*coordinationv1.Lease
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "update" {
			leases = append(leases, a.(interface{ GetObject() runtime.Object }).GetObject().(*coordinationv1.Lease))
		}
	}
	f.client.ClearActions()
	return leases
}

// round runs one round of writes at the fixture's time.
func (f *leaseFixture) round(t *testing.T) { f.l.WriteDue(t.Context(), false) }

// setChanged marks every node changed, or none.
func (f *leaseFixture) setChanged(changed bool) {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	for _, k := range f.l.nodes {
		k.changed = changed
	}
}

// Renewals go out at most LeaseWriteRate a second, in rounds of a tenth of
// the period, those written longest ago first, each Lease valid for as long
// as a turn of them all takes; connects and disconnects are written at once
// whatever the rate, and rounds between ticks do not add to it.
func TestLeaseRenewalsKeepToTheWriteRate(t *testing.T) {
	f := newLeaseFixture(30, 2, true)
	// Ten rounds, a second apart: 2 a round, never more.
	for round := range 10 {
		f.round(t)
		if got := len(f.written()); got != 2 {
			t.Fatalf("round %d wrote %d Leases, want 2 (2/s, a round a second)", round, got)
		}
		// A kick in the same instant (a node connecting) renews no more.
		f.round(t)
		if got := len(f.written()); got != 0 {
			t.Fatalf("a second round at the same time wrote %d Leases, want 0", got)
		}
		f.clock.Step(time.Second)
	}
	leases, err := f.client.CoordinationV1().Leases("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(leases.Items) != 20 {
		t.Fatalf("leases: %v, %d, want 20", err, len(leases.Items))
	}
	// 30 connected nodes at 2/s: each renewed every 15s, a round later at
	// worst, plus the read timeout.
	for _, lease := range leases.Items {
		if d := *lease.Spec.LeaseDurationSeconds; d != 46 {
			t.Errorf("%s: leaseDurationSeconds %d, want 46", lease.Name, d)
		}
	}

	// A quiet spell (rounds with nothing due) does not save up renewals
	// for a burst: at most a round's worth and one goes out at once.
	f.setChanged(false)
	for range 60 {
		f.clock.Step(time.Second)
		f.round(t)
	}
	if got := len(f.written()); got != 0 {
		t.Fatalf("rounds with nothing changed wrote %d Leases", got)
	}
	f.setChanged(true)
	// Five nodes not written yet connect again.
	l := f.l
	l.mu.Lock()
	urgent := 0
	for _, k := range l.nodes {
		if k.lastWritten.IsZero() && urgent < 5 {
			k.urgent = true
			urgent++
		}
	}
	l.mu.Unlock()
	f.round(t)
	if got := len(f.written()); got != 8 {
		t.Fatalf("after a quiet minute a round wrote %d Leases, want the 5 urgent and 3 renewals", got)
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
	if unwritten != 2 {
		t.Errorf("%d nodes never written, want 2", unwritten)
	}
}

// renewalsByRound runs rounds of renewals of nodes connected nodes, all
// changed before every round (heartbeats), at the times next gives (the
// time of the round after one at the given time), until end; it returns
// the times each node was written.
func renewalsByRound(t *testing.T, nodes int, rate float64, next func(time.Time) time.Time, end time.Duration) (map[string][]time.Time, *Writer) {
	t.Helper()
	f := newLeaseFixture(nodes, rate, false)
	start := f.clock.Now()
	written := map[string][]time.Time{}
	for f.clock.Since(start) < end {
		f.setChanged(true)
		f.round(t)
		for _, lease := range f.written() {
			written[*lease.Spec.HolderIdentity] = append(written[*lease.Spec.HolderIdentity], f.clock.Now())
		}
		f.clock.SetTime(next(f.clock.Now()))
	}
	return written, f.l
}

// Rounds a little early and a little late (a ticker's jitter) lose no
// renewals: the rate holds over many rounds.
func TestLeaseRenewalsKeepTheRateThroughJitter(t *testing.T) {
	early := true
	written, _ := renewalsByRound(t, 200, 10, func(at time.Time) time.Time {
		early = !early
		if early {
			return at.Add(999 * time.Millisecond)
		}
		return at.Add(1001 * time.Millisecond)
	}, 100*time.Second)
	total := 0
	for _, w := range written {
		total += len(w)
	}
	// 100 rounds in 100 s at 10/s, the first a round's worth. Losing the
	// credit of each early round would make it 950.
	if total < 995 || total > 1005 {
		t.Errorf("%d renewals in 100 rounds at 10/s, want 1,000", total)
	}
}

// Rounds whose writes take longer than a round (an API server slow to
// answer) still renew at the rate, and every node within its Lease's
// duration.
func TestLeaseRenewalsCatchUpAfterSlowRounds(t *testing.T) {
	const nodes, rate = 300, 10.0
	written, l := renewalsByRound(t, nodes, rate, func(at time.Time) time.Time { return at.Add(3 * time.Second) }, 3*time.Minute)
	total := 0
	for _, w := range written {
		total += len(w)
	}
	// 60 rounds 3 s apart: 177 s at 10/s after the first round's 10.
	if want := 10 + 177*rate; float64(total) < 0.95*want || float64(total) > want+rate {
		t.Errorf("%d renewals in 3 minutes of slow rounds at %v/s, want about %v", total, rate, want)
	}
	// Each node's next renewal comes before its Lease's duration less the
	// read timeout (the time its renewTime may be old by) has run out.
	limit := l.renewal(nodes) + l.round() + 3*time.Second // a slow round later
	for node, times := range written {
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap > limit {
				t.Errorf("%s renewed %s after the last time, more than %s", node, gap, limit)
			}
		}
	}
}

// A rate below one renewal a round still renews: one a round at most, and
// only as the rate has allowed since.
func TestLeaseRenewalsBelowOneARound(t *testing.T) {
	f := newLeaseFixture(5, 0.25, true)
	var wrote []int // the seconds in which a renewal went out
	for sec := range 20 {
		f.round(t)
		for range f.written() {
			wrote = append(wrote, sec)
		}
		f.clock.Step(time.Second)
	}
	// 0.25/s: the first round's one, then one every 4 s.
	if want := []int{0, 4, 8, 12, 16}; fmt.Sprint(wrote) != fmt.Sprint(want) {
		t.Errorf("renewals went out in seconds %v, want %v", wrote, want)
	}
}

// A renewal that fails is tried again on the next round, not after every
// other node's turn.
func TestAFailedRenewalIsTriedAgainNextRound(t *testing.T) {
	f := newLeaseFixture(3, 50, true)
	f.round(t)
	failed := false
	f.client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).Name == LeaseName("edge-000") && !failed {
			failed = true
			return true, nil, errors.New("the API server is busy")
		}
		return false, nil, nil
	})
	renewed := func() []string {
		var names []string
		for _, lease := range f.written() {
			names = append(names, *lease.Spec.HolderIdentity)
		}
		slices.Sort(names)
		return names
	}
	f.written()
	f.clock.Step(10 * time.Second)
	f.setChanged(true)
	f.round(t)
	if got := renewed(); !failed || fmt.Sprint(got) != "[edge-000 edge-001 edge-002]" {
		t.Fatalf("renewals tried %v (edge-000 failing: %v), want all three", got, failed)
	}
	f.clock.Step(time.Second)
	f.round(t)
	if got := renewed(); fmt.Sprint(got) != "[edge-000]" {
		t.Errorf("the round after edge-000's renewal failed renewed %v, want [edge-000]", got)
	}
}

// A hub that starts reads every node's Lease in one list: a node's first
// Hello is bounded by what an earlier hub recorded of its store, and its
// link's first write keeps that record, with no read of its own.
func TestPrimedLeasesBoundHellosAndAreKeptByTheFirstWrite(t *testing.T) {
	holder := "edge-a"
	earlier := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName(holder), Namespace: "ns",
		Labels:      map[string]string{LabelEdgeNode: holder},
		Annotations: map[string]string{AnnotationReportStore: "store-1", AnnotationLastReportID: "40", AnnotationStatedReportID: "70"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	client := kubefake.NewClientset(earlier)
	clk := testingclock.NewFakeClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	l := New(Config{Client: client, Namespace: "ns", Period: 10 * time.Second, Clock: clk})
	if err := l.Prime(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node, store string
		want        Record
	}{
		{"edge-a", "store-1", Record{Last: 70, Known: true, NodeKnown: true}},
		{"edge-a", "store-2", Record{NodeKnown: true}},
		{"edge-b", "store-1", Record{}},
	} {
		if got, err := l.Recorded(t.Context(), c.node, c.store); err != nil || got != c.want {
			t.Errorf("Recorded(%s, %s) = %+v, %v; want %+v", c.node, c.store, got, err, c.want)
		}
	}
	l.ReportAcked(l.Connected("edge-a", "store-1", 75), 41)
	client.ClearActions()
	l.WriteDue(t.Context(), false)
	var verbs []string
	for _, a := range client.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if !slices.Equal(verbs, []string{"update"}) {
		t.Fatalf("requests %v, want one update and no read", verbs)
	}
	got := client.Actions()[0].(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).Annotations
	if got[AnnotationLastReportID] != "41" || got[AnnotationStatedReportID] != "75" {
		t.Errorf("annotations %v, want last-report-id 41 and stated-report-id 75", got)
	}
	if got, _ := l.Recorded(t.Context(), "edge-a", "store-1"); got != (Record{Last: 75, Known: true, NodeKnown: true}) {
		t.Errorf("Recorded after the write = %+v; want 75, known", got)
	}
}

// TestTheWriterSaysWhenALinkComesOrGoes: Config.Changed hears each connect
// and each disconnect of a node's current connection, and nothing else.
func TestTheWriterSaysWhenALinkComesOrGoes(t *testing.T) {
	changes := 0
	l := New(Config{Client: kubefake.NewClientset(), Namespace: "ns", Period: 10 * time.Second,
		Clock: testingclock.NewFakeClock(time.Unix(1000, 0)), Changed: func() { changes++ }})
	first := l.Connected("edge-0", "store", 0)
	l.Heard(first)
	second := l.Connected("edge-0", "store", 0)
	l.Disconnected(first) // replaced: not a disconnect
	l.Disconnected(second)
	if changes != 3 {
		t.Errorf("Changed called %d times for two connects and one disconnect, want 3", changes)
	}
}
