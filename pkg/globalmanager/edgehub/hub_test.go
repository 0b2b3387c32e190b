package edgehub

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gorilla/websocket"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/testwait"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/auth"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// edgeObjects are a dataset, a joint inference service with its two models
// and a federated job with its model on edge-a, and a federated job on edge-b.
func edgeObjects() []runtime.Object {
	d := edgehubtest.Dataset("data-a", "edge-a")
	d.ResourceVersion = "10"
	small, big := edgehubtest.Model("ji-a-small"), edgehubtest.Model("ji-a-big")
	small.ResourceVersion, big.ResourceVersion = "20", "21"
	ji := edgehubtest.JointService("ji-a", "edge-a", "cloud")
	ji.ResourceVersion, ji.UID = "30", "uid-ji-a"
	fl := edgehubtest.FederatedJob("fl-a", "cloud", "edge-a")
	fl.ResourceVersion, fl.UID = "40", "uid-fl-a"
	flModel := edgehubtest.Model("fl-a-model")
	flModel.ResourceVersion = "41"
	other := edgehubtest.FederatedJob("fl-b", "cloud", "edge-b")
	other.ResourceVersion = "50"
	return []runtime.Object{d, small, big, ji, fl, flModel, other}
}

// upToDate is the inventory of a LocalController of edge-a holding everything.
func upToDate() []edgeproto.ObjectVersion {
	return []edgeproto.ObjectVersion{
		version("Dataset", "data-a", "10"),
		version("Model", "ji-a-small", "20"),
		version("Model", "ji-a-big", "21"),
		version("JointInferenceService", "ji-a", "30"),
		version("FederatedLearningJob", "fl-a", "40"),
		version("Model", "fl-a-model", "41"),
	}
}

func TestHelloGetsTheDifferenceThenSynced(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	tests := map[string]struct {
		inventory []edgeproto.ObjectVersion
		want      []string
	}{
		"an empty store gets everything, datasets and models first": {
			want: []string{
				"upsert Dataset default/data-a@10 (sedna.io/v1alpha1 Dataset)",
				"upsert Model default/fl-a-model@41 (sedna.io/v1alpha1 Model)",
				"upsert Model default/ji-a-big@21 (sedna.io/v1alpha1 Model)",
				"upsert Model default/ji-a-small@20 (sedna.io/v1alpha1 Model)",
				"upsert FederatedLearningJob default/fl-a@40 (sedna.io/v1alpha1 FederatedLearningJob)",
				"upsert JointInferenceService default/ji-a@30 (sedna.io/v1alpha1 JointInferenceService)",
			},
		},
		"an up-to-date store gets nothing": {inventory: upToDate()},
		"missing, stale and extra objects": {
			inventory: []edgeproto.ObjectVersion{
				version("Dataset", "data-a", "10"),                // up to date
				version("Model", "ji-a-small", "19"),              // stale
				version("JointInferenceService", "ji-a", "30"),    // up to date
				version("FederatedLearningJob", "fl-a", "39"),     // stale
				version("FederatedLearningJob", "fl-b", "50"),     // another node's
				version("Model", "gone", "7"),                     // deleted meanwhile
				version("IncrementalLearningJob", "il-gone", "8"), // deleted meanwhile
				version("Model", "fl-a-model", "41"),              // up to date
				/* Model ji-a-big is missing */
			},
			want: []string{
				"upsert Model default/ji-a-big@21 (sedna.io/v1alpha1 Model)",
				"upsert Model default/ji-a-small@20 (sedna.io/v1alpha1 Model)",
				"upsert FederatedLearningJob default/fl-a@40 (sedna.io/v1alpha1 FederatedLearningJob)",
				"delete Model default/gone@7",
				"delete FederatedLearningJob default/fl-b@50",
				"delete IncrementalLearningJob default/il-gone@8",
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: tc.inventory})
			if diff := cmp.Diff(tc.want, c.untilSynced()); diff != "" {
				t.Errorf("answer to the hello (-want,+got):\n%s", diff)
			}
			c.conn.Close()
		})
	}
}

func TestOnlyALocalControllerOnAnEdgeNodeIsUpgraded(t *testing.T) {
	f := newFixture(t, testConfig)
	tests := map[string]struct {
		token      string
		wantStatus int
		wantBody   string
		wantReason string
	}{
		"no token":                {token: "", wantStatus: http.StatusUnauthorized, wantBody: "bearer token", wantReason: auth.RefusedNoToken},
		"not a JWT":               {token: "forged", wantStatus: http.StatusUnauthorized, wantBody: "not a ServiceAccount token", wantReason: auth.RefusedInvalidToken},
		"an invalid token":        {token: edgehubtest.JWT("forged", nil), wantStatus: http.StatusUnauthorized, wantBody: "invalid bearer token", wantReason: auth.RefusedInvalidToken},
		"a token bound to no pod": {token: edgehubtest.JWT("token-unbound", nil), wantStatus: http.StatusForbidden, wantBody: "not bound to a Pod", wantReason: auth.RefusedNoNode},
		"another ServiceAccount's pod on an edge node": {token: edgehubtest.JWT("token-other-edge-a", nil), wantStatus: http.StatusForbidden,
			wantBody: "is not a LocalController", wantReason: auth.RefusedNotLocalController},
		"a LocalController on a cloud node": {token: edgehubtest.JWT("token-cloud-0", nil), wantStatus: http.StatusForbidden,
			wantBody: "node cloud-0 is not an edge node", wantReason: auth.RefusedNotEdgeNode},
		"a LocalController on no node": {token: edgehubtest.JWT("token-gone", nil), wantStatus: http.StatusForbidden,
			wantBody: "node gone does not exist", wantReason: auth.RefusedNotEdgeNode},
		"a LocalController's token for the API server": {
			token:      edgehubtest.JWT("token-edge-a", map[string]any{"aud": []string{"https://kubernetes.default.svc.cluster.local"}}),
			wantStatus: http.StatusUnauthorized, wantBody: `the hub takes only tokens with audience "nereid-edgehub"`, wantReason: auth.RefusedWrongAudience},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := f.metric("connections_refused_total", "reason", tc.wantReason)
			conn, resp, err := f.dial(tc.token)
			if err == nil {
				conn.Close()
				t.Fatal("the connection was upgraded")
			}
			if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil {
				t.Fatalf("dial: %v, want a refused handshake", err)
			}
			body := make([]byte, 512)
			n, _ := resp.Body.Read(body)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body[:n]), tc.wantBody) {
				t.Errorf("got %d %q, want %d with %q", resp.StatusCode, body[:n], tc.wantStatus, tc.wantBody)
			}
			if got := f.metric("connections_refused_total", "reason", tc.wantReason) - before; got != 1 {
				t.Errorf("connections_refused_total{reason=%q} grew by %v, want 1", tc.wantReason, got)
			}
		})
	}
}

func TestATokenIsReviewedOnceWhileItsOutcomeIsFresh(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	reviews := func() int {
		n := 0
		for _, a := range f.kube.Actions() {
			if a.Matches("create", "tokenreviews") {
				n++
			}
		}
		return n
	}
	for range 5 {
		if conn, _, err := f.dial(edgehubtest.JWT("forged", nil)); err == nil {
			conn.Close()
			t.Fatal("a forged token was upgraded")
		}
	}
	if got := reviews(); got != 1 {
		t.Errorf("5 connections with one forged token made %d TokenReviews, want 1", got)
	}
	for range 3 {
		c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
		c.untilSynced()
	}
	if got := reviews(); got != 2 {
		t.Errorf("3 more connections with one valid token made %d TokenReviews in all, want 2", got)
	}
}

// holdReview connects with a token whose review waits, and returns once
// that review has begun (holding a slot) a func that lets it end and waits
// for that connection.
func holdReview(f *fixture) (release func()) {
	held := make(chan struct{})
	entered := make(chan struct{}, 1)
	f.kube.PrependReactor("create", "tokenreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if name, _, _ := strings.Cut(action.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).Spec.Token, "."); name == "token-slow" {
			entered <- struct{}{}
			<-held
		}
		return false, nil, nil
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if conn, _, err := f.dial(edgehubtest.JWT("token-slow", nil)); err == nil {
			conn.Close()
		}
	}()
	<-entered
	return func() {
		close(held)
		<-done
	}
}

// timerSpy is a fakeClock that tells of each timer NewTimer makes, by its
// duration.
type timerSpy struct {
	*fakeClock
	timers chan time.Duration
}

