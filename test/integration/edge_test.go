package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/desired"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
	"github.com/nereid-ml/nereid/test/framework"
)

// trainingWorkerOn returns the name of the job's training worker pod on node.
func trainingWorkerOn(t *testing.T, ns string, job metav1.Object, node string) string {
	t.Helper()
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pods {
		if p.Labels[common.LabelWorkerRole] == "training" && p.Spec.NodeName == node {
			return name
		}
	}
	t.Fatalf("no training worker of %s on %s", job.GetName(), node)
	return ""
}

// postReport posts what a Sedna training worker posts; it returns the HTTP status.
func postReport(t *testing.T, lc *framework.LocalController, ns, worker string, round int) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"name": worker, "namespace": ns, "ownerName": flJob, "ownerKind": "federatedlearningjob",
		"kind": "train", "status": "running", "ownerInfo": map[string]any{"currentRound": round},
	})
	return framework.PostAsWorker(t, lc, ns, worker, body)
}

// notYetKnown says whether a report's answer may mean only that the
// LocalController has not yet been sent the worker or its address: the
// connection closed (status 0) or 403.
func notYetKnown(code int) bool {
	return code == 0 || code == http.StatusForbidden
}

// postUntilKnown posts a report, retrying while the LocalController has not
// received the job, its worker or the worker's address yet.
func postUntilKnown(t *testing.T, lc *framework.LocalController, ns, worker string, round int) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "the LocalController to take a report", func(context.Context) (bool, error) {
		code, msg := postReport(t, lc, ns, worker, round)
		if code != http.StatusOK && !notYetKnown(code) {
			return false, fmt.Errorf("status %d: %s", code, msg)
		}
		return code == http.StatusOK, nil
	})
}

// edgeNode returns what the job's status says the cloud heard from node.
func edgeNode(ctx context.Context, t *testing.T, ns, node string) (sednav1.EdgeNodeStatus, error) {
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
	if err != nil {
		return sednav1.EdgeNodeStatus{}, err
	}
	for _, n := range job.Status.EdgeNodes {
		if n.Name == node {
			return n, nil
		}
	}
	return sednav1.EdgeNodeStatus{}, nil
}

func waitForReports(t *testing.T, ns, node string, n int64) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("%d reports from %s in status", n, node), func(ctx context.Context) (bool, error) {
		got, err := edgeNode(ctx, t, ns, node)
		if got.ReportsApplied > n {
			return false, fmt.Errorf("%d reports applied, more than the %d sent", got.ReportsApplied, n)
		}
		return got.ReportsApplied == n, err
	})
}

// reportingWorker sets up a GlobalManager with its edge hub, edge-0's
// LocalController and the federated learning example, and has the example's
// training worker on edge-0 report once, through to the job's status.
func reportingWorker(t *testing.T) (ns string, hub *framework.EdgeHub, lc *framework.LocalController, worker string) {
	t.Helper()
	ns = framework.Namespace(t)
	hub = framework.StartGlobalManagerWithEdgeHub(t, ns)
	lc = framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	job := applyFederatedExample(t, ns)
	worker = trainingWorkerOn(t, ns, job, "edge-0")
	postUntilKnown(t, lc, ns, worker, 1)
	waitForReports(t, ns, "edge-0", 1)
	return ns, hub, lc, worker
}

// postRounds posts the worker's reports of rounds first..last, each of which
// the LocalController must take (200), cloud or no cloud.
func postRounds(t *testing.T, lc *framework.LocalController, ns, worker string, first, last int) {
	t.Helper()
	for round := first; round <= last; round++ {
		if code, msg := postReport(t, lc, ns, worker, round); code != http.StatusOK {
			t.Fatalf("report of round %d: the LocalController answered %d: %s", round, code, msg)
		}
	}
}

func TestEdgeReportsPostedWhileTheGlobalManagerIsDownArriveOnce(t *testing.T) {
	t.Parallel()
	ns, hub, lc, worker := reportingWorker(t)

	hub.Kill(t)
	postRounds(t, lc, ns, worker, 2, 6)
	if err := hub.Start(); err != nil {
		t.Fatal(err)
	}
	waitForReports(t, ns, "edge-0", 6)
	// Each report counted once: with every report acknowledged, edge-0 has
	// nothing left to send again.
	framework.WaitForReportsAcknowledged(t, lc)
	if got, err := edgeNode(t.Context(), t, ns, "edge-0"); err != nil || got.ReportsApplied != 6 {
		t.Errorf("%d reports applied from edge-0 (%v), want 6", got.ReportsApplied, err)
	}
}

