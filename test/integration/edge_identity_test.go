package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/gorilla/websocket"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/test/framework"
)

// dialEdge dials the hub with a bearer token; resp is the handshake's answer.
func dialEdge(t *testing.T, hub *framework.EdgeHub, token string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	return dialEdgeFrom(t, hub, token, nil)
}

// dialEdgeFrom is dialEdge from the local address from (nil: any).
func dialEdgeFrom(t *testing.T, hub *framework.EdgeHub, token string, from net.IP) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	pem, err := os.ReadFile(hub.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	dialer := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, HandshakeTimeout: 10 * time.Second}
	if from != nil {
		dialer.NetDialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: from}}).DialContext
	}
	conn, resp, err := dialer.DialContext(t.Context(), "wss://"+hub.Address+"/edge/v1/connect",
		http.Header{"Authorization": {"Bearer " + token}})
	if err == nil {
		t.Cleanup(func() { conn.Close() })
	}
	return conn, resp, err
}

// TestOnlyTheLocalControllerOfAnEdgeNodeConnects plays the pods that are
// not a node's LocalController but hold a token bound to a pod all the same:
// another ServiceAccount's pod on the edge node, the LocalController's own
// default token (for the API server), a LocalController pod on a cloud node.
// Each is refused before the upgrade, again and again, while the real
// LocalController stays connected and its reports flow.
func TestOnlyTheLocalControllerOfAnEdgeNodeConnects(t *testing.T) {
	t.Parallel()
	ns, hub, lc, worker := reportingWorker(t)
	impostors := map[string]struct {
		token      string
		wantStatus int
		wantReason string
	}{
		"another ServiceAccount's pod on the edge node": {
			token:      framework.PodToken(t, ns, "default", "impostor-on-edge-0", "edge-0", edgehub.DefaultTokenAudience),
			wantStatus: http.StatusForbidden, wantReason: "is not a LocalController",
		},
		"the LocalController's token for the API server": {
			token:      framework.PodToken(t, ns, framework.EdgeServiceAccount, "lc-default-audience", "edge-0", ""),
			wantStatus: http.StatusUnauthorized, wantReason: "the hub takes only tokens with audience",
		},
		"a LocalController pod on a cloud node": {
			token:      framework.PodToken(t, ns, framework.EdgeServiceAccount, "lc-on-cloud", "cloud-0", edgehub.DefaultTokenAudience),
			wantStatus: http.StatusForbidden, wantReason: "is not an edge node",
		},
	}
	connects := func() float64 {
		m, err := framework.ScrapeMetrics(t.Context(), lc.HealthURL)
		if err != nil {
			t.Fatal(err)
		}
		return m.Get("nereid_cloudlink_connects_total")
	}
	before := connects()

	// Each impostor keeps trying, as a pod reconnecting every few seconds
	// would, while the real LocalController's worker keeps reporting.
	deadline := time.Now().Add(5 * time.Second)
	round := 2
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		for name, im := range impostors {
			conn, resp, err := dialEdge(t, hub, im.token)
			if err == nil {
				conn.Close()
				t.Fatalf("%s: the connection was upgraded", name)
			}
			if resp == nil {
				t.Fatalf("%s: %v, want an HTTP refusal", name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != im.wantStatus || !strings.Contains(string(body), im.wantReason) {
				t.Fatalf("%s: got %d %q, want %d with %q", name, resp.StatusCode, body, im.wantStatus, im.wantReason)
			}
		}
		if attempt%2 == 0 {
			if code, msg := postReport(t, lc, ns, worker, round); code != http.StatusOK {
				t.Fatalf("the real worker's report: %d %s", code, msg)
			}
			round++
		}
		// Within the refusals the hub takes from one address in a minute
		// (--edge-max-refusals-per-address, 60).
		time.Sleep(400 * time.Millisecond)
	}
	waitForReports(t, ns, "edge-0", int64(round-1))
	if after := connects(); after != before {
		t.Errorf("the real LocalController connected %v more times while the impostors tried; want it to stay connected", after-before)
	}
	m, err := framework.ScrapeMetrics(t.Context(), "http://"+hub.HealthAddress())
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"not_localcontroller", "wrong_audience", "not_edge_node"} {
		if m.Get(`nereid_edgehub_connections_refused_total{reason="`+reason+`"}`) == 0 {
			t.Errorf("no refusal counted with reason %s", reason)
		}
	}
	if strings.Contains(hub.Log(), impostors["another ServiceAccount's pod on the edge node"].token) {
		t.Errorf("the GlobalManager logged a token")
	}
}

