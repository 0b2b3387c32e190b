package cloudlink

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/klog/v2/ktesting"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// testWait bounds every wait of a test; nothing should take near as long.
const testWait = 10 * time.Second

// fakeGM is a GlobalManager edge endpoint the test drives frame by frame: it
// accepts a websocket at ConnectPath when the bearer token is one it knows,
// and hands each connection to the test.
type fakeGM struct {
	srv    *httptest.Server
	caFile string // the server's certificate, which signs itself
	conns  chan *gmConn

	mu     sync.Mutex
	valid  map[string]bool
	tokens []string // the bearer token of every request, refused ones included
	open   []*websocket.Conn
}

func newFakeGM(t *testing.T) *fakeGM {
	t.Helper()
	gm := &fakeGM{conns: make(chan *gmConn, 16), valid: map[string]bool{"token-1": true}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ConnectPath, gm.connect)
	gm.srv = httptest.NewUnstartedServer(mux)
	// The wrong-CA test makes TLS handshakes fail on purpose.
	gm.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	gm.srv.StartTLS()
	t.Cleanup(func() {
		gm.mu.Lock()
		for _, c := range gm.open {
			_ = c.Close()
		}
		gm.mu.Unlock()
		gm.srv.Close()
	})
	gm.caFile = filepath.Join(t.TempDir(), "ca.pem")
	writeCert(t, gm.caFile, gm.srv.Certificate().Raw)
	return gm
}

var upgrader = websocket.Upgrader{}

func (gm *fakeGM) connect(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	gm.mu.Lock()
	gm.tokens = append(gm.tokens, token)
	ok := gm.valid[token]
	gm.mu.Unlock()
	if !ok {
		http.Error(w, "token refused", http.StatusUnauthorized)
		return
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	c.SetReadLimit(2 * edgeproto.MaxFrameBytes) // tests look at what the link sends, even if too large
	gm.mu.Lock()
	gm.open = append(gm.open, c)
	gm.mu.Unlock()
	gm.conns <- &gmConn{c}
}

func (gm *fakeGM) allow(token string) {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	gm.valid[token] = true
}

func (gm *fakeGM) seenTokens() []string {
	gm.mu.Lock()
	defer gm.mu.Unlock()
	return append([]string(nil), gm.tokens...)
}

// accept returns the next connection the link opens.
func (gm *fakeGM) accept(t *testing.T) *gmConn {
	t.Helper()
	select {
	case c := <-gm.conns:
		return c
	case <-time.After(testWait):
		t.Fatalf("the link did not connect within %s", testWait)
		return nil
	}
}

// gmConn is one connection of the fake GM.
type gmConn struct{ c *websocket.Conn }

// recvFrame returns the next frame the link sends, whatever it is.
func (g *gmConn) recvFrame(t *testing.T) edgeproto.Message {
	t.Helper()
	_ = g.c.SetReadDeadline(time.Now().Add(testWait))
	_, frame, err := g.c.ReadMessage()
	if err != nil {
		t.Fatalf("fake GM reading: %v", err)
	}
	m, err := edgeproto.Decode(frame)
	if err != nil {
		t.Fatalf("the link sent a frame Decode refuses: %v", err)
	}
	return m
}

// recv returns the next message the link sends that is not a heartbeat.
func (g *gmConn) recv(t *testing.T) edgeproto.Message {
	t.Helper()
	for {
		if m := g.recvFrame(t); m.Type() != edgeproto.TypeHeartbeat {
			return m
		}
	}
}

func recvAs[M edgeproto.Message](t *testing.T, g *gmConn) M {
	t.Helper()
	m := g.recv(t)
	got, ok := m.(M)
	if !ok {
		var want M
		t.Fatalf("fake GM received a %T %+v, want a %T", m, m, want)
	}
	return got
}

// recvAcks reads Acks until every version of want is acknowledged, calling
// check on each acknowledged version as soon as its Ack arrives.
func (g *gmConn) recvAcks(t *testing.T, check func(edgeproto.ObjectVersion), want ...edgeproto.ObjectVersion) {
	t.Helper()
	missing := map[edgeproto.ObjectVersion]bool{}
	for _, v := range want {
		missing[v] = true
	}
	for len(missing) > 0 {
		ack := recvAs[*edgeproto.Ack](t, g)
		for _, v := range ack.Objects {
			if !missing[v] {
				t.Errorf("unexpected acknowledgement of %s", v)
			}
			delete(missing, v)
			if check != nil {
				check(v)
			}
		}
	}
}

func (g *gmConn) send(t *testing.T, msgs ...edgeproto.Message) {
	t.Helper()
	for _, m := range msgs {
		frame, err := edgeproto.Encode(m)
		if err != nil {
			t.Fatalf("Encode(%+v): %v", m, err)
		}
		g.sendRaw(t, frame)
	}
}

func (g *gmConn) sendRaw(t *testing.T, frame []byte) {
	t.Helper()
	_ = g.c.SetWriteDeadline(time.Now().Add(testWait))
	if err := g.c.WriteMessage(websocket.TextMessage, frame); err != nil {
		t.Fatalf("fake GM writing: %v", err)
	}
}

// closeReason reads until the link closes the connection and returns the
// close error it sent (nil if the connection broke without one), and how many
// heartbeats came before.
func (g *gmConn) closeReason(t *testing.T) (*websocket.CloseError, int) {
	t.Helper()
	heartbeats := 0
	for {
		_ = g.c.SetReadDeadline(time.Now().Add(testWait))
		_, frame, err := g.c.ReadMessage()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				return ce, heartbeats
			}
			t.Logf("connection ended without a close frame: %v", err)
			return nil, heartbeats
		}
		if m, err := edgeproto.Decode(frame); err == nil && m.Type() == edgeproto.TypeHeartbeat {
			heartbeats++
		}
	}
}