func TestLocalControllerKilledAndRestartedLosesNoAcknowledgedReport(t *testing.T) {
	t.Parallel()
	ns, hub, lc, worker := reportingWorker(t)

	hub.Kill(t)
	postRounds(t, lc, ns, worker, 2, 4)
	lc.Kill(t)
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	// Still without the cloud, the restarted LocalController knows the job
	// from its store and keeps taking reports.
	framework.Eventually(t, 30*time.Second, "the restarted LocalController to take a report", func(context.Context) (bool, error) {
		code, _ := postReport(t, lc, ns, worker, 5)
		return code == http.StatusOK, nil
	})
	if err := hub.Start(); err != nil {
		t.Fatal(err)
	}
	waitForReports(t, ns, "edge-0", 5)
}

// TestWipedEdgeStoreHasItsNewReportsApplied wipes edge-0's store
// (a new disk, a reinstall): the LocalController comes back with the same
// identity, a new store and report IDs from 1 again, and its new reports
// apply, although their IDs are ones the job's status has already counted for
// the old store.
func TestWipedEdgeStoreHasItsNewReportsApplied(t *testing.T) {
	t.Parallel()
	ns, _, lc, worker := reportingWorker(t)
	postRounds(t, lc, ns, worker, 2, 10)
	waitForReports(t, ns, "edge-0", 10)
	before, err := edgeNode(t.Context(), t, ns, "edge-0")
	if err != nil {
		t.Fatal(err)
	}

	lc.Stop(t)
	if err := os.RemoveAll(lc.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	// The new store holds nothing until the GlobalManager sends the job again.
	postUntilKnown(t, lc, ns, worker, 11)
	postRounds(t, lc, ns, worker, 12, 13)
	waitForReports(t, ns, "edge-0", 13)

	after, err := edgeNode(t.Context(), t, ns, "edge-0")
	if err != nil {
		t.Fatal(err)
	}
	if after.Store == "" || after.Store == before.Store {
		t.Errorf("store %q after the wipe, %q before; want a new identity", after.Store, before.Store)
	}
	if after.LastReportID >= before.LastReportID {
		t.Errorf("last report ID %d after the wipe, %d before; want the new store's IDs to have started again", after.LastReportID, before.LastReportID)
	}
	wantPrevious := []sednav1.StoreReportID{{Store: before.Store, LastReportID: before.LastReportID}}
	if diff := cmp.Diff(wantPrevious, after.PreviousStores); diff != "" {
		t.Errorf("previous stores (-want,+got):\n%s", diff)
	}
	if round, ok := edgestatus.MetricValue(after.Metrics, "currentRound"); !ok || round != 13 {
		t.Errorf("currentRound %v (%v), want the last round posted, 13", round, ok)
	}
}

// TestEdgeHubKnowsTheStatusWritesNoRetryCanMend writes job statuses the real
// API server refuses for what they are and checks that the hub's
// classification (common.IsPermanent), which makes it refuse such a report
// for good instead of retrying it forever, recognises what the API server
// really answers; and that it takes a write that succeeds for no refusal.
func TestEdgeHubKnowsTheStatusWritesNoRetryCanMend(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example("federatedlearningjob")); err != nil {
		t.Fatalf("applying the example: %v\n%s", err, out)
	}
	padded := func(size int) []sednav1.EdgeNodeStatus {
		return []sednav1.EdgeNodeStatus{{Name: "edge-0", LastHeardTime: metav1.Now(), Metrics: []sednav1.Metric{{Key: "pad", Value: strings.Repeat("x", size)}}}}
	}
	tests := map[string]struct {
		edgeNodes     []sednav1.EdgeNodeStatus
		wantPermanent bool
	}{
		"a status that fits": {edgeNodes: padded(1 << 10)},
		"two entries for one node (edgeNodes is a map by name)": {wantPermanent: true,
			edgeNodes: append(padded(10), padded(10)...)},
		"over etcd's request limit (1.5 MiB)":                    {wantPermanent: true, edgeNodes: padded(7 << 18)},
		"over the API server's etcd client's send limit (2 MiB)": {wantPermanent: true, edgeNodes: padded(5 << 19)},
		"over the API server's request limit (3 MiB)":            {wantPermanent: true, edgeNodes: padded(4 << 20)},
	}
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job, err := jobs.Get(t.Context(), flJob, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			job.Status.EdgeNodes = tc.edgeNodes
			_, err = jobs.UpdateStatus(t.Context(), job, metav1.UpdateOptions{})
			var status apierrors.APIStatus
			if errors.As(err, &status) {
				s := status.Status()
				t.Logf("the API server answered %d, reason %q: %.200s", s.Code, s.Reason, s.Message)
			}
			if got := common.IsPermanent(err); got != tc.wantPermanent || (err == nil) == tc.wantPermanent {
				t.Errorf("UpdateStatus: %v; IsPermanent %v, want %v", err, got, tc.wantPermanent)
			}
		})
	}
}

