package edgehub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/internal/testwait"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
)

// TestReachReadsABoundedNumberOfNodesAScan: node names come from objects
// anyone who may create a Dataset writes; a scan reads at most
// nodeReadsPerScan of them, and a read is reused for nodeCacheTTL.
func TestReachReadsABoundedNumberOfNodesAScan(t *testing.T) {
	kube := fake.NewClientset()
	r := &reach{hub: &Hub{client: kube, clock: testingclock.NewFakeClock(time.Unix(1000, 0))}, nodes: map[string]readNode{}}
	r.reads = nodeReadsPerScan
	for i := range 3 * nodeReadsPerScan {
		r.nodeExists(t.Context(), fmt.Sprintf("node-%d", i))
	}
	if got := len(kube.Actions()); got != nodeReadsPerScan {
		t.Errorf("%d node reads in a scan of %d names, want %d", got, 3*nodeReadsPerScan, nodeReadsPerScan)
	}
	if r.nodeExists(t.Context(), "node-0") {
		t.Errorf("node-0, read as missing, is said to exist")
	}
	r.reads = nodeReadsPerScan
	r.nodeExists(t.Context(), "node-0")
	if got := len(kube.Actions()); got != nodeReadsPerScan {
		t.Errorf("node-0 read again within %s (%d reads)", nodeCacheTTL, got)
	}
}