func (c *timerSpy) NewTimer(d time.Duration) clock.Timer {
	t := c.fakeClock.NewTimer(d)
	select {
	case c.timers <- d:
	default:
	}
	return t
}

func TestReviewsBeyondTheConcurrencyBoundAreToldToComeBack(t *testing.T) {
	cfg := testConfig
	// The queue's timeout is on the hub's clock, which the test moves; it
	// is one no other timer of the hub has, so that its timer is told apart.
	clk := &timerSpy{fakeClock: newFakeClock(), timers: make(chan time.Duration, 64)}
	cfg.MaxConcurrentReviews, cfg.ReviewQueueTimeout, cfg.clock = 1, 97*time.Second, clk
	f := newFixture(t, cfg)
	release := holdReview(f)
	type dialed struct {
		conn *websocket.Conn
		resp *http.Response
		err  error
	}
	done := make(chan dialed, 1)
	go func() {
		conn, resp, err := f.dial(edgehubtest.JWT("token-edge-a", nil))
		done <- dialed{conn, resp, err}
	}()
	// Every review waits in the queue with a timer, the held one's too:
	// the second is the connection beyond the bound.
	for queued := 0; queued < 2; {
		select {
		case d := <-clk.timers:
			if d == cfg.ReviewQueueTimeout {
				queued++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a connection beyond the bound set no timer on the hub's clock to wait in the queue")
		}
	}
	clk.Step(cfg.ReviewQueueTimeout)
	d := <-done
	conn, resp, err := d.conn, d.resp, d.err
	if err == nil {
		conn.Close()
		t.Fatal("a connection beyond the bound was reviewed at once")
	}
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %v %v, want 503 with Retry-After", resp, err)
	}
	if got := f.metric("connections_refused_total", "reason", auth.RefusedBusy); got != 1 {
		t.Errorf("connections_refused_total{reason=busy} = %v, want 1", got)
	}
	release()
	// The slot is free again.
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	c.untilSynced()
}

// An edge node the hub has cached costs a connection no read of the API
// server; one it has not (just made or labelled) is read, and still accepted.
func TestAConnectionFromACachedEdgeNodeReadsNoNode(t *testing.T) {
	edgeA := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-a", Labels: map[string]string{"node-role.kubernetes.io/edge": ""}}}
	f := newFixture(t, testConfig, append(edgeObjects(), edgeA)...)
	reads := func(node string) int {
		n := 0
		for _, a := range f.kube.Actions() {
			if a.Matches("get", "nodes") && a.(clienttesting.GetAction).GetName() == node {
				n++
			}
		}
		return n
	}
	f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID}).untilSynced()
	if got := reads("edge-a"); got != 0 {
		t.Errorf("a connection from the cached edge node edge-a read it %d times, want 0", got)
	}
	f.connect("edge-b", &edgeproto.Hello{Node: "edge-b", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID}).untilSynced()
	if got := reads("edge-b"); got != 1 {
		t.Errorf("a connection from edge-b, not cached, read it %d times, want 1", got)
	}
}

func TestConnectionEndsWhenItsPodIsDeleted(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	pod := edgehubtest.LCPod("edge-a")
	if _, err := f.kube.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	c.untilSynced()
	if err := f.kube.CoreV1().Pods(pod.Namespace).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := c.recv(5 * time.Second)
		if err == nil {
			if _, ok := m.(*edgeproto.ReportAck); ok {
				continue
			}
			continue // anything in flight before the close
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "was deleted") {
			t.Fatalf("got %v, want a policy-violation close saying the Pod was deleted", err)
		}
		break
	}
	if got := f.metric("connections_revoked_total", "reason", auth.RevokedPodDeleted); got != 1 {
		t.Errorf("connections_revoked_total{reason=pod_deleted} = %v, want 1", got)
	}
}

// TestConnectionEndsWhenTheReviewOfItsTokenRefusesIt hands two sessions to
// the confirmer, as if the hub had verified their tokens itself: edge-a's
// token reviews as another node's Pod, and its connection is closed; edge-b's
// reviews as its own, and its connection goes on.
func TestConnectionEndsWhenTheReviewOfItsTokenRefusesIt(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	ca := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	ca.untilSynced()
	cb := f.connect("edge-b", &edgeproto.Hello{Node: "edge-b", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	cb.untilSynced()
	f.hub.mu.Lock()
	sa, sb := f.hub.sessions["edge-a"], f.hub.sessions["edge-b"]
	f.hub.mu.Unlock()
	f.hub.confirmer.Add(sa, "token-edge-c")
	f.hub.confirmer.Add(sb, "token-edge-b")
	for {
		_, err := ca.recv(5 * time.Second)
		if err == nil {
			continue // anything in flight before the close
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "TokenReview binds it to Pod nereid-system/lc-edge-c") {
			t.Fatalf("got %v, want a policy-violation close saying the review bound the token to another Pod", err)
		}
		break
	}
	testwait.Eventually(t, 5*time.Second, "edge-b's token confirmed", func(context.Context) (bool, error) {
		return f.metric("tokens_confirmed_total", "result", "confirmed") == 1, nil
	})
	if got := f.metric("tokens_confirmed_total", "result", "refused"); got != 1 {
		t.Errorf("tokens_confirmed_total{result=refused} = %v, want 1", got)
	}
	if got := f.metric("connections_revoked_total", "reason", auth.RevokedTokenRefused); got != 1 {
		t.Errorf("connections_revoked_total{reason=token_review_refused} = %v, want 1", got)
	}
	if sb.ctx.Err() != nil {
		t.Error("edge-b's session ended though the review confirmed its token")
	}
	if !f.hub.auth.MustReview(sa.id.PodUID) || f.hub.auth.MustReview(sb.id.PodUID) {
		t.Error("want edge-a's Pod, and only it, to have its tokens reviewed before they are accepted from now on")
	}
}

func TestConnectionEndsWhenItsTokenExpires(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig
	cfg.clock = clk
	f := newFixture(t, cfg, edgeObjects()...)
	// Within recheckPeriod, so that no recheck runs meanwhile.
	const lifetime = 10 * time.Second
	expiry := clk.Now().Add(lifetime)
	token := edgehubtest.JWT("token-edge-a", map[string]any{"aud": []string{DefaultTokenAudience}, "exp": expiry.Unix()})
	conn, _, err := f.dial(token)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	frame, err := edgeproto.Encode(&edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		t.Fatal(err)
	}
	// The session sets its expiry before it answers the Hello: once
	// Synced comes, the token's time can run out.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, frame, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("reading up to Synced: %v", err)
		}
		if m, err := edgeproto.Decode(frame); err == nil && m.Type() == edgeproto.TypeSynced {
			break
		}
	}
	// exp is in whole seconds: the token expires within the second
	// before expiry.
	clk.Step(lifetime - 2*time.Second)
	f.hub.mu.RLock()
	s := f.hub.sessions["edge-a"]
	f.hub.mu.RUnlock()
	if s == nil || s.ctx.Err() != nil {
		t.Fatal("the connection ended before its token expired")
	}
	clk.Step(3 * time.Second)
	for {
		if _, _, err = conn.ReadMessage(); err != nil {
			break
		}
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "token expired") {
		t.Fatalf("got %v, want a policy-violation close saying the token expired", err)
	}
}

func TestHelloClaimingAnotherNodeGetsNothingAndIsClosed(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	c := f.connect("edge-b", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	ce := c.closed() // fails on any message before the close frame
	if ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "token is bound to node edge-b") {
		t.Errorf("closed with %d %q, want policy violation naming the token's node", ce.Code, ce.Text)
	}
	// The node it claimed is not connected by it.
	f.hub.mu.RLock()
	defer f.hub.mu.RUnlock()
	if len(f.hub.sessions) != 0 {
		t.Errorf("sessions %v, want none", f.hub.sessions)
	}
}

func TestFirstMessageMustBeHello(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	c := f.open("edge-a")
	c.send(&edgeproto.Heartbeat{Time: time.Now()})
	ce := c.closed()
	if ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "first message must be hello") {
		t.Errorf("closed with %d %q, want policy violation", ce.Code, ce.Text)
	}
}

// replaceConnection connects edge-a again, up to date, and checks that it
// replaces first, which is closed saying so.
func replaceConnection(t *testing.T, f *fixture, first *client) *client {
	t.Helper()
	second := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: upToDate()})
	ce := first.closed()
	if ce.Code != websocket.CloseNormalClosure || ce.Text != "replaced by a newer connection" {
		t.Errorf("first closed with %d %q, want the replacement reason", ce.Code, ce.Text)
	}
	if got := second.untilSynced(); len(got) != 0 {
		t.Errorf("second got %v before synced, want nothing", got)
	}
	return second
}

