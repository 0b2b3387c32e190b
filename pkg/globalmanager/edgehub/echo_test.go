package edgehub

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/internal/testwait"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
)

// syncAndAck reads a connection's difference up to Synced, acknowledging
// every Upsert, and returns the versions acknowledged by object name.
func syncAndAck(c *client) map[string]edgeproto.ObjectVersion {
	c.t.Helper()
	held := map[string]edgeproto.ObjectVersion{}
	for {
		m := c.must(5 * time.Second)
		if m.Type() == edgeproto.TypeSynced {
			return held
		}
		if up, ok := m.(*edgeproto.Upsert); ok {
			if up.Digest == "" {
				c.t.Errorf("%s sent without a digest", summary(up))
			}
			held[up.Name] = up.ObjectVersion
			c.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{up.ObjectVersion}})
		}
	}
}

func inventoryOf(held map[string]edgeproto.ObjectVersion, withDigests bool) []edgeproto.ObjectVersion {
	var inv []edgeproto.ObjectVersion
	for _, v := range held {
		if !withDigests {
			v.Digest = ""
		}
		inv = append(inv, v)
	}
	return inv
}

// A status write (an edge report applied, a condition) changes nothing the
// edge uses: it is not sent down, not when it happens and not after a
// reconnect. A LocalController that predates digests gets it as before.
func TestStatusWritesAreNotSentToTheEdgeNorAfterAReconnect(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	held := syncAndAck(c)
	if len(held) != len(upToDate()) {
		t.Fatalf("sent %v, want the %d objects of edge-a", held, len(upToDate()))
	}
	upserts := f.metric("messages_sent_total", "type", "upsert")
	fl, err := f.sedna.SednaV1alpha1().FederatedLearningJobs(testNS).Get(t.Context(), "fl-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := desired.Digest(sednav1.FederatedLearningJobKind.Kind, fl); err != nil || d != held["fl-a"].Digest {
		t.Errorf("Digest of fl-a is %q (%v), the hub sent %q", d, err, held["fl-a"].Digest)
	}

	jobs := f.sedna.SednaV1alpha1().FederatedLearningJobs(testNS)
	for i, rv := range []string{"42", "43", "44"} {
		j, err := jobs.Get(t.Context(), "fl-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		j.Status.Phase = sednav1.FLJobRunning
		j.Status.EdgeNodes = append(j.Status.EdgeNodes, sednav1.EdgeNodeStatus{Name: "edge-a", Worker: "w", LastReportID: int64(i + 1)})
		j.Status.Conditions = append(j.Status.Conditions, sednav1.JobCondition{Type: "Running", Status: "True"})
		j.ResourceVersion = rv
		if _, err := jobs.UpdateStatus(t.Context(), j, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 5*time.Second, "the cache to have fl-a at version 44", func(context.Context) (bool, error) {
		j, ok := f.hub.sets.Cached(sednav1.FederatedLearningJobKind.Kind, testNS, "fl-a")
		return ok && j.GetResourceVersion() == "44", nil
	})
	c.quiet(4 * testConfig.ResendAfter)
	if got := f.metric("messages_sent_total", "type", "upsert"); got != upserts {
		t.Errorf("%v upserts after three status writes, want none", got-upserts)
	}

	// A reconnect holding fl-a at 40 needs nothing of 44.
	c2 := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: inventoryOf(held, true)})
	if got := c2.untilSynced(); len(got) != 0 {
		t.Errorf("a reconnect holding the versions before the status writes got %v, want nothing", got)
	}
	// Without digests the resourceVersion alone tells: 40 is not 44.
	c3 := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: inventoryOf(held, false)})
	got := c3.untilSynced()
	if len(got) != 1 || !strings.HasPrefix(got[0], "upsert FederatedLearningJob default/fl-a@44") {
		t.Errorf("a LocalController without digests got %v, want fl-a at 44", got)
	}

	// What the edge uses is sent, with a new digest.
	updateJob(t, f, "fl-a", "45", func(j *sednav1.FederatedLearningJob) { j.Labels = map[string]string{"edit": "1"} })
	up := c3.must(5 * time.Second).(*edgeproto.Upsert)
	if up.ResourceVersion != "45" || up.Digest == held["fl-a"].Digest || up.Digest == "" {
		t.Errorf("after a label edit got %s digest %q, want 45 with a new digest (was %q)", summary(up), up.Digest, held["fl-a"].Digest)
	}
	// An Ack without a digest (a LocalController that predates them) settles it.
	old := up.ObjectVersion
	old.Digest = ""
	c3.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{old}})
	drainResends(c3, "fl-a@45")
	c3.quiet(4 * testConfig.ResendAfter)
}

// A learning cycle's stage reaches its edge node (the LocalController acts
// on it); what the cloud heard from the edge nodes and the conditions do
// not.
func TestCycleStatusReachesTheEdgeButItsReportsDoNot(t *testing.T) {
	d := edgehubtest.Dataset("data-a", "edge-a")
	d.ResourceVersion = "10"
	il := edgehubtest.IncrementalJob("il-a", "data-a", "edge-a", "edge-a", "edge-a")
	il.ResourceVersion = "70"
	f := newFixture(t, testConfig, d, il)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	held := syncAndAck(c)
	if _, ok := held["il-a"]; !ok {
		t.Fatalf("sent %v, want il-a", held)
	}
	jobs := f.sedna.SednaV1alpha1().IncrementalLearningJobs(testNS)
	update := func(rv string, change func(*sednav1.IncrementalLearningJob)) {
		t.Helper()
		j, err := jobs.Get(t.Context(), "il-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(j)
		j.ResourceVersion = rv
		if _, err := jobs.UpdateStatus(t.Context(), j, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update("71", func(j *sednav1.IncrementalLearningJob) {
		j.Status.EdgeNodes = []sednav1.EdgeNodeStatus{{Name: "edge-a", Worker: "w", LastReportID: 9}}
		j.Status.Conditions = []sednav1.StageCondition{{Type: "Running", Status: "True"}}
	})
	c.quiet(4 * testConfig.ResendAfter)

	update("72", func(j *sednav1.IncrementalLearningJob) { j.Status.Stage = sednav1.StageEval })
	up := c.must(5 * time.Second).(*edgeproto.Upsert)
	if up.ResourceVersion != "72" || !strings.Contains(string(up.Object), `"stage":"Eval"`) {
		t.Fatalf("after the stage changed got %s %s, want 72 with stage Eval", summary(up), up.Object)
	}
	if s := string(up.Object); strings.Contains(s, "edgeNodes") || strings.Contains(s, `"conditions"`) {
		t.Errorf("sent the cloud's own status to the edge: %s", s)
	}
}