// TestReachJudgesEachNodeByItsRules: why a node fails an object, by the
// rules of judge: what the cluster's shape says first, then the link.
func TestReachJudgesEachNodeByItsRules(t *testing.T) {
	start := time.Unix(10000, 0)
	cfg := Config{NodeSelector: "node-role/edge=", HeartbeatPeriod: 10 * time.Second, ReadTimeout: 30 * time.Second, LeaseUpdatePeriod: 10 * time.Second}
	settle := cfg.ReadTimeout + cfg.LeaseUpdatePeriod
	type link struct {
		connected, known bool
		heard            time.Time
	}
	lease := func(node, state string, renew time.Time) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: links.LeaseName(node), Namespace: "hub",
			Annotations: map[string]string{links.AnnotationLink: state}}}
		if !renew.IsZero() {
			l.Spec.RenewTime = &metav1.MicroTime{Time: renew}
		}
		return l
	}
	cases := map[string]struct {
		node         string
		pinned, edge bool
		cloudNode    bool // the node exists, outside the edge nodes
		link         link
		lease        *coordinationv1.Lease
		sinceStart   time.Duration
		wantReason   string
		wantWhy      string
		wantLink     bool
		wantUnknown  bool // not judged yet: the object keeps its condition
	}{
		"a node that does not exist": {
			node: "gone", pinned: true, sinceStart: time.Hour,
			wantReason: ReasonNoSuchNode, wantWhy: "no node gone exists",
		},
		"a worker the scheduler put on a cloud node": {
			node: "cloud-0", cloudNode: true, sinceStart: time.Hour,
		},
		"a cloud node an object names": {
			node: "cloud-0", pinned: true, cloudNode: true, sinceStart: time.Hour,
			wantReason: ReasonNoLocalController, wantWhy: `node cloud-0 runs no LocalController: LocalControllers serve the nodes matching "node-role/edge="`,
		},
		"an edge node connected": {
			node: "edge-0", edge: true, link: link{connected: true, known: true, heard: start}, sinceStart: time.Hour,
		},
		"an edge node that left less than a heartbeat ago": {node: "edge-0", edge: true, wantUnknown: true,
			link: link{known: true, heard: start.Add(time.Hour - 5*time.Second)}, sinceStart: time.Hour},
		"an edge node that left a heartbeat ago": {
			node: "edge-0", edge: true, link: link{known: true, heard: start.Add(time.Hour - time.Minute)}, sinceStart: time.Hour,
			wantReason: ReasonLinkDown, wantWhy: "the link of edge node edge-0 is down since " + start.Add(time.Hour-time.Minute).UTC().Format(time.RFC3339), wantLink: true,
		},
		"an edge node unknown to a hub that just started": {
			node: "edge-0", edge: true, sinceStart: cfg.HeartbeatPeriod - time.Second, wantUnknown: true,
		},
		"an edge node that never connected, a heartbeat after the hub started": {
			node: "edge-0", edge: true, sinceStart: cfg.HeartbeatPeriod,
			wantReason: ReasonNoLocalController, wantWhy: "no LocalController has connected from edge node edge-0", wantLink: true,
		},
		"an edge node whose Lease says disconnected, to a hub that just started": {
			node: "edge-0", edge: true, sinceStart: settle - time.Second, lease: lease("edge-0", links.LinkDisconnected, start.Add(-time.Hour)), wantUnknown: true},
		"an edge node that never connected": {
			node: "edge-0", edge: true, sinceStart: settle,
			wantReason: ReasonNoLocalController, wantWhy: "no LocalController has connected from edge node edge-0", wantLink: true,
		},
		"an edge node whose Lease says disconnected": {
			node: "edge-0", edge: true, sinceStart: settle, lease: lease("edge-0", links.LinkDisconnected, start.Add(-time.Hour)),
			wantReason: ReasonLinkDown, wantWhy: "the link of edge node edge-0 is down since " + start.Add(-time.Hour).UTC().Format(time.RFC3339), wantLink: true,
		},
		"an edge node whose Lease says connected": {
			node: "edge-0", edge: true, sinceStart: settle, lease: lease("edge-0", links.LinkConnected, start.Add(settle-time.Second)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.cloudNode || tc.edge {
				objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: tc.node}})
			}
			if tc.lease != nil {
				objs = append(objs, tc.lease)
			}
			edgeNodes := cache.NewStore(cache.MetaNamespaceKeyFunc)
			if tc.edge {
				if err := edgeNodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: tc.node}}); err != nil {
					t.Fatal(err)
				}
			}
			c := cfg
			c.Namespace = "hub"
			now := start.Add(tc.sinceStart)
			r := &reach{
				hub: &Hub{client: fake.NewClientset(objs...), clock: testingclock.NewFakeClock(now), cfg: c}, started: start,
				nodes: map[string]readNode{}, leases: map[string]readLease{}, reads: nodeReadsPerScan, edgeNodes: edgeNodes,
				state: func(string) (bool, time.Time, bool) { return tc.link.connected, tc.link.heard, tc.link.known },
			}
			got := r.judge(t.Context(), tc.node, tc.pinned, now)
			if got.reason != tc.wantReason || !strings.Contains(got.why, tc.wantWhy) || got.link != tc.wantLink || got.unknown != tc.wantUnknown {
				t.Errorf("judge(%s) = %+v, want reason %q, why containing %q, link %v, unknown %v", tc.node, got, tc.wantReason, tc.wantWhy, tc.wantLink, tc.wantUnknown)
			}
		})
	}
}