func TestNewerConnectionReplacesTheOlder(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	first := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: upToDate()})
	first.untilSynced()

	second := replaceConnection(t, f, first)

	// Changes go to the newer connection.
	updateJob(t, f, "fl-a", "42", func(j *sednav1.FederatedLearningJob) { j.Labels = map[string]string{"edited": "yes"} })
	if got := summary(second.must(5 * time.Second)); got != "upsert FederatedLearningJob default/fl-a@42 (sedna.io/v1alpha1 FederatedLearningJob)" {
		t.Errorf("second got %s, want the edit", got)
	}
}

// A node reads one Hello at a time: a newer connection closes an older one
// still streaming its inventory (each may hold tens of MiB until its Hello
// ends), and the newer is served.
func TestNewerConnectionReplacesAnOlderOneStillInItsHello(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	first := f.open("edge-a")
	first.send(&edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: []edgeproto.ObjectVersion{version("Model", "a", "1")}, More: true})
	testwait.Eventually(t, 5*time.Second, "the first connection in its hello", func(context.Context) (bool, error) { return f.hub.greetingFor("edge-a") != nil, nil })

	replaceConnection(t, f, first)
	if c := f.hub.greetingFor("edge-a"); c != nil {
		t.Error("a connection of edge-a is still counted as reading its hello")
	}
}

func TestEditReachesTheNodeOnceAndIsResentUntilAcked(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: upToDate()})
	if got := c.untilSynced(); len(got) != 0 {
		t.Fatalf("got %v before synced, want nothing", got)
	}
	c.quiet(time.Second) // with nothing changing, nothing is sent

	// Acknowledged at once: sent once.
	updateJob(t, f, "fl-a", "42", func(j *sednav1.FederatedLearningJob) { j.Labels = map[string]string{"edit": "1"} })
	up := c.must(5 * time.Second).(*edgeproto.Upsert)
	if up.ResourceVersion != "42" || !strings.Contains(string(up.Object), `"edit":"1"`) {
		t.Fatalf("got %s %s, want the edit at 42", summary(up), up.Object)
	}
	c.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{up.ObjectVersion}})
	c.quiet(4 * testConfig.ResendAfter)

	// Not acknowledged: sent again until it is.
	updateJob(t, f, "fl-a", "43", func(j *sednav1.FederatedLearningJob) { j.Labels = map[string]string{"edit": "2"} })
	first := time.Now()
	for range 2 {
		if got := summary(c.must(5 * time.Second)); got != "upsert FederatedLearningJob default/fl-a@43 (sedna.io/v1alpha1 FederatedLearningJob)" {
			t.Fatalf("got %s, want the edit at 43", got)
		}
	}
	if took := time.Since(first); took < testConfig.ResendAfter {
		t.Errorf("resent after %s, want at least ResendAfter %s", took, testConfig.ResendAfter)
	}
	// An Ack of an older version does not count.
	c.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{version("FederatedLearningJob", "fl-a", "42")}})
	if got := summary(c.must(5 * time.Second)); !strings.HasPrefix(got, "upsert FederatedLearningJob default/fl-a@43") {
		t.Fatalf("got %s, want another resend", got)
	}
	c.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{version("FederatedLearningJob", "fl-a", "43")}})
	drainResends(c, "fl-a@43")
	c.quiet(4 * testConfig.ResendAfter)
	if got := f.metric("resends_total"); got < 2 {
		t.Errorf("resends_total %v, want at least 2", got)
	}

	// Leaving the node's set is a Delete; so is being deleted.
	updateJob(t, f, "fl-a", "44", func(j *sednav1.FederatedLearningJob) {
		j.Spec.TrainingWorkers[0].Template.Spec.NodeName = "edge-b"
	})
	var got []string
	for range 2 {
		m := c.must(5 * time.Second)
		got = append(got, summary(m))
		if d, ok := m.(*edgeproto.Delete); ok {
			c.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{d.ObjectVersion}})
		}
	}
	slices.Sort(got)
	want := []string{"delete FederatedLearningJob default/fl-a@43", "delete Model default/fl-a-model@41"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the job moved away (-want,+got):\n%s", diff)
	}
	if err := f.sedna.SednaV1alpha1().JointInferenceServices(testNS).Delete(t.Context(), "ji-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got = nil
	for range 3 {
		m := c.must(5 * time.Second)
		got = append(got, summary(m))
		if d, ok := m.(*edgeproto.Delete); ok {
			c.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{d.ObjectVersion}})
		}
	}
	slices.Sort(got)
	want = []string{"delete JointInferenceService default/ji-a@30", "delete Model default/ji-a-big@21", "delete Model default/ji-a-small@20"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the service was deleted (-want,+got):\n%s", diff)
	}
	drainResends(c, "")
	c.quiet(4 * testConfig.ResendAfter)
}

// drainResends reads the resends that may have crossed an Ack (any message
// containing what; "" for any Delete or Upsert) until a quiet moment.
func drainResends(c *client, what string) {
	c.t.Helper()
	for {
		m, err := c.recv(2 * testConfig.ResendAfter)
		if err != nil {
			return
		}
		if s := summary(m); !strings.Contains(s, what) || (m.Type() != edgeproto.TypeUpsert && m.Type() != edgeproto.TypeDelete) {
			c.t.Fatalf("got %s, want at most a resend of %q", s, what)
		}
	}
}

func TestMalformedFrameClosesOnlyThatConnection(t *testing.T) {
	tests := map[string]struct {
		frame    []byte
		wantCode int
		wantText string
	}{
		"not JSON":         {frame: []byte("{nope"), wantCode: websocket.CloseInvalidFramePayloadData, wantText: "malformed message"},
		"unknown version":  {frame: []byte(`{"v":2,"type":"ack","payload":{}}`), wantCode: websocket.CloseUnsupportedData, wantText: "unknown protocol version 2"},
		"unknown type":     {frame: []byte(`{"v":1,"type":"launch","payload":{}}`), wantCode: websocket.CloseUnsupportedData, wantText: "unknown message type"},
		"a GM-only type":   {frame: []byte(`{"v":1,"type":"synced","payload":{}}`), wantCode: websocket.ClosePolicyViolation, wantText: "unexpected synced message"},
		"oversized":        {frame: []byte(`{"v":1,"type":"heartbeat","payload":{"pad":"` + strings.Repeat("x", edgeproto.MaxFrameBytes) + `"}}`), wantCode: websocket.CloseMessageTooBig},
		"long reason text": {frame: []byte(`{"v":1,"type":"` + strings.Repeat("é", 200) + `","payload":{}}`), wantCode: websocket.CloseUnsupportedData, wantText: "unknown message type"},
	}
	f := newFixture(t, testConfig, edgeObjects()...)
	bystander := f.connect("edge-b", &edgeproto.Hello{Node: "edge-b", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	bystander.untilSynced()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: upToDate()})
			c.untilSynced()
			if err := c.conn.WriteMessage(websocket.TextMessage, tc.frame); err != nil {
				t.Fatal(err)
			}
			ce := c.closed()
			if ce.Code != tc.wantCode || !strings.Contains(ce.Text, tc.wantText) || len(ce.Text) > maxCloseReason {
				t.Errorf("closed with %d %q, want %d with %q in at most %d bytes", ce.Code, ce.Text, tc.wantCode, tc.wantText, maxCloseReason)
			}
		})
	}
	// The other connection goes on: it still gets changes.
	updateJob(t, f, "fl-b", "51", func(j *sednav1.FederatedLearningJob) { j.Labels = map[string]string{"edit": "1"} })
	for {
		m := bystander.must(5 * time.Second)
		if got := summary(m); strings.HasPrefix(got, "upsert FederatedLearningJob default/fl-b@51") {
			break
		}
	}
}

// workers are worker pods of edgeObjects' jobs: w-fl of fl-a and w-ji of
// ji-a on edge-a, w-fl-b of fl-b on edge-b; and w-forged on edge-a, with
// fl-a's label but no controller.
func workers() []runtime.Object {
	return []runtime.Object{edgehubtest.WorkerPod("w-fl", "uid-fl-a", "edge-a"), edgehubtest.WorkerPod("w-ji", "uid-ji-a", "edge-a"), edgehubtest.WorkerPod("w-fl-b", "uid-fl-b", "edge-b"),
		edgehubtest.ForgedPod("w-forged", "uid-fl-a", "edge-a")}
}