// TestConnectionOfADeletedLocalControllerPodIsClosed deletes the pod a
// connected LocalController's token is bound to: the hub closes the
// connection, and the token no longer connects.
func TestConnectionOfADeletedLocalControllerPodIsClosed(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	pod := framework.EdgeDaemonSetPod(t, ns, "edge-1")
	token := boundToken(t, pod)
	conn, _, err := dialEdge(t, hub, token)
	if err != nil {
		t.Fatalf("dialing with the LocalController's token: %v", err)
	}
	send(t, conn, &edgeproto.Hello{Node: "edge-1", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	zero := int64(0)
	if err := framework.KubeClient(t).CoreV1().Pods(ns).Delete(t.Context(), pod.Name,
		metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		if _, _, err = conn.ReadMessage(); err != nil {
			break
		}
	}
	// The hub hears of the deletion from its pod informer ("was deleted")
	// or, when a token recheck comes first, from the TokenReview of the
	// token bound to the pod, which the deletion invalidated: either closes.
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation ||
		!(strings.Contains(ce.Text, "was deleted") || strings.Contains(ce.Text, "a TokenReview refused the connection's token")) {
		t.Fatalf("got %v, want the hub to close the connection because the pod was deleted", err)
	}
	framework.Eventually(t, 30*time.Second, "the deleted pod's token to be refused", func(context.Context) (bool, error) {
		conn, resp, err := dialEdge(t, hub, token)
		if err == nil {
			conn.Close()
			return false, nil
		}
		return resp != nil && resp.StatusCode == http.StatusUnauthorized, nil
	})
}

// TestTheHubVerifiesALocalControllerTokenItself runs the GlobalManager with
// the chart's permissions against the real API server: once it has read the
// issuer's keys and the LocalController ServiceAccount (not awaited before
// it listens), a LocalController's token is accepted without a TokenReview;
// the token of the same Pod deleted and made again (another UID) is not
// accepted, whoever decides.
func TestTheHubVerifiesALocalControllerTokenItself(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	metric := func(series string) float64 {
		m, err := framework.ScrapeMetrics(t.Context(), "http://"+hub.HealthAddress())
		if err != nil {
			t.Fatal(err)
		}
		return m.Get(series)
	}
	verified := func(by string) float64 { return metric(`nereid_edgehub_tokens_verified_total{by="` + by + `"}`) }
	pod := framework.EdgeDaemonSetPod(t, ns, "edge-0")
	framework.Eventually(t, 30*time.Second, "a LocalController token verified by the hub", func(context.Context) (bool, error) {
		conn, resp, err := dialEdge(t, hub, boundToken(t, pod)) // a new token each time: not the cached outcome
		if err != nil {
			if resp != nil && resp.StatusCode == http.StatusServiceUnavailable {
				return false, nil
			}
			return false, err
		}
		conn.Close()
		return verified("hub") > 0, nil
	})
	// The Pod deleted: the DaemonSet makes another on the node (another
	// name and UID), and the old Pod's token is refused.
	kube := framework.KubeClient(t)
	stale := boundToken(t, pod)
	zero := int64(0)
	if err := kube.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the Pod to be gone", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if again := framework.EdgeDaemonSetPod(t, ns, "edge-0"); again.UID == pod.UID {
		t.Fatal("the DaemonSet's Pod on edge-0 is the deleted one")
	}
	conn, resp, err := dialEdge(t, hub, stale)
	if err == nil {
		conn.Close()
		t.Fatal("the token of a deleted Pod was accepted")
	}
	if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("got %v (%v), want 401", resp, err)
	}

	// A LocalController the hub accepted itself has its token confirmed by
	// a TokenReview soon after, and stays connected.
	hubBefore := verified("hub")
	framework.StartLocalController(t, hub, "edge-1", framework.EdgeIdentity(t, ns, "edge-1"))
	framework.Eventually(t, 30*time.Second, "the hub's own acceptance confirmed by a TokenReview", func(context.Context) (bool, error) {
		return verified("hub") > hubBefore && metric(`nereid_edgehub_tokens_confirmed_total{result="confirmed"}`) >= 1, nil
	})
	if n := metric(`nereid_edgehub_tokens_confirmed_total{result="refused"}`); n != 0 {
		t.Errorf("%v tokens refused by their confirming review, want 0", n)
	}
	if n := metric(`nereid_edgehub_connections_revoked_total{reason="token_review_refused"}`); n != 0 {
		t.Errorf("%v connections closed after their review, want 0", n)
	}
}