func writeCert(t *testing.T, path string, der []byte) {
	t.Helper()
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
}

// otherCA returns a self-signed CA certificate that signed nothing the fake GM
// serves.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "not the GlobalManager's CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// newTestLink returns a link to gm over a fresh store, with short waits;
// mutate changes its configuration. Start it with start.
func newTestLink(t *testing.T, gm *fakeGM, mutate func(*Config)) *Link {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "localcontroller.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, "token-1\n")
	cfg := Config{
		URL:             "wss://" + strings.TrimPrefix(gm.srv.URL, "https://") + ConnectPath,
		CAFile:          gm.caFile,
		TokenFile:       tokenFile,
		Node:            "edge-1",
		HeartbeatPeriod: 200 * time.Millisecond,
		ReadTimeout:     testWait,
		BackoffMin:      10 * time.Millisecond,
		BackoffMax:      100 * time.Millisecond,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	logger, _ := ktesting.NewTestContext(t)
	l, err := New(logger, cfg, st, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// start runs l until the test ends, and checks that Run returns then.
func start(t *testing.T, l *Link) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(testWait):
			t.Errorf("Run did not return within %s of its context's end", testWait)
		}
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// object is a sedna.io object as the GM sends it.
func object(v edgeproto.ObjectVersion) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"kind":%q,"metadata":{"name":%q,"namespace":%q,"resourceVersion":%q},"spec":{}}`,
		v.Kind, v.Name, v.Namespace, v.ResourceVersion))
}

func version(kind, name, rv string) edgeproto.ObjectVersion {
	return edgeproto.ObjectVersion{ObjectRef: edgeproto.ObjectRef{Kind: kind, Namespace: "ns", Name: name}, ResourceVersion: rv}
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// workerReport is a report as the worker API stores it: an edgeproto.Report
// without its ID.
func workerReport(t *testing.T, worker string, n int) (stored []byte, sent edgeproto.Report) {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob","kind":"train","status":"running","n":%d}`, worker, n)
	r := edgeproto.Report{Worker: worker, Body: json.RawMessage(body), ReceivedAt: t0.Add(time.Duration(n) * time.Second)}
	stored, err := edgeproto.OutboxRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	return stored, r
}