func TestReportsAreAuthorizedAppliedAndAcked(t *testing.T) {
	f := newFixture(t, testConfig, append(edgeObjects(), workers()...)...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: f.inventory("edge-a")})
	c.untilSynced()

	report := workerReport
	datasetReport := func(id uint64, name string) *edgeproto.Report {
		body := fmt.Sprintf(`{"namespace":"default","name":%q,"numberOfSamples":12,"countedAt":"2026-11-21T10:00:00Z"}`, name)
		return &edgeproto.Report{ID: id, Kind: edgeproto.ReportDataset, Worker: edgeproto.LocalControllerWorker, Body: []byte(body), ReceivedAt: time.Now()}
	}
	const (
		flA = `{"name":"w-fl","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
		flB = `{"name":"w-fl-b","namespace":"default","ownerName":"fl-b","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
		jiA = `{"name":"w-ji","namespace":"default","ownerName":"ji-a","ownerKind":"jointinferenceservice","kind":"inference","ownerInfo":{"inferenceNumber":3}}`
		// The names of pods that are not the job's on this node.
		notAPod      = `{"name":"nobody","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
		anotherNodes = `{"name":"w-fl-b","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
		anotherJobs  = `{"name":"w-ji","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
		forged       = `{"name":"w-forged","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
		ilX          = `{"name":"w","namespace":"default","ownerName":"il-x","ownerKind":"incrementallearningjob","kind":"train","status":"running"}`
	)
	tests := []struct {
		name        string
		report      *edgeproto.Report
		want        string
		wantApplied []recordedReport
	}{
		{name: "a report about the node's own job is applied", report: report(1, flA),
			want: "reportAck [1]", wantApplied: []recordedReport{{"edge-a", testStore, 1, "FederatedLearningJob"}}},
		{name: "a report about a job without a worker on the node is refused", report: report(2, flB),
			want: "reportAck [2] refused 2: node edge-a has no worker in FederatedLearningJob default/fl-b"},
		{name: "an invalid body is refused, not closed", report: report(3, `{"name":"w"}`),
			want: "reportAck [3] refused 3: invalid worker report: namespace is required\nownerName is required\nownerKind is required\nkind is required\nstatus is required (only inference reports may omit it)"},
		{name: "a report about an object that does not exist is refused", report: report(4, ilX),
			want: "reportAck [4] refused 4: node edge-a has no worker in IncrementalLearningJob default/il-x"},
		{name: "another kind goes to its applier", report: report(5, jiA),
			want: "reportAck [5]", wantApplied: []recordedReport{{"edge-a", testStore, 5, "JointInferenceService"}}},
		{name: "a count of a dataset on the node goes to the dataset applier", report: datasetReport(6, "data-a"),
			want: "reportAck [6]", wantApplied: []recordedReport{{"edge-a", testStore, 6, "Dataset"}}},
		{name: "a count of a dataset not on the node is refused", report: datasetReport(7, "data-x"),
			want: "reportAck [7] refused 7: dataset default/data-x is not on node edge-a"},
		{name: "a report of an unknown kind is refused", report: &edgeproto.Report{ID: 8, Kind: "model", Worker: "w", Body: []byte(`{}`), ReceivedAt: time.Now()},
			want: `reportAck [8] refused 8: unknown report kind "model"`},
		{name: "a worker that is no pod is refused", report: report(9, notAPod),
			want: "reportAck [9] refused 9: worker nobody is not a pod of default/fl-a"},
		{name: "another node's worker is refused", report: report(10, anotherNodes),
			want: "reportAck [10] refused 10: pod default/w-fl-b is not a worker of fl-a"},
		{name: "another job's worker on the node is refused", report: report(11, anotherJobs),
			want: "reportAck [11] refused 11: pod default/w-ji is not a worker of fl-a"},
		{name: "a pod with the job's label but not its controller is refused", report: report(12, forged),
			want: "reportAck [12] refused 12: pod default/w-forged is not a worker of fl-a"},
		{name: "a report of one worker whose body names another is refused", report: &edgeproto.Report{ID: 13, Worker: "someone-else", Body: []byte(flA), ReceivedAt: time.Now()},
			want: "reportAck [13] refused 13: the report is of worker someone-else, its body names w-fl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.reports())
			c.send(tc.report)
			if got := summary(c.must(5 * time.Second)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantApplied, f.reports()[before:], cmp.AllowUnexported(recordedReport{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("applier calls (-want,+got):\n%s", diff)
			}
		})
	}

	if applied, refused := f.metric("reports_applied_total"), f.metric("reports_refused_total"); applied != 3 || refused != 10 {
		t.Errorf("reports applied %v, refused %v; want 3 and 10", applied, refused)
	}

	// The Lease shows the link and the last report acknowledged.
	testwait.Eventually(t, 5*time.Second, "edge-a's Lease to say connected, report 13 of the test store, nothing unacknowledged", func(context.Context) (bool, error) {
		lease, err := f.kube.CoordinationV1().Leases(hubNS).Get(t.Context(), "nereid-edge-edge-a", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got := []string{lease.Labels[links.LabelEdgeNode], *lease.Spec.HolderIdentity, lease.Annotations[links.AnnotationLink],
			lease.Annotations[links.AnnotationLastReportID], lease.Annotations[links.AnnotationReportStore], lease.Annotations[links.AnnotationUnackedObjects]}
		want := []string{"edge-a", "edge-a", "connected", "13", testStore, "0"}
		return slices.Equal(got, want) && lease.Spec.RenewTime != nil, nil
	})
	leases, err := f.kube.CoordinationV1().Leases(hubNS).List(t.Context(), metav1.ListOptions{LabelSelector: links.LabelEdgeNode})
	if err != nil || len(leases.Items) != 1 {
		t.Errorf("leases labelled %s: %v (%v), want edge-a's", links.LabelEdgeNode, leases, err)
	}
	c.conn.Close()
	testwait.Eventually(t, 5*time.Second, "edge-a's Lease to say it is disconnected", func(context.Context) (bool, error) {
		lease, err := f.kube.CoordinationV1().Leases(hubNS).Get(t.Context(), "nereid-edge-edge-a", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return lease.Annotations[links.AnnotationLink] == links.LinkDisconnected, nil
	})
}

func TestNewStoreReportsApplyAndTheLeaseNamesTheirStore(t *testing.T) {
	f := newFixture(t, testConfig, append(edgeObjects(), workers()...)...)
	leaseSays := func(wantID, wantStore string) {
		t.Helper()
		testwait.Eventually(t, 5*time.Second, "edge-a's Lease to name the last report and its store", func(context.Context) (bool, error) {
			lease, err := f.kube.CoordinationV1().Leases(hubNS).Get(t.Context(), links.LeaseName("edge-a"), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			got := []string{lease.Annotations[links.AnnotationLastReportID], lease.Annotations[links.AnnotationReportStore]}
			want := []string{wantID, wantStore}
			return slices.Equal(got, want), nil
		})
	}

	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	for _, id := range []uint64{1, 2, 3} {
		c.send(runningReport(id))
		c.must(5 * time.Second)
	}
	leaseSays("3", testStore)

	// The node's store is wiped: a new identity, IDs from 1 again.
	c = f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: secondStore, StoreKey: secondStoreKey, LastReportID: 0, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	leaseSays("0", secondStore)
	c.send(runningReport(1))
	if got := summary(c.must(5 * time.Second)); got != "reportAck [1]" {
		t.Errorf("got %q, want the new store's report 1 acknowledged", got)
	}
	leaseSays("1", secondStore)
	want := []recordedReport{{"edge-a", testStore, 1, "FederatedLearningJob"}, {"edge-a", testStore, 2, "FederatedLearningJob"},
		{"edge-a", testStore, 3, "FederatedLearningJob"}, {"edge-a", secondStore, 1, "FederatedLearningJob"}}
	if diff := cmp.Diff(want, f.reports(), cmp.AllowUnexported(recordedReport{})); diff != "" {
		t.Errorf("applier calls (-want,+got):\n%s", diff)
	}
}

// A report ID no store could have given yet (more than one past the
// Hello's last ID for each report since) is refused for good, so it never
// records the store's later IDs as applied: the reports after it apply.
func TestAReportIDThatCannotBeRealIsRefusedAndTheNextOnesApply(t *testing.T) {
	f := newFixture(t, testConfig, append(edgeObjects(), workers()...)...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: 5, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	c.send(runningReport(6)) // taken after the Hello: the connection's first
	if got := summary(c.must(5 * time.Second)); got != "reportAck [6]" {
		t.Fatalf("got %q, want report 6 acknowledged", got)
	}
	c.send(runningReport(math.MaxInt64))
	ack, ok := c.must(5 * time.Second).(*edgeproto.ReportAck)
	if !ok || len(ack.Refused) != 1 || !strings.Contains(ack.Refused[0].Reason, "cannot be real") {
		t.Fatalf("got %+v, want report %d refused as one that cannot be real", ack, int64(math.MaxInt64))
	}
	c.send(runningReport(7)) // the connection's third: up to 8 may be real
	if got := summary(c.must(5 * time.Second)); got != "reportAck [7]" {
		t.Errorf("got %q, want report 7 acknowledged", got)
	}
	want := []recordedReport{{"edge-a", testStore, 6, "FederatedLearningJob"}, {"edge-a", testStore, 7, "FederatedLearningJob"}}
	if diff := cmp.Diff(want, f.reports(), cmp.AllowUnexported(recordedReport{})); diff != "" {
		t.Errorf("applier calls (-want,+got):\n%s", diff)
	}
}

// A Hello may not claim report IDs further past what the cloud recorded
// of its store than an outbox holds (twice): its reports could take IDs
// the store has not given, and the store's real reports of those IDs would
// be acknowledged without effect. The cloud's record is this hub's, or,
// after a restart, the node's Lease. The real store's Hello goes on
// connecting, and its reports apply.
func TestAHelloClaimingReportIDsFarPastTheCloudsRecordIsRefused(t *testing.T) {
	cfg := testConfig
	cfg.MaxOutboxReports = 10
	hello := func(f *fixture, last uint64) *edgeproto.Hello {
		return &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: last, Inventory: f.inventory("edge-a")}
	}
	refused := func(c *client, last uint64) {
		t.Helper()
		if ce := c.closed(); ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, fmt.Sprintf("lastReportID %d is past", last)) {
			t.Errorf("closed with %d %q, want a policy violation saying report ID %d cannot be real", ce.Code, ce.Text, last)
		}
	}

	f := newFixture(t, cfg, append(edgeObjects(), workers()...)...)
	c := f.connect("edge-a", hello(f, 5)) // no record of the store yet: any claim
	c.untilSynced()
	c.send(runningReport(6))
	if got := summary(c.must(5 * time.Second)); got != "reportAck [6]" {
		t.Fatalf("got %q, want report 6 acknowledged", got)
	}
	refused(f.connect("edge-a", hello(f, math.MaxInt64-1)), math.MaxInt64-1)
	refused(f.connect("edge-a", hello(f, 6+21)), 6+21)
	c = f.connect("edge-a", hello(f, 6+20)) // the store's outbox could hold them
	c.untilSynced()
	c.send(runningReport(7))
	if got := summary(c.must(5 * time.Second)); got != "reportAck [7]" {
		t.Fatalf("got %q, want report 7 acknowledged", got)
	}

	// After a restart the hub reads the record from the node's Lease.
	holder := "edge-a"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: links.LeaseName("edge-a"), Namespace: hubNS,
		Labels:      map[string]string{links.LabelEdgeNode: "edge-a"},
		Annotations: map[string]string{links.AnnotationReportStore: testStore, links.AnnotationLastReportID: "100"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	f = newFixture(t, cfg, append(append(edgeObjects(), workers()...), lease)...)
	refused(f.connect("edge-a", hello(f, 121)), 121)
	c = f.connect("edge-a", hello(f, 120))
	c.untilSynced()
	c.send(runningReport(101))
	if got := summary(c.must(5 * time.Second)); got != "reportAck [101]" {
		t.Fatalf("got %q, want report 101 acknowledged", got)
	}
	// A store new to the cloud counts from 1: while the cloud has a record
	// of the node's first store, a new store's claim is bounded from 0.
	other := edgeproto.NewStoreKey()
	newStore := func(last uint64) *edgeproto.Hello {
		return &edgeproto.Hello{Node: "edge-a", Store: edgeproto.StoreIdentity(other), StoreKey: other, LastReportID: last, Inventory: f.inventory("edge-a")}
	}
	refused(f.connect("edge-a", newStore(21)), 21)
	c = f.connect("edge-a", newStore(20))
	c.untilSynced()
}

func TestReportThatFailsIsNotAckedAndIsAppliedWhenResent(t *testing.T) {
	f := newFixture(t, testConfig, append(edgeObjects(), workers()...)...)
	fail := true // guarded by f.mu, as applyErr runs under it
	f.mu.Lock()
	f.applyErr = func(*edgeproto.Report) error {
		if fail {
			return errors.New("the API server is away")
		}
		return nil
	}
	f.mu.Unlock()
	body := `{"name":"w-fl","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"completed"}`
	r := &edgeproto.Report{ID: 7, Worker: "w-fl", Body: []byte(body), ReceivedAt: time.Now()}

	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	c.send(r)
	ce := c.closed() // fails on a ReportAck
	if ce.Code != websocket.CloseTryAgainLater {
		t.Errorf("closed with %d %q, want try again later", ce.Code, ce.Text)
	}
	if n := len(f.reports()); n != 1+len(reports.RetryWaits()) {
		t.Errorf("applier called %d times, want %d", n, 1+len(reports.RetryWaits()))
	}

	f.mu.Lock()
	fail = false
	f.mu.Unlock()
	c = f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	c.send(r)
	if got := summary(c.must(5 * time.Second)); got != "reportAck [7]" {
		t.Errorf("got %q, want the resent report acknowledged", got)
	}
}

// TestReportNoRetryMendsIsRefusedAndDoesNotBlockTheNext has the applier fail
// report 1 (about fl-a) and apply reports 2 (about ji-a, another object) and
// 3 (about fl-a again): an error the API server would answer the same way
// every time refuses report 1 for good, and 2 and 3 go through; any other
// error is retried, and then ends the connection, to have 1 and 3 sent
// again, while 2, whose object does not wait for fl-a's, is applied.
func TestReportNoRetryMendsIsRefusedAndDoesNotBlockTheNext(t *testing.T) {
	job := schema.GroupResource{Group: "sedna.io", Resource: "federatedlearningjobs"}
	tests := map[string]struct {
		err         error
		wantRefused bool
	}{
		"422 invalid status": {wantRefused: true, err: apierrors.NewInvalid(schema.GroupKind{Group: "sedna.io", Kind: "FederatedLearningJob"}, "fl-a",
			field.ErrorList{field.TooLong(field.NewPath("status", "edgeNodes").Index(0).Child("worker"), "", 253)})},
		"413 request too large": {wantRefused: true, err: apierrors.NewRequestEntityTooLargeError("limit is 3145728")},
		"400 bad request":       {wantRefused: true, err: fmt.Errorf("updating status: %w", apierrors.NewBadRequest("the object is not valid JSON"))},
		"object too large for etcd, as the API server answers it (500, no reason)": {wantRefused: true,
			err: fmt.Errorf("updating status of federatedlearningjob default/fl-a: %w", &apierrors.StatusError{ErrStatus: metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: "etcdserver: request is too large"}})},
		"object too large for the API server's etcd client, as the API server answers it (500, no reason)": {wantRefused: true,
			err: &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
				Message: "rpc error: code = ResourceExhausted desc = trying to send message larger than max (2101417 vs. 2097152)"}}},
		"500 internal error":           {err: apierrors.NewInternalError(errors.New("etcdserver: leader changed"))},
		"503 unavailable":              {err: apierrors.NewServiceUnavailable("etcd is away")},
		"504 timeout":                  {err: apierrors.NewTimeoutError("request did not complete", 2)},
		"429 throttled":                {err: apierrors.NewTooManyRequests("slow down", 1)},
		"409 conflicts past the retry": {err: apierrors.NewConflict(job, "fl-a", errors.New("the object has been modified"))},
		"not an API error":             {err: errors.New("connection refused")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, testConfig, append(edgeObjects(), workers()...)...)
			f.mu.Lock()
			f.applyErr = func(r *edgeproto.Report) error {
				if r.ID == 1 {
					return tc.err
				}
				return nil
			}
			f.mu.Unlock()
			c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: f.inventory("edge-a")})
			c.untilSynced()
			c.send(workerReport(1, flA))
			c.send(workerReport(2, jiA))
			c.send(workerReport(3, flA))

			// Report 2 is about another object: it is applied whatever
			// becomes of 1. Report 3 is about 1's: it goes after 1.
			var got []string
			var closed *websocket.CloseError
			for closed == nil && len(got) < 3 {
				m, err := c.recv(5 * time.Second)
				if err != nil {
					if !errors.As(err, &closed) {
						t.Fatalf("got %v, want acks or a close frame", err)
					}
					break
				}
				ack, ok := m.(*edgeproto.ReportAck)
				if !ok {
					t.Fatalf("got %s, want acks or a close frame", summary(m))
				}
				for _, id := range ack.IDs {
					got = append(got, fmt.Sprintf("%d %s", id, refusal(ack, id)))
				}
			}
			sort.Strings(got)
			if tc.wantRefused {
				if len(got) != 3 || !strings.HasPrefix(got[0], "1 refused: the API server refuses the status write for good: ") ||
					got[1] != "2 applied" || got[2] != "3 applied" {
					t.Errorf("acknowledged %q, want 1 refused with the reason, 2 and 3 applied", got)
				}
			} else {
				if closed == nil {
					closed = c.closed()
				}
				if closed.Code != websocket.CloseTryAgainLater {
					t.Errorf("closed with %d %q, want try again later", closed.Code, closed.Text)
				}
				if len(got) != 1 || got[0] != "2 applied" {
					t.Errorf("acknowledged %q, want only 2 applied", got)
				}
			}
			calls := map[uint64]int{}
			for _, r := range f.reports() {
				calls[r.id]++
			}
			// A refusal is not retried; when 3 shared 1's write, 1 is
			// tried once more alone, to refuse only it.
			wantCalls := map[uint64]int{1: 1, 2: 1, 3: 1}
			if calls[1] == 2 {
				wantCalls[1] = 2
			}
			if !tc.wantRefused {
				// Report 1 is tried again alone, and 3 waits for the resend.
				wantCalls = map[uint64]int{1: 1 + len(reports.RetryWaits()), 2: 1}
			}
			if diff := cmp.Diff(wantCalls, calls); diff != "" {
				t.Errorf("applier calls by report (-want,+got):\n%s", diff)
			}
		})
	}
}