// The store key and identity the raw connections' Hellos state, and the
// last report ID: their reports come with any ID below it.
const (
	testStoreKey     = "3333333333333333333333333333333333333333333333333333333333333333"
	testLastReportID = 1 << 20
)

var testStore = edgeproto.StoreIdentity(testStoreKey)

// rawEdgeConn dials the hub as a LocalController would, without being one:
// for the tests of what a misbehaving or lying peer gets.
func rawEdgeConn(t *testing.T, hub *framework.EdgeHub, tokenFile string) (*websocket.Conn, error) {
	t.Helper()
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := dialEdge(t, hub, strings.TrimSpace(string(token)))
	return conn, err
}

// readReportAck reads a raw connection's frames until a ReportAck.
func readReportAck(t *testing.T, conn *websocket.Conn) *edgeproto.ReportAck {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, frame, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("no ReportAck: %v", err)
		}
		m, err := edgeproto.Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		if ack, ok := m.(*edgeproto.ReportAck); ok {
			return ack
		}
	}
}

func send(t *testing.T, conn *websocket.Conn, m edgeproto.Message) {
	t.Helper()
	frame, err := edgeproto.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		t.Fatalf("sending %s: %v", m.Type(), err)
	}
}

// readUntilClosed reads frames until the hub closes the connection or
// timeout passes; it returns the messages and whether the connection closed.
func readUntilClosed(conn *websocket.Conn, timeout time.Duration) (msgs []edgeproto.Message, closed bool) {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	for {
		_, frame, err := conn.ReadMessage()
		if err != nil {
			return msgs, !isTimeout(err)
		}
		if m, err := edgeproto.Decode(frame); err == nil {
			msgs = append(msgs, m)
		}
	}
}

func isTimeout(err error) bool {
	type timeout interface{ Timeout() bool }
	t, ok := err.(timeout)
	return ok && t.Timeout()
}

func TestHelloClaimingAnotherNodeGetsNothing(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	applyFederatedExample(t, ns)
	conn, err := rawEdgeConn(t, hub, framework.EdgeIdentity(t, ns, "edge-1"))
	if err != nil {
		t.Fatalf("dialing the hub with a valid token: %v", err)
	}
	send(t, conn, &edgeproto.Hello{Node: "edge-0", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID}) // the token says edge-1
	msgs, closed := readUntilClosed(conn, 5*time.Second)
	for _, m := range msgs {
		if m.Type() != edgeproto.TypeHeartbeat {
			t.Errorf("a connection claiming another node got a %s", m.Type())
		}
	}
	if !closed {
		t.Errorf("the hub kept a connection whose hello claims another node")
	}
}

func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	t.Parallel()
	ns, hub, lc, worker := reportingWorker(t)

	token := framework.EdgeIdentity(t, ns, "edge-1")
	cases := map[string][]byte{
		"malformed":       []byte(`{"v":1,"type":"hello","payload":`),
		"oversized":       bytes.Repeat([]byte("x"), edgeproto.MaxFrameBytes+1),
		"unknown version": []byte(`{"v":2,"type":"hello","payload":{"node":"edge-1"}}`),
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			conn, err := rawEdgeConn(t, hub, token)
			if err != nil {
				t.Fatal(err)
			}
			send(t, conn, &edgeproto.Hello{Node: "edge-1", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
			if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
				t.Fatal(err)
			}
			if _, closed := readUntilClosed(conn, 10*time.Second); !closed {
				t.Errorf("the hub kept a connection that sent a %s frame", name)
			}
		})
	}
	// The real LocalController's link was not disturbed.
	if code, msg := postReport(t, lc, ns, worker, 2); code != http.StatusOK {
		t.Fatalf("report after the bad frames: %d %s", code, msg)
	}
	waitForReports(t, ns, "edge-0", 2)
}