// TestReachTellsADatasetOfALinkDownOnlyOnceItLasted: a Dataset hears at
// once what the cluster's shape says, but of a link that is down only once
// it has been down as long as a Lease lasts; a blip writes nothing.
func TestReachTellsADatasetOfALinkDownOnlyOnceItLasted(t *testing.T) {
	now := time.Unix(10000, 0)
	const settle = 40 * time.Second
	cases := map[string]struct {
		j    nodeReach
		want bool
	}{
		"no such node":                 {nodeReach{reason: ReasonNoSuchNode}, true},
		"a node not served":            {nodeReach{reason: ReasonNoLocalController}, true},
		"never connected":              {nodeReach{reason: ReasonNoLocalController, link: true}, true},
		"down for less than the Lease": {nodeReach{reason: ReasonLinkDown, link: true, since: now.Add(-settle + time.Second)}, false},
		"down for the Lease":           {nodeReach{reason: ReasonLinkDown, link: true, since: now.Add(-settle)}, true},
		"down since a time not known":  {nodeReach{reason: ReasonLinkDown, link: true}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.j.datasetTold(now, settle); got != tc.want {
				t.Errorf("datasetTold = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReachKeepsTheConditionOfObjectsWhoseNodesAreNotJudgedYet: a scan
// reads at most nodeReadsPerScan Leases; the Datasets of nodes whose Lease
// is left for a later scan keep the condition they have, rather than being
// told Linked and then again not, and a Lease read is not read again by the
// next scans. (Every Dataset of a thousand nodes never connected once
// flipped between the two, a write each, every scan.)
func TestReachKeepsTheConditionOfObjectsWhoseNodesAreNotJudgedYet(t *testing.T) {
	const nodes = 3 * nodeReadsPerScan
	var objs []runtime.Object
	for i := range nodes {
		node := fmt.Sprintf("edge-%d", i)
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{DefaultNodeSelector: ""}}})
		d := edgehubtest.Dataset(fmt.Sprintf("data-%d", i), node)
		d.Status.Conditions = []metav1.Condition{{Type: ConditionEdgeLinked, Status: metav1.ConditionFalse, Reason: ReasonNoLocalController,
			Message: fmt.Sprintf("no LocalController has connected from edge node %s (is its LocalController Pod running there?)", node)}}
		objs = append(objs, d)
	}
	sentinel := edgehubtest.Dataset("sentinel", "")
	objs = append(objs, sentinel)
	f := newFixture(t, testConfig, objs...)
	f.kube.ClearActions()
	f.sedna.ClearActions()
	// Each condition written records an event: take them, so that a
	// regression's hundred writes are counted rather than blocked on the
	// fake recorder's buffer.
	go func() {
		for {
			select {
			case <-f.recorder.Events:
			case <-t.Context().Done():
				return
			}
		}
	}()

	h := f.hub
	r := &reach{hub: h, started: h.clock.Now().Add(-time.Hour), nodes: map[string]readNode{}, leases: map[string]readLease{},
		edgeNodes: h.auth.Caches().EdgeNodes, state: h.links.State}
	for range 4 {
		r.scan(t.Context())
	}
	leaseReads := 0
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "leases" {
			leaseReads++
		}
	}
	if leaseReads != nodes {
		t.Errorf("4 scans read %d Leases of %d nodes never connected, want each read once", leaseReads, nodes)
	}
	// The writer takes wants in order: once the sentinel's is written, so
	// is every condition the scans wanted.
	ref := edgeproto.ObjectRef{Kind: "Dataset", Namespace: sentinel.Namespace, Name: sentinel.Name}
	h.conditions.wants(ref, syncCondition{typ: ConditionEdgeLinked, reason: ReasonNoSuchNode, message: "sentinel"})
	var written []string
	testwait.Eventually(t, 10*time.Second, "the sentinel's condition to be written", func(context.Context) (bool, error) {
		written = written[:0]
		sentinelWritten := false
		for _, a := range f.sedna.Actions() {
			u, ok := a.(clienttesting.UpdateAction)
			if !ok || a.GetSubresource() != "status" {
				continue
			}
			if name := u.GetObject().(metav1.Object).GetName(); name == sentinel.Name {
				sentinelWritten = true
			} else {
				written = append(written, name)
			}
		}
		return sentinelWritten, nil
	})
	if len(written) > 0 {
		t.Errorf("the scans wrote the conditions of %d Datasets whose nodes never connected (first: %s); want them kept", len(written), written[0])
	}
}

// TestReachDropsAConditionThatNoLongerHoldsBeforeItIsWritten: the writer
// takes wanted conditions one at a time; a scan that finds an object's node
// linked before the writer came to the False it wanted drops it, and one
// that finds the object as its False says drops the True wanted meanwhile.
// A fleet whose LocalControllers connect after its Datasets were made then
// writes no False, with its warning, for those not written yet, and no True
// after it to set them right.
func TestReachDropsAConditionThatNoLongerHoldsBeforeItIsWritten(t *testing.T) {
	h := &Hub{clock: testingclock.NewFakeClock(time.Unix(1000, 0))}
	h.conditions = newConditionWriter(h)
	defer h.conditions.queue.ShutDown()
	r := &reach{hub: h}
	k := &kind{Kind: &desired.Kind{Name: desired.DatasetKind}, conditions: conditionsOf(nil)}
	d := edgehubtest.Dataset("data", "edge-0")
	key := conditionKey{ref: edgeproto.ObjectRef{Kind: desired.DatasetKind, Namespace: d.Namespace, Name: d.Name}, typ: ConditionEdgeLinked}
	never := map[string]nodeReach{"edge-0": {reason: ReasonNoLocalController, link: true,
		why: "no LocalController has connected from edge node edge-0 (is its LocalController Pod running there?)"}}
	wanted := func(step string, want *bool) {
		t.Helper()
		c, ok := h.conditions.want[key]
		switch {
		case want == nil && ok:
			t.Errorf("%s: %s=%v still wanted, want it dropped", step, ConditionEdgeLinked, c.ok)
		case want != nil && (!ok || c.ok != *want):
			t.Errorf("%s: wanted %+v (%v), want %s=%v", step, c, ok, ConditionEdgeLinked, *want)
		}
	}
	no, yes := false, true

	r.want(k, d, never)
	wanted("a node never connected", &no)
	r.want(k, d, nil)
	wanted("it connected before the False was written", nil)

	d.Status.Conditions = []metav1.Condition{{Type: ConditionEdgeLinked, Status: metav1.ConditionFalse,
		Reason: ReasonNoLocalController, Message: never["edge-0"].why}}
	r.want(k, d, nil)
	wanted("the False written, then the node connected", &yes)
	r.want(k, d, never)
	wanted("it went again before the True was written", nil)
}

// TestReachKeepsALeaseReadPastItsTTLUntilItCanReadAgain: a Lease read is
// trusted for leaseCacheTTL; past it, it is read again by the first scan
// with reads left, and used as it was until then, so that an object is not
// told one node less in between.
func TestReachKeepsALeaseReadPastItsTTLUntilItCanReadAgain(t *testing.T) {
	kube := fake.NewClientset()
	now := time.Unix(10000, 0)
	r := &reach{hub: &Hub{client: kube, cfg: Config{Namespace: "hub"}}, leases: map[string]readLease{}}
	leaseReads := func() int { return len(kube.Actions()) }

	r.reads = 1
	if read, ok := r.lease(t.Context(), "edge-0", now); !ok || read.exists || leaseReads() != 1 {
		t.Fatalf("first read: %+v, ok %v, %d reads; want no Lease, read once", read, ok, leaseReads())
	}
	r.reads = 1
	if read, ok := r.lease(t.Context(), "edge-0", now.Add(leaseCacheTTL-time.Second)); !ok || read.exists || leaseReads() != 1 {
		t.Errorf("within the TTL: %+v, ok %v, %d reads; want the cached read", read, ok, leaseReads())
	}
	r.reads = 0
	if read, ok := r.lease(t.Context(), "edge-0", now.Add(leaseCacheTTL)); !ok || read.exists || leaseReads() != 1 {
		t.Errorf("past the TTL, no reads left: %+v, ok %v, %d reads; want the cached read", read, ok, leaseReads())
	}
	if _, ok := r.lease(t.Context(), "edge-1", now); ok || leaseReads() != 1 {
		t.Errorf("a node never read, no reads left: ok %v, %d reads; want it left for a later scan", ok, leaseReads())
	}
	r.reads = 1
	if read, ok := r.lease(t.Context(), "edge-0", now.Add(leaseCacheTTL)); !ok || leaseReads() != 2 || read.at != now.Add(leaseCacheTTL) {
		t.Errorf("past the TTL with a read left: %+v, ok %v, %d reads; want it read again", read, ok, leaseReads())
	}
}

// TestReachScansWhenWhatItReadsChanges: a scan that judged every node is
// not due again until something it reads changes (an object's nodes or
// Datasets, its EdgeLinked condition, a worker pod, an edge node, a link)
// or reachResync passes; one that left a node for later is due the next
// period. A Dataset's URL or a job's counts start no scan.
func TestReachScansWhenWhatItReadsChanges(t *testing.T) {
	edge0 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-0", Labels: map[string]string{DefaultNodeSelector: ""}}}
	f := newFixture(t, testConfig, edge0, edgehubtest.Dataset("data", "edge-0"))
	h := f.hub
	now := h.clock.Now()
	newReach := func(started time.Time) *reach {
		return &reach{hub: h, started: started, nodes: map[string]readNode{}, leases: map[string]readLease{},
			edgeNodes: h.auth.Caches().EdgeNodes, state: h.links.State}
	}
	r := newReach(now.Add(-time.Hour))
	if !r.due(false, now) {
		t.Errorf("a reach that never scanned is not due")
	}
	r.scan(t.Context())
	if r.due(false, now) {
		t.Errorf("due again with nothing changed after a scan that judged every node")
	}
	if resync := r.scanned.Add(reachResync); !r.due(true, now) || !r.due(false, resync) {
		t.Errorf("not due after a change (%v) or after %s (%v)", r.due(true, now), reachResync, r.due(false, resync))
	}
	justStarted := newReach(now)
	justStarted.scan(t.Context())
	if !justStarted.due(false, now) {
		t.Errorf("a scan that left edge-0 for later (the hub just started) is not due the next period")
	}

	// What an update changes, as the hub's handler sees it.
	k := h.byName[desired.DatasetKind]
	d := edgehubtest.Dataset("data", "edge-0")
	changed := func(change func(*sednav1.Dataset)) bool {
		n := d.DeepCopy()
		change(n)
		return reachSees(k, d, n)
	}
	for name, tc := range map[string]struct {
		change func(*sednav1.Dataset)
		want   bool
	}{
		"its URL":   {func(n *sednav1.Dataset) { n.Spec.URL = "/data/other" }, false},
		"its node":  {func(n *sednav1.Dataset) { n.Spec.NodeName = "edge-1" }, true},
		"deleted":   {func(n *sednav1.Dataset) { n.DeletionTimestamp = &metav1.Time{Time: now} }, true},
		"its count": {func(n *sednav1.Dataset) { n.Status.NumberOfSamples = 7 }, false},
		"its EdgeLinked condition": {func(n *sednav1.Dataset) {
			n.Status.Conditions = []metav1.Condition{{Type: ConditionEdgeLinked, Status: metav1.ConditionFalse, Reason: ReasonLinkDown}}
		}, true},
	} {
		if got := changed(tc.change); got != tc.want {
			t.Errorf("%s changed: reachSees %v, want %v", name, got, tc.want)
		}
	}

	// The hub's handlers say so.
	h.reachChanged.Store(false)
	d, err := f.sedna.SednaV1alpha1().Datasets(testNS).Get(t.Context(), "data", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.NodeName = "edge-1"
	if _, err := f.sedna.SednaV1alpha1().Datasets(testNS).Update(t.Context(), d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "the hub to see the Dataset's node change", func(context.Context) (bool, error) {
		return h.reachChanged.Load(), nil
	})
	h.reachChanged.Store(false)
	edge1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{DefaultNodeSelector: ""}}}
	if _, err := f.kube.CoreV1().Nodes().Create(t.Context(), edge1, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "the hub to see edge-1 become an edge node", func(context.Context) (bool, error) {
		return h.reachChanged.Load(), nil
	})
}