// boundToken is a new token with the edge hub's audience bound to pod.
func boundToken(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	token, err := framework.NewBoundToken(t.Context(), framework.KubeClient(t), pod, edgehub.DefaultTokenAudience)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// refused dials the hub with token and fails unless the hub refuses it
// before the upgrade with status and a body that says wantReason.
func refused(t *testing.T, hub *framework.EdgeHub, token string, status int, wantReason string) {
	t.Helper()
	conn, resp, err := dialEdge(t, hub, token)
	if err == nil {
		conn.Close()
		t.Fatalf("the connection was upgraded; want %d saying %q", status, wantReason)
	}
	if resp == nil {
		t.Fatalf("%v, want an HTTP refusal", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || !strings.Contains(string(body), wantReason) {
		t.Fatalf("got %d %q, want %d with %q", resp.StatusCode, body, status, wantReason)
	}
}

// TestOnlyPodsOfTheLocalControllersDaemonSetConnect gives tokens of the
// LocalController's ServiceAccount, with the hub's audience, to Pods on an
// edge node that are not the LocalControllers' DaemonSet's: a bare Pod, and
// a Pod of a ReplicaSet. Each is refused with 403 and a reason naming what
// it is, counted as not_daemonset_pod; the DaemonSet's own Pod on that node
// connects and is sent the node's objects.
func TestOnlyPodsOfTheLocalControllersDaemonSetConnect(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	kube := framework.KubeClient(t)
	lcPod := framework.EdgeDaemonSetPod(t, ns, "edge-0") // and the ServiceAccount

	bare := framework.PodToken(t, ns, framework.EdgeServiceAccount, "bare-on-edge-0", "edge-0", edgehub.DefaultTokenAudience)
	one := int32(1)
	rsLabels := map[string]string{"app": "impostor"}
	rs, err := kube.AppsV1().ReplicaSets(ns).Create(t.Context(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: rsLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: rsLabels}, Spec: corev1.PodSpec{
				NodeName: "edge-0", ServiceAccountName: framework.EdgeServiceAccount,
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: "main", Image: "impostor"}},
			}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var rsPod *corev1.Pod
	framework.Eventually(t, 60*time.Second, "the ReplicaSet's Pod", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=impostor"})
		if err != nil {
			return false, err
		}
		for i := range pods.Items {
			if ref := metav1.GetControllerOf(&pods.Items[i]); ref != nil && ref.UID == rs.UID {
				rsPod = &pods.Items[i]
			}
		}
		return rsPod != nil, nil
	})

	for name, tc := range map[string]struct {
		token      string
		wantReason string
	}{
		"a bare Pod":         {token: bare, wantReason: "it has no controller (a bare Pod)"},
		"a ReplicaSet's Pod": {token: boundToken(t, rsPod), wantReason: "its controller is ReplicaSet impostor"},
	} {
		t.Run(name, func(t *testing.T) {
			refused(t, hub, tc.token, http.StatusForbidden, tc.wantReason)
		})
	}
	m, err := framework.ScrapeMetrics(t.Context(), "http://"+hub.HealthAddress())
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Get(`nereid_edgehub_connections_refused_total{reason="not_daemonset_pod"}`); n != 2 {
		t.Errorf("%v refusals counted as not_daemonset_pod, want 2", n)
	}

	conn, resp, err := dialEdge(t, hub, boundToken(t, lcPod))
	if err != nil {
		t.Fatalf("the DaemonSet's Pod was refused: %v (%v)", err, resp)
	}
	send(t, conn, &edgeproto.Hello{Node: "edge-0", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	msgs, closed := readUntilClosed(conn, 5*time.Second)
	if closed || !slices.ContainsFunc(msgs, func(m edgeproto.Message) bool { _, ok := m.(*edgeproto.Synced); return ok }) {
		t.Fatalf("the DaemonSet's Pod got %v (closed: %v), want its node's objects and Synced", msgs, closed)
	}
}

// apiTokenReviews is how many TokenReviews the API server has served, from
// its own metrics.
func apiTokenReviews(t *testing.T) float64 {
	t.Helper()
	raw, err := framework.KubeClient(t).Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	var n float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="tokenreviews"`) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			n += v
		}
	}
	return n
}

// junkToken is a token shaped like a LocalController's, claims and all,
// that the API server never signed: made-up key ID and random signature
// bytes when key is nil, else signed by key with alg under the key ID kid.
func junkToken(t *testing.T, claims []byte, kid string, alg jose.SignatureAlgorithm, key any) string {
	t.Helper()
	if key == nil {
		header, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": kid, "typ": "JWT"})
		sig := make([]byte, 256)
		_, _ = rand.Read(sig)
		enc := base64.RawURLEncoding.EncodeToString
		return enc(header) + "." + enc(claims) + "." + enc(sig)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(claims)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// TestJunkTokensCostNoTokenReview sends the hub tokens the API server never
// signed, with a real LocalController token's claims (the hub's audience, a
// DaemonSet Pod on an edge node): a JWT with a made-up key ID and random
// signature bytes, and one signed by another key under the API server's
// own key ID. The hub refuses each itself, once it holds the issuer's keys:
// the API server serves no TokenReview meanwhile. Past 60 refusals in a
// minute the address is told to come back (429) unless its token is one the
// hub verifies itself, while the real token connects from another address.
//
// Not parallel: it counts the API server's TokenReviews, which every
// GlobalManager beside it would send.
func TestJunkTokensCostNoTokenReview(t *testing.T) {
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	metrics := func() framework.Metrics {
		m, err := framework.ScrapeMetrics(t.Context(), "http://"+hub.HealthAddress())
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	framework.Eventually(t, 30*time.Second, "the hub to hold the issuer's keys", func(context.Context) (bool, error) {
		return metrics().Get("nereid_edgehub_token_issuer_keys") > 0, nil
	})
	real := boundToken(t, framework.EdgeDaemonSetPod(t, ns, "edge-0"))
	parts := strings.Split(real, ".")
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		KeyID     string                  `json:"kid"`
		Algorithm jose.SignatureAlgorithm `json:"alg"`
	}
	if err := json.Unmarshal(header, &h); err != nil || h.KeyID == "" {
		t.Fatalf("the API server's token header %s: %v", header, err)
	}
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	// Another key of the same kind as the API server's.
	var stranger any
	switch h.Algorithm {
	case jose.RS256:
		stranger, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		stranger, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		t.Fatalf("the API server signs with %s", h.Algorithm)
	}
	if err != nil {
		t.Fatal(err)
	}

	reviewsBefore := apiTokenReviews(t)
	// The address's refusals refill at limit a minute (one a second): the
	// first limit junk tokens are each refused for what they are, and the
	// address is told to come back once its refusals, less what refilled
	// while they were sent, pass limit. So the 401s number at least limit
	// and at most limit plus the seconds they took (and one for the second
	// under way); past that a 401 is a limiter that does not hold.
	const limit = 60 // --edge-max-refusals-per-address
	start, refused := time.Now(), 0
	var tooMany *http.Response
	for i := 0; tooMany == nil; i++ {
		if bound := limit + int(time.Since(start).Seconds()) + 1; i > bound {
			t.Fatalf("%d junk tokens were refused one by one in %v, want a 429 after at most %d", refused, time.Since(start), bound)
		}
		token, want := junkToken(t, claims, fmt.Sprintf("made-up-%d", i), "", nil), "signed with a key the API server does not publish"
		if i%2 == 1 {
			token, want = junkToken(t, claims, h.KeyID, h.Algorithm, stranger), "its signature does not verify"
		}
		conn, resp, err := dialEdge(t, hub, token)
		if err == nil {
			conn.Close()
			t.Fatal("junk was upgraded")
		}
		if resp == nil {
			t.Fatalf("junk: %v, want an HTTP refusal", err)
		}
		if resp.StatusCode == http.StatusTooManyRequests && i >= limit {
			tooMany = resp
			break
		}
		if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), want) {
			t.Fatalf("junk %d: got %d %q, want 401 saying %q", i, resp.StatusCode, body, want)
		}
		refused++
	}
	if n := apiTokenReviews(t) - reviewsBefore; n != 0 {
		t.Errorf("the API server served %v TokenReviews while the hub was sent junk, want none", n)
	}
	if tooMany.Header.Get("Retry-After") == "" {
		t.Errorf("junk past %d refusals: 429 without Retry-After", refused)
	}
	m := metrics()
	if n := m.Get(`nereid_edgehub_connections_refused_total{reason="invalid_token"}`); n != float64(refused) {
		t.Errorf("%v refused as invalid_token, want %d", n, refused)
	}
	if n := m.Get(`nereid_edgehub_connections_refused_total{reason="too_many_refusals"}`); n != 1 {
		t.Errorf("%v refused as too_many_refusals, want 1", n)
	}
	// Another address is not held up by it.
	conn, resp, err := dialEdgeFrom(t, hub, real, net.IPv4(127, 0, 0, 2))
	if err != nil {
		t.Fatalf("the real token from another address: %v (%v)", err, resp)
	}
	conn.Close()
}

// TestGlobalManagerThatCannotListenReleasesTheLeaseAndExits starts a leader
// whose edge hub port is taken: it must not sit on the lease. It exits
// non-zero with the reason, releasing the lease, and a standby leads at once
// rather than after the lease would have run out.
func TestGlobalManagerThatCannotListenReleasesTheLeaseAndExits(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	election := []string{"--leader-elect=true", "--leader-elect-namespace=" + ns,
		"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=40s", "--leader-elect-retry-period=500ms",
		"--edge-namespace=" + ns, "--edge-service-accounts=" + ns + "/" + framework.EdgeServiceAccount,
		"--edge-daemonset=" + ns + "/" + framework.EdgeDaemonSet}
	a := framework.StartGlobalManager(t, ns, append(election, "--edge-address="+taken.Addr().String())...)
	code, exited := a.Wait(60 * time.Second)
	if !exited {
		t.Fatalf("the GlobalManager whose hub cannot listen still runs")
	}
	if code == 0 || !strings.Contains(a.Log(), "edge hub listening") {
		t.Fatalf("exit code %d; want non-zero with the reason in the log", code)
	}
	lease, err := framework.KubeClient(t).CoordinationV1().Leases(ns).Get(t.Context(), "nereid-globalmanager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("the failed GlobalManager left the lease held by %q", *h)
	}

	start := time.Now()
	b := framework.StartGlobalManager(t, ns, append(election, "--edge-address=127.0.0.1:"+strconv.Itoa(framework.FreePort(t)))...)
	framework.Eventually(t, 30*time.Second, "the standby to lead and be ready", func(context.Context) (bool, error) {
		addr := b.HealthAddress()
		if addr == "" {
			return false, nil
		}
		code, body, err := get(addr, "/readyz")
		return err == nil && code == http.StatusOK && body == "ok\n", nil
	})
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the standby took %s to lead", took)
	}
}

// TestOnlyTheObjectsPodsOnTheNodeReport posts, to edge-0's LocalController,
// reports under names that are not the job's pods on edge-0: a name that is
// no pod, the job's training worker on edge-1, its aggregator (on cloud-0)
// saying it failed, and the reserved name in another case. Each is refused
// before it is buffered; then a LocalController of edge-1 that forwards a
// report under edge-0's worker is refused by the hub. Nothing reaches status.
func TestOnlyTheObjectsPodsOnTheNodeReport(t *testing.T) {
	t.Parallel()
	ns, hub, lc, _ := reportingWorker(t)
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(t.Context(), flJob, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	var aggregator string
	for name, p := range pods {
		if p.Labels[common.LabelWorkerRole] == "aggregation" {
			aggregator = name
		}
	}
	onEdge1 := trainingWorkerOn(t, ns, job, "edge-1")
	onEdge0 := trainingWorkerOn(t, ns, job, "edge-0")
	report := func(name, status string) []byte {
		body, _ := json.Marshal(map[string]any{
			"name": name, "namespace": ns, "ownerName": flJob, "ownerKind": "federatedlearningjob",
			"kind": "train", "status": status, "ownerInfo": map[string]any{"currentRound": 99},
		})
		return body
	}
	cases := map[string]struct {
		worker   string
		status   string
		wantCode []int
	}{
		// From the node's own address, which is no worker's: the
		// connection is closed at once, or the report refused.
		"a name that is no pod": {worker: flJob + "-training-7-nothing", status: "running", wantCode: []int{0, http.StatusForbidden}},
		// From their own addresses, which edge-0 was not sent.
		"another node's worker of the job": {worker: onEdge1, status: "running", wantCode: []int{0, http.StatusForbidden}},
		"the aggregator saying it failed":  {worker: aggregator, status: "failed", wantCode: []int{0, http.StatusForbidden}},
		// Answered (or closed) before the worker's address is looked at.
		"the reserved name in another case":      {worker: "Nereid-LocalController", status: "completed", wantCode: []int{0, http.StatusBadRequest}},
		"the reserved name in upper case, again": {worker: strings.ToUpper(edgeproto.LocalControllerWorker), status: "completed", wantCode: []int{0, http.StatusBadRequest}},
	}
	for name, tc := range cases {
		code, msg := framework.PostAsWorker(t, lc, ns, tc.worker, report(tc.worker, tc.status))
		if !slices.Contains(tc.wantCode, code) {
			t.Errorf("%s: the LocalController answered %d %s, want one of %v", name, code, msg, tc.wantCode)
		}
	}

	// A LocalController of edge-1 forwarding edge-0's worker.
	conn, err := rawEdgeConn(t, hub, framework.EdgeIdentity(t, ns, "edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	send(t, conn, &edgeproto.Hello{Node: "edge-1", Store: testStore, StoreKey: testStoreKey, LastReportID: testLastReportID})
	send(t, conn, &edgeproto.Report{ID: 1, Worker: onEdge0, Body: report(onEdge0, "completed"), ReceivedAt: time.Now()})
	if ack := readReportAck(t, conn); len(ack.Refused) != 1 || !strings.Contains(ack.Refused[0].Reason, "not on node edge-1") {
		t.Fatalf("got %+v, want report 1 refused because the pod runs on edge-0", ack)
	}

	// Nothing of the above reached status: edge-0 counts its one real
	// report, edge-1 none.
	got, err := edgeNode(t.Context(), t, ns, "edge-0")
	if err != nil || got.ReportsApplied != 1 {
		t.Errorf("edge-0 in status: %+v (%v), want exactly the one real report", got, err)
	}
	if got, err := edgeNode(t.Context(), t, ns, "edge-1"); err != nil || got.ReportsApplied != 0 {
		t.Errorf("edge-1 in status: %+v (%v), want nothing", got, err)
	}
}