// TestReportAboutAJobWithoutAWorkerOnTheNodeIsRefused plays a LocalController
// of edge-1 that reports about a service whose workers are on edge-0 and
// cloud-0: the hub refuses it and no status changes.
func TestReportAboutAJobWithoutAWorkerOnTheNodeIsRefused(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	applyJointInferenceExample(t, ns)
	conn, err := rawEdgeConn(t, hub, framework.EdgeIdentity(t, ns, "edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	send(t, conn, &edgeproto.Hello{Node: "edge-1", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	body, _ := json.Marshal(map[string]any{
		"name": "intruder", "namespace": ns, "ownerName": jiName, "ownerKind": "jointinferenceservice",
		"kind": "inference", "ownerInfo": map[string]any{"inferenceNumber": 1000, "hardExampleNumber": 999},
	})
	send(t, conn, &edgeproto.Report{ID: 1, Worker: "intruder", Body: body, ReceivedAt: time.Now()})
	ack := readReportAck(t, conn)
	if len(ack.Refused) != 1 || ack.Refused[0].ID != 1 {
		t.Fatalf("the report was not refused: %+v", ack)
	}
	got, err := framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns).Get(t.Context(), jiName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.EdgeNodes) != 0 || len(got.Status.Metrics) != 0 {
		t.Errorf("a refused report changed the status: %+v", got.Status)
	}
}

// lcObjects is what a LocalController's store holds, by "Kind ns/name", with
// its resourceVersion.
func lcObjects(lc *framework.LocalController) (map[string]string, error) {
	return lcInventory(lc, func(v storedVersion) string { return v.ResourceVersion })
}

// lcDigests is what lc's store holds, as the digest of each object
// (desired.Digest) by "Kind namespace/name": equal to the digest of the
// cluster's object when the node holds all it uses of it.
func lcDigests(lc *framework.LocalController) (map[string]string, error) {
	return lcInventory(lc, func(v storedVersion) string { return v.Digest })
}

type storedVersion struct {
	Key                     struct{ Kind, Namespace, Name string }
	ResourceVersion, Digest string
}

func lcInventory(lc *framework.LocalController, value func(storedVersion) string) (map[string]string, error) {
	resp, err := http.Get(lc.HealthURL + "/objects")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var inv []storedVersion
	if err := json.NewDecoder(resp.Body).Decode(&inv); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, v := range inv {
		out[v.Key.Kind+" "+v.Key.Namespace+"/"+v.Key.Name] = value(v)
	}
	return out, nil
}