// refusal says how ack settles id: "applied" or "refused: reason".
func refusal(ack *edgeproto.ReportAck, id uint64) string {
	for _, r := range ack.Refused {
		if r.ID == id {
			return "refused: " + r.Reason
		}
	}
	return "applied"
}

func updateJob(t *testing.T, f *fixture, name, rv string, change func(*sednav1.FederatedLearningJob)) {
	t.Helper()
	jobs := f.sedna.SednaV1alpha1().FederatedLearningJobs(testNS)
	j, err := jobs.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(j)
	j.ResourceVersion = rv // the fake tracker keeps what it is given
	if _, err := jobs.Update(t.Context(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestBurstOfEditsIsSentOnceAtTheLatestVersion(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: upToDate()})
	c.untilSynced()

	// Hold the event handlers (they need the hub's lock to reach the
	// session) while the cache takes two versions.
	f.hub.mu.Lock()
	updateJob(t, f, "fl-a", "42", func(j *sednav1.FederatedLearningJob) { j.Labels = map[string]string{"edit": "1"} })
	updateJob(t, f, "fl-a", "43", func(j *sednav1.FederatedLearningJob) { j.Labels = map[string]string{"edit": "2"} })
	testwait.Eventually(t, 5*time.Second, "the cache to have fl-a at version 43", func(context.Context) (bool, error) {
		j, ok := f.hub.sets.Cached(sednav1.FederatedLearningJobKind.Kind, testNS, "fl-a")
		return ok && j.GetResourceVersion() == "43", nil
	})
	f.hub.mu.Unlock()

	up := c.must(5 * time.Second).(*edgeproto.Upsert)
	if up.ResourceVersion != "43" {
		t.Fatalf("got %s, want only the latest version 43", summary(up))
	}
	c.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{up.ObjectVersion}})
	drainResends(c, "fl-a@43")
	c.quiet(4 * testConfig.ResendAfter)
	if got := f.metric("messages_sent_total", "type", "upsert") - f.metric("resends_total"); got != 1 {
		t.Errorf("sent %v upserts besides resends, want 1", got)
	}
}