// TestObjectsChangedWhileALocalControllerIsDownAreRightAfterItReconnects
// edits one object and deletes another while edge-0's LocalController is
// stopped: after it reconnects its store holds exactly what concerns edge-0.
func TestObjectsChangedWhileALocalControllerIsDownAreRightAfterItReconnects(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	applyFederatedExample(t, ns)
	const dataset = "edge0-surface-defect-detection-dataset"
	framework.Eventually(t, 30*time.Second, "edge-0's objects on its LocalController", func(context.Context) (bool, error) {
		objs, err := lcObjects(lc)
		return len(objs) == 3 && objs["FederatedLearningJob "+ns+"/"+flJob] != "" && objs["Dataset "+ns+"/"+dataset] != "" &&
			objs["Model "+ns+"/surface-defect-detection-model"] != "", err
	})

	lc.Stop(t)
	sedna := framework.SednaClient(t).SednaV1alpha1()
	// The LocalController's last count may still be going into the
	// Dataset's status: the edit is retried on a conflict, as kubectl's.
	var ds *sednav1.Dataset
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := sedna.Datasets(ns).Get(t.Context(), dataset, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.URL = "/data/surface-defect/1-more.txt"
		ds, err = sedna.Datasets(ns).Update(t.Context(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sedna.FederatedLearningJobs(ns).Delete(t.Context(), flJob, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	// The job is gone and with it the reason to hold its Model; the edited
	// Dataset is there as the cluster has it: at the edit's version, as a
	// count the LocalController reported since changes only its status,
	// which is not sent down.
	framework.Eventually(t, 30*time.Second, "the LocalController's store to match the cluster", func(ctx context.Context) (bool, error) {
		objs, err := lcDigests(lc)
		if err != nil {
			return false, nil
		}
		now, err := sedna.Datasets(ns).Get(ctx, dataset, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		want, err := desired.Digest(sednav1.DatasetKind.Kind, now)
		return len(objs) == 1 && objs["Dataset "+ns+"/"+dataset] == want && now.Spec.URL == ds.Spec.URL, err
	})
	if objs, err := lcObjects(lc); err != nil || !framework.VersionAtLeast(objs["Dataset "+ns+"/"+dataset], ds.ResourceVersion) {
		t.Errorf("the store holds Dataset %s at %q (%v), want the edit's version %s or later", dataset, objs["Dataset "+ns+"/"+dataset], err, ds.ResourceVersion)
	}
}

// TestASecondConnectionOfANodeReplacesTheFirst starts two LocalControllers
// with the identity of edge-0: the hub serves one connection per node at a
// time, and each of them ends up with every object of edge-0.
func TestASecondConnectionOfANodeReplacesTheFirst(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	token := framework.EdgeIdentity(t, ns, "edge-0")
	first := framework.StartLocalController(t, hub, "edge-0", token)
	applyFederatedExample(t, ns)
	framework.Eventually(t, 30*time.Second, "the first LocalController to hold edge-0's objects", func(context.Context) (bool, error) {
		objs, err := lcObjects(first)
		return len(objs) == 3, err
	})
	second := framework.StartLocalController(t, hub, "edge-0", token)
	framework.Eventually(t, 30*time.Second, "the second LocalController to hold edge-0's objects", func(context.Context) (bool, error) {
		objs, err := lcObjects(second)
		return len(objs) == 3, err
	})
	if !strings.Contains(hub.Log(), "A new connection replaces the node's current one") {
		t.Errorf("the hub's log does not say a connection was replaced")
	}
}

// TestJointInferenceCountsReachTheServiceStatus posts what Sedna's edge
// inference worker posts every LC_PERIOD to edge-0's LocalController.
func TestJointInferenceCountsReachTheServiceStatus(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	applyJointInferenceExample(t, ns)
	pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: common.LabelWorkerRole + "=edge"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("edge worker pods: %v, %d", err, len(pods.Items))
	}
	worker := pods.Items[0].Name
	body, _ := json.Marshal(map[string]any{
		"name": worker, "namespace": ns, "ownerName": jiName, "ownerKind": "jointinferenceservice", "kind": "inference",
		"ownerInfo": map[string]any{"startTime": "2026-11-21 07:00:00", "updateTime": "2026-11-21 07:00:30",
			"inferenceNumber": 120, "hardExampleNumber": 30, "uploadCloudRatio": 0.25},
	})
	framework.Eventually(t, 30*time.Second, "the LocalController to take the report", func(context.Context) (bool, error) {
		code, _ := framework.PostAsWorker(t, lc, ns, worker, body)
		return code == http.StatusOK, nil
	})
	framework.Eventually(t, 30*time.Second, "the counts in the service's status", func(ctx context.Context) (bool, error) {
		ji, err := framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns).Get(ctx, jiName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _ := edgestatus.MetricValue(ji.Status.Metrics, "inferenceNumber")
		h, _ := edgestatus.MetricValue(ji.Status.Metrics, "hardExampleNumber")
		return n == 120 && h == 30, nil
	})
}

// TestCoalescedReportsApplyOnceAcrossAGlobalManagerRestart has the training
// workers on edge-0 and edge-1 report while the GlobalManager is down, then
// starts it with a report window, so that each node's backlog gathers into
// few status writes, which the two nodes' lanes share when one arrives while
// the other's is in flight or waits for its turn: each report is still
// applied once, however the writes carried them and whatever was in flight
// when it stopped.
func TestCoalescedReportsApplyOnceAcrossAGlobalManagerRestart(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns, "--edge-report-window=200ms")
	lcs := map[string]*framework.LocalController{}
	for _, node := range []string{"edge-0", "edge-1"} {
		lcs[node] = framework.StartLocalController(t, hub, node, framework.EdgeIdentity(t, ns, node))
	}
	job := applyFederatedExample(t, ns)
	workers := map[string]string{}
	for node, lc := range lcs {
		workers[node] = trainingWorkerOn(t, ns, job, node)
		postUntilKnown(t, lc, ns, workers[node], 1)
	}
	for node := range lcs {
		waitForReports(t, ns, node, 1)
	}

	// Stopped in the middle of a burst: some reports written, some in
	// flight, the rest waiting on the edge.
	const rounds = 30
	var wg sync.WaitGroup
	for node, lc := range lcs {
		wg.Go(func() { postRounds(t, lc, ns, workers[node], 2, rounds/2) })
	}
	wg.Wait()
	hub.Kill(t)
	for node, lc := range lcs {
		wg.Go(func() { postRounds(t, lc, ns, workers[node], rounds/2+1, rounds) })
	}
	wg.Wait()
	if err := hub.Start(); err != nil {
		t.Fatal(err)
	}
	for node, lc := range lcs {
		waitForReports(t, ns, node, rounds)
		framework.WaitForReportsAcknowledged(t, lc)
	}
	for node := range lcs {
		if got, err := edgeNode(t.Context(), t, ns, node); err != nil || got.ReportsApplied != rounds {
			t.Errorf("%d reports applied from %s (%v), want %d", got.ReportsApplied, node, err, rounds)
		}
	}
	// The writes after the restart carried more than one report each.
	m, err := framework.ScrapeMetrics(t.Context(), "http://"+hub.HealthAddress())
	if err != nil {
		t.Fatal(err)
	}
	series := `nereid_controller_edge_reports_per_status_write_%s{kind="federatedlearningjob"}`
	writes, reports := m.Get(fmt.Sprintf(series, "count")), m.Get(fmt.Sprintf(series, "sum"))
	if writes == 0 || reports <= writes {
		t.Errorf("after the restart %v status writes carried %v reports; want fewer writes than reports", writes, reports)
	}
	t.Logf("after the restart %v status writes carried %v reports", writes, reports)
}

// TestAHelloClaimingReportIDsTheStoreNeverGaveIsRefused: with edge-0's
// LocalController's token and its store's key (the node's store file holds
// it), a hello stating report ID 2^63-2, followed by a report of ID 2^63-1,
// would have the store's real reports after it acknowledged without effect.
// The hub refuses the hello, since the cloud recorded far less of that
// store, and the real LocalController's reports go on being applied.
func TestAHelloClaimingReportIDsTheStoreNeverGaveIsRefused(t *testing.T) {
	t.Parallel()
	ns, hub, lc, worker := reportingWorker(t)
	lc.Stop(t)
	st, err := store.Open(filepath.Join(lc.DataDir, "localcontroller.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := st.Key()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	token, err := framework.NewEdgeIdentity(t.Context(), framework.KubeClient(t), ns, framework.EdgeServiceAccount, "edge-0")
	if err != nil {
		t.Fatal(err)
	}
	pod, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(t.Context(), worker, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The restarted LocalController is back (its report taken) before the
	// forged hello, which would otherwise race its reconnection: one
	// connection of a node reads its hello at a time, the newer wins.
	postUntilKnown(t, lc, ns, worker, 2)
	body, _ := json.Marshal(map[string]any{"name": worker, "namespace": ns, "ownerName": flJob, "ownerKind": "federatedlearningjob",
		"kind": "train", "status": "running", "ownerInfo": map[string]any{"currentRound": 99}})
	framework.Eventually(t, 30*time.Second, "the forged hello to be refused", func(context.Context) (bool, error) {
		conn, _, err := dialEdge(t, hub, token)
		if err != nil {
			return false, err
		}
		defer conn.Close()
		send(t, conn, &edgeproto.Hello{Node: "edge-0", Store: edgeproto.StoreIdentity(key), StoreKey: key, LastReportID: math.MaxInt64 - 1})
		if frame, err := edgeproto.Encode(&edgeproto.Report{ID: math.MaxInt64, Worker: worker, Body: body, ReceivedAt: time.Now(), From: pod.Status.PodIP}); err == nil {
			_ = conn.WriteMessage(websocket.TextMessage, frame) // the hub may have closed already
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for err == nil {
			_, _, err = conn.ReadMessage()
		}
		var ce *websocket.CloseError
		switch {
		case errors.As(err, &ce) && ce.Code == websocket.ClosePolicyViolation && strings.Contains(ce.Text, "lastReportID 9223372036854775806 is past"):
			return true, nil
		case errors.As(err, &ce) && strings.Contains(ce.Text, "replaced by a newer connection"):
			return false, nil // the LocalController reconnected meanwhile: again
		}
		return false, fmt.Errorf("got %v, want the hello refused as stating report IDs the store never gave", err)
	})
	postRounds(t, lc, ns, worker, 3, 4)
	waitForReports(t, ns, "edge-0", 4)
}