// An idle connection holds no writer goroutine: one runs while there is
// something to send (the difference, a heartbeat, a change) and ends once it
// is sent.
func TestAnIdleConnectionHoldsNoWriter(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig
	cfg.clock = clk
	f := newFixture(t, cfg, edgeObjects()...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: upToDate()})
	c.untilSynced()
	f.hub.mu.RLock()
	s := f.hub.sessions["edge-a"]
	f.hub.mu.RUnlock()
	idle := func(context.Context) (bool, error) {
		s.wakeMu.Lock()
		defer s.wakeMu.Unlock()
		return !s.writing, nil
	}
	testwait.Eventually(t, 5*time.Second, "no writer goroutine running", idle)

	beats := f.metric("messages_sent_total", "type", "heartbeat")
	for beat := 1.0; beat <= 2; beat++ {
		clk.Step(cfg.HeartbeatPeriod)
		testwait.Eventually(t, 5*time.Second, fmt.Sprintf("heartbeat %v on an idle connection", beat), func(context.Context) (bool, error) {
			return f.metric("messages_sent_total", "type", "heartbeat") == beats+beat, nil
		})
		testwait.Eventually(t, 5*time.Second, "no writer goroutine running after the heartbeat", idle)
	}

	updateJob(t, f, "fl-a", "42", func(j *sednav1.FederatedLearningJob) { j.Labels = map[string]string{"edit": "1"} })
	up := c.must(5 * time.Second).(*edgeproto.Upsert)
	if up.ResourceVersion != "42" {
		t.Fatalf("got %s, want fl-a at 42", summary(up))
	}
	c.send(&edgeproto.Ack{Objects: []edgeproto.ObjectVersion{up.ObjectVersion}})
	testwait.Eventually(t, 5*time.Second, "the Ack taken and no writer goroutine running", func(context.Context) (bool, error) {
		s.wakeMu.Lock()
		defer s.wakeMu.Unlock()
		return !s.writing && len(s.acks) == 0, nil
	})
	if got := f.metric("messages_sent_total", "type", "upsert") - f.metric("resends_total"); got != 1 {
		t.Errorf("sent %v upserts besides resends, want 1", got)
	}
}

// A session writes nothing before it runs: the connection it replaces may
// still be sending, and the two never both send.
func TestASessionWritesNothingBeforeItRuns(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	// No connection: a writer that started would fail on it.
	s := newSession(t.Context(), f.hub, &auth.Identity{Node: "edge-a"}, nil, &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID}, klog.Background())
	s.markDirty()
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	if s.writing {
		t.Fatal("a writer started before the session runs")
	}
	if !s.woken {
		t.Error("the change is not remembered for when the session runs")
	}
}

func TestShutdownClosesConnectionsAndMarksLinksDisconnected(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: upToDate()})
	c.untilSynced()
	if got := f.metric("connected_nodes"); got != 1 {
		t.Errorf("connected_nodes %v, want 1", got)
	}
	f.stop()
	ce := c.closed()
	if ce.Code != websocket.CloseGoingAway {
		t.Errorf("closed with %d %q, want going away", ce.Code, ce.Text)
	}
	lease, err := f.kube.CoordinationV1().Leases(hubNS).Get(t.Context(), links.LeaseName("edge-a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lease.Annotations[links.AnnotationLink]; got != links.LinkDisconnected {
		t.Errorf("link %q after shutdown, want %q", got, links.LinkDisconnected)
	}
}

func TestObjectOverTheFrameLimitIsReportedOnTheObjectAndTheRestIsSent(t *testing.T) {
	huge := edgehubtest.FederatedJob("fl-huge", "cloud", "edge-a")
	huge.ResourceVersion = "60"
	huge.Spec.AggregationWorker.Template.Annotations = map[string]string{"pad": strings.Repeat("x", edgeproto.MaxObjectFrameBytes)}
	small := edgehubtest.FederatedJob("fl-small", "cloud", "edge-a")
	small.ResourceVersion = "61"
	f := newFixture(t, testConfig, huge, small)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	got := c.untilSynced()
	if !slices.Contains(got, "upsert FederatedLearningJob default/fl-small@61 (sedna.io/v1alpha1 FederatedLearningJob)") {
		t.Errorf("got %v, want fl-small sent", got)
	}
	for _, m := range got {
		if strings.Contains(m, "fl-huge") {
			t.Errorf("got %s", m)
		}
	}
	select {
	case e := <-f.recorder.Events:
		if !strings.Contains(e, "Warning "+ReasonUnsendable) || !strings.Contains(e, "edge node edge-a") {
			t.Errorf("event %q, want a Warning %s naming edge-a", e, ReasonUnsendable)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event on the object that cannot be sent")
	}
	if n := f.metric("objects_unsendable_total"); n != 1 {
		t.Errorf("objects_unsendable_total = %v, want 1", n)
	}
	cond := f.untilEdgeSynced(huge.Name, corev1.ConditionFalse)
	if cond.Reason != ReasonObjectTooLarge || !strings.Contains(cond.Message, "4 MiB") {
		t.Errorf("condition %+v, want %s naming the limit", cond, ReasonObjectTooLarge)
	}
	if other := f.edgeSynced(small.Name); other != nil {
		t.Errorf("fl-small, which was sent, has a condition %+v, want none", other)
	}

	// Cut down to size, the object is sent and its condition says so.
	fixed, err := f.sedna.SednaV1alpha1().FederatedLearningJobs("default").Get(t.Context(), huge.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fixed.Spec.AggregationWorker.Template.Annotations = nil
	fixed.ResourceVersion = "70"
	if _, err := f.sedna.SednaV1alpha1().FederatedLearningJobs("default").Update(t.Context(), fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// fl-small, never acknowledged here, may be resent meanwhile.
	m := summary(c.must(5 * time.Second))
	for strings.HasPrefix(m, "upsert FederatedLearningJob default/fl-small@61") {
		m = summary(c.must(5 * time.Second))
	}
	if !strings.HasPrefix(m, "upsert FederatedLearningJob default/fl-huge@70") {
		t.Errorf("got %s, want fl-huge sent", m)
	}
	if cond := f.untilEdgeSynced(huge.Name, corev1.ConditionTrue); cond.Reason != ReasonSent {
		t.Errorf("condition %+v, want %s", cond, ReasonSent)
	}
}

// edgeSynced is the EdgeSynced condition of the FederatedLearningJob name as
// the API server holds it, or nil.
func (f *fixture) edgeSynced(name string) *sednav1.JobCondition {
	f.t.Helper()
	job, err := f.sedna.SednaV1alpha1().FederatedLearningJobs("default").Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, c := range job.Status.Conditions {
		if c.Type == ConditionEdgeSynced {
			return &c
		}
	}
	return nil
}

// untilEdgeSynced waits until the FederatedLearningJob name has an EdgeSynced
// condition of status st, and returns it.
func (f *fixture) untilEdgeSynced(name string, st corev1.ConditionStatus) sednav1.JobCondition {
	f.t.Helper()
	var c *sednav1.JobCondition
	testwait.Eventually(f.t, 5*time.Second, fmt.Sprintf("%s's EdgeSynced condition of status %s", name, st), func(context.Context) (bool, error) {
		c = f.edgeSynced(name)
		return c != nil && c.Status == st, nil
	})
	return *c
}

func TestOutboxFillFromHeartbeatsShowsOnTheLease(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: upToDate()})
	c.untilSynced()
	c.send(&edgeproto.Heartbeat{Time: time.Now(), Outbox: &edgeproto.OutboxFill{Reports: 8500, Bytes: 4 << 20, MaxReports: 10000, MaxBytes: 64 << 20}})
	testwait.Eventually(t, 5*time.Second, "edge-a's Lease to say its outbox is 85% full", func(context.Context) (bool, error) {
		lease, err := f.kube.CoordinationV1().Leases(hubNS).Get(t.Context(), "nereid-edge-edge-a", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		want := "85% (8500/10000 reports, 4194304/67108864 bytes)"
		return lease.Annotations[links.AnnotationOutbox] == want, nil
	})
}

func TestConnectionWhosePodIsDeletedBeforeItsHelloIsClosed(t *testing.T) {
	pod := edgehubtest.LCPod("edge-a")
	f := newFixture(t, testConfig, append(edgeObjects(), pod)...)
	c := f.open("edge-a") // authenticated, no hello yet
	if err := f.kube.CoreV1().Pods(pod.Namespace).Delete(t.Context(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "the hub to see the deletion of edge-a's Pod", func(context.Context) (bool, error) { return f.hub.auth.PodDeleted("uid-edge-a"), nil })
	c.send(&edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	for {
		_, err := c.recv(5 * time.Second)
		if err == nil {
			continue // what went out before the close
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "was deleted") {
			t.Fatalf("got %v, want a policy-violation close saying the Pod was deleted", err)
		}
		break
	}
	// And its token is no longer taken.
	if conn, _, err := f.dial(edgehubtest.JWT("token-edge-a", nil)); err == nil {
		conn.Close()
		t.Fatal("the deleted Pod's token connected again")
	}
}

func TestTokensNoReviewWouldAcceptCostNoReview(t *testing.T) {
	f := newFixture(t, testConfig)
	tokens := map[string]string{
		"too long":         edgehubtest.JWT("token-edge-a", map[string]any{"pad": strings.Repeat("x", tokenreview.MaxTokenBytes)}),
		"expired":          edgehubtest.JWT("token-edge-a", map[string]any{"exp": time.Now().Add(-time.Minute).Unix()}),
		"another audience": edgehubtest.JWT("token-edge-a", map[string]any{"aud": "https://kubernetes.default.svc"}),
		"not a JWT":        "x.y",
	}
	for name, token := range tokens {
		if conn, resp, err := f.dial(token); err == nil {
			conn.Close()
			t.Errorf("%s: upgraded", name)
		} else if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: got %v, want 401", name, resp)
		}
	}
	for _, a := range f.kube.Actions() {
		if a.Matches("create", "tokenreviews") {
			t.Errorf("a token no review would accept was reviewed")
		}
	}
}

// Bodies of worker reports about fl-a and ji-a, by their workers on edge-a.
const (
	flA = `{"name":"w-fl","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
	jiA = `{"name":"w-ji","namespace":"default","ownerName":"ji-a","ownerKind":"jointinferenceservice","kind":"inference","ownerInfo":{"inferenceNumber":3}}`
)

// holdReportOne connects edge-a, synced, to a hub with cfg whose applier
// holds report 1 until release is called (at the latest when the test
// ends, before the hub stops).
func holdReportOne(t *testing.T, cfg Config) (f *fixture, c *client, release func()) {
	t.Helper()
	f = newFixture(t, cfg, append(edgeObjects(), workers()...)...)
	held := make(chan struct{})
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	f.mu.Lock()
	f.applyErr = func(r *edgeproto.Report) error {
		if r.ID == 1 {
			<-held
		}
		return nil
	}
	f.mu.Unlock()
	c = f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	return f, c, release
}

// ackedAll reads acks until n reports are acknowledged, and wants each
// applied.
func ackedAll(t *testing.T, c *client, n int) {
	t.Helper()
	acked := map[uint64]bool{}
	for len(acked) < n {
		m, ok := c.must(5 * time.Second).(*edgeproto.ReportAck)
		if !ok {
			t.Fatalf("got %T, want acks", m)
		}
		for _, id := range m.IDs {
			if refusal(m, id) != "applied" {
				t.Errorf("report %d: %s", id, refusal(m, id))
			}
			acked[id] = true
		}
	}
}

// TestReportsAboutOneObjectGoTogetherAndOthersDoNotWait holds the applier on
// report 1 (about fl-a) while the node sends four more about fl-a and one
// about ji-a: the ji-a report is applied while fl-a's waits, and fl-a's five
// go to the applier in order, in at most two calls.
func TestReportsAboutOneObjectGoTogetherAndOthersDoNotWait(t *testing.T) {
	f, c, release := holdReportOne(t, testConfig)
	c.send(workerReport(1, flA))
	for id := uint64(2); id <= 5; id++ {
		c.send(workerReport(id, flA))
	}
	c.send(workerReport(6, jiA))
	if got := summary(c.must(5 * time.Second)); got != "reportAck [6]" {
		t.Fatalf("got %q while fl-a's write is held, want ji-a's report acknowledged", got)
	}
	release()
	ackedAll(t, c, 5)
	var order []uint64
	for _, r := range f.reports() {
		if r.kind == "FederatedLearningJob" {
			order = append(order, r.id)
		}
	}
	if !slices.Equal(order, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("fl-a's reports applied in the order %v, want 1 to 5", order)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Report 1's call took what had arrived when it began; the rest
	// arrived while it was held, so they all go in the next call.
	calls := map[int]bool{}
	for id := uint64(1); id <= 5; id++ {
		calls[f.callOf[id]] = true
	}
	if len(calls) > 2 {
		t.Errorf("applier calls by report %v, want fl-a's five reports in at most two calls", f.callOf)
	}
}

// TestReportsWaitingForTheirTurnGoInOneCall gives one lane a turn at a time
// and holds the applier on report 1 (about fl-a): ji-a's lane waits for its
// turn, the gauge says so, and ji-a's five reports, sent meanwhile, then go
// to the applier in one call.
func TestReportsWaitingForTheirTurnGoInOneCall(t *testing.T) {
	cfg := testConfig
	cfg.ReportWrites = 1
	f, c, release := holdReportOne(t, cfg)
	c.send(workerReport(1, flA))
	testwait.Eventually(t, 5*time.Second, "report 1 applied", func(context.Context) (bool, error) { return len(f.reports()) == 1, nil })
	for id := uint64(2); id <= 6; id++ {
		c.send(workerReport(id, jiA))
	}
	testwait.Eventually(t, 5*time.Second, "ji-a's lane waiting for its turn", func(context.Context) (bool, error) {
		return f.metric("report_lanes_waiting") == 1, nil
	})
	// Whatever the connection still carries is read while the lane waits.
	testwait.Eventually(t, 5*time.Second, "ji-a's reports read", func(context.Context) (bool, error) {
		return f.metric("messages_received_total", "type", "report") == 6, nil
	})
	if n := len(f.reports()); n != 1 {
		t.Fatalf("%d reports applied while the only turn was report 1's, want 1", n)
	}
	release()
	ackedAll(t, c, 6)
	if w := f.metric("report_lanes_waiting"); w != 0 {
		t.Errorf("%v lanes waiting once all are acknowledged, want 0", w)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	calls := map[int]bool{}
	for id := uint64(2); id <= 6; id++ {
		calls[f.callOf[id]] = true
	}
	if len(calls) != 1 {
		t.Errorf("applier calls by report %v, want ji-a's five reports in one call", f.callOf)
	}
}

// TestAReportWindowGathersANodesBurst: with a window, a node's reports about
// one object sent one after another go to the applier in one call.
func TestAReportWindowGathersANodesBurst(t *testing.T) {
	clk := newFakeClock() // the window lasts until the test moves it on
	cfg := testConfig
	cfg.ReportWindow = time.Second
	cfg.clock = clk
	f := newFixture(t, cfg, append(edgeObjects(), workers()...)...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	for id := uint64(1); id <= 5; id++ {
		c.send(workerReport(id, flA))
	}
	// The hub reads a connection in order: once it has read the heartbeat,
	// the five reports wait in their lane.
	c.send(&edgeproto.Heartbeat{Time: time.Now()})
	testwait.Eventually(t, 5*time.Second, "the reports and the heartbeat read", func(context.Context) (bool, error) {
		return f.metric("messages_received_total", "type", "heartbeat") == 1, nil
	})
	if n := len(f.reports()); n != 0 {
		t.Fatalf("%d reports applied within the window, want none", n)
	}
	testwait.Eventually(t, 5*time.Second, "the reports applied once the window passed", func(context.Context) (bool, error) {
		clk.Step(cfg.ReportWindow)
		return len(f.reports()) == 5, nil
	})
	acked := 0
	for acked < 5 {
		m, ok := c.must(5 * time.Second).(*edgeproto.ReportAck)
		if !ok {
			t.Fatalf("got %T, want acks", m)
		}
		acked += len(m.IDs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls != 1 {
		t.Errorf("%d applier calls for 5 reports within the window (by report %v), want 1", f.calls, f.callOf)
	}
}

// TestALaneTryingAgainLetsOthersHaveItsTurn gives one lane a turn at a time:
// while report 1 (about fl-a) waits to be tried again, report 2 (about
// ji-a) is applied in the turn fl-a's lane gave back.
func TestALaneTryingAgainLetsOthersHaveItsTurn(t *testing.T) {
	clk := newFakeClock() // the backoff lasts until the test moves it on
	cfg := testConfig
	cfg.ReportWrites = 1
	cfg.clock = clk
	f := newFixture(t, cfg, append(edgeObjects(), workers()...)...)
	failed := make(chan struct{})
	first := true // the applier's alone
	f.mu.Lock()
	f.applyErr = func(r *edgeproto.Report) error {
		if r.ID == 1 && first {
			first = false
			close(failed)
			return errors.New("the API server is restarting")
		}
		return nil
	}
	f.mu.Unlock()
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID, Inventory: f.inventory("edge-a")})
	c.untilSynced()
	c.send(workerReport(1, flA))
	<-failed
	c.send(workerReport(2, jiA))
	if got := summary(c.must(5 * time.Second)); got != "reportAck [2]" {
		t.Fatalf("got %q while fl-a's lane waits to try again, want ji-a's report acknowledged", got)
	}
	tries := func() int {
		n := 0
		for _, r := range f.reports() {
			if r.id == 1 {
				n++
			}
		}
		return n
	}
	if n := tries(); n != 1 {
		t.Fatalf("report 1 tried %d times before its backoff passed, want once", n)
	}
	testwait.Eventually(t, 5*time.Second, "report 1 tried again once its backoff passed", func(context.Context) (bool, error) {
		clk.Step(reports.RetryWaits()[0])
		return tries() == 2, nil
	})
	if got := summary(c.must(5 * time.Second)); got != "reportAck [1]" {
		t.Fatalf("got %q, want report 1 acknowledged once tried again", got)
	}
}

// A client refused before its upgrade may send another request on its
// connection, but the connection does not stay open idle for ever.
func TestARefusedClientsIdleConnectionIsClosed(t *testing.T) {
	defer func(d time.Duration) { httpIdleTimeout = d }(httpIdleTimeout)
	httpIdleTimeout = 300 * time.Millisecond
	f := newFixture(t, testConfig)
	u, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: f.roots, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+u.Path+" HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 400 || resp.Close {
		t.Fatalf("status %d, close %v; want a refusal that keeps the connection", resp.StatusCode, resp.Close)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	var timeout net.Error
	if errors.As(err, &timeout) && timeout.Timeout() {
		t.Error("the idle connection is still open 5s after its answer")
	}
}

// A node that connects in a loop (a stolen token, a broken LocalController)
// is told when to come back: each connection costs a Lease write and its
// hello's difference. Another node is not held up by it.
func TestANodeConnectingTooOftenIsToldWhenToComeBack(t *testing.T) {
	f := newFixture(t, testConfig, edgeObjects()...)
	for range connectBurst {
		conn, resp, err := f.dial(edgehubtest.JWT("token-edge-a", nil))
		if err != nil {
			t.Fatalf("connection within the burst: %v (%v)", err, resp)
		}
		conn.Close()
	}
	_, resp, err := f.dial(edgehubtest.JWT("token-edge-a", nil))
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a connection past the burst: %v, %v; want 429 with Retry-After: 1", err, resp)
	}
	if n := f.metric("connections_refused_total", "reason", auth.RefusedTooOften); n != 1 {
		t.Errorf("refused too_often %v, want 1", n)
	}
	other := f.connect("edge-b", &edgeproto.Hello{Node: "edge-b", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	other.untilSynced()
}

// workerReport is report id of the worker its body names, as the worker
// API takes it.
func workerReport(id uint64, body string) *edgeproto.Report {
	var w struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal([]byte(body), &w)
	return &edgeproto.Report{ID: id, Worker: w.Name, Body: []byte(body), ReceivedAt: time.Now()}
}

// A record of a store near the top of the report IDs (a first Hello of a
// store the cloud had no record of may state any) bounds no claim: the
// bound saturates rather than wraps, which would refuse the store's every
// Hello for good.
func TestARecordNearTheTopOfTheReportIDsDoesNotWrapTheBound(t *testing.T) {
	cfg := testConfig
	cfg.MaxOutboxReports = 10
	holder := "edge-a"
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: links.LeaseName("edge-a"), Namespace: hubNS,
		Labels: map[string]string{links.LabelEdgeNode: "edge-a"},
		Annotations: map[string]string{links.AnnotationReportStore: testStore, links.AnnotationLastReportID: "100",
			links.AnnotationStatedReportID: strconv.FormatUint(math.MaxUint64-1, 10)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	f := newFixture(t, cfg, append(append(edgeObjects(), workers()...), lease)...)
	c := f.connect("edge-a", &edgeproto.Hello{Node: "edge-a", Store: testStore, StoreKey: testStoreKey, LastReportID: 1000, Inventory: f.inventory("edge-a")})
	c.untilSynced()
}
