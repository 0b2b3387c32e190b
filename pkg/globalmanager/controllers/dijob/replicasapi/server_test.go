package replicasapi

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/nereid-ml/nereid/internal/serving"
	"github.com/nereid-ml/nereid/internal/testwait"
)

// serve runs f's server on a loopback listener until the test ends, and
// returns its address and what Serve returned, once it has.
func serve(t *testing.T, f *fixture, tlsConfig *tls.Config) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, f, ln, tlsConfig)
}

// serveOn is serve on ln.
func serveOn(t *testing.T, f *fixture, ln net.Listener, tlsConfig *tls.Config) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served, done := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(done)
		served <- f.server.Serve(ctx, ln, tlsConfig)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return ln.Addr().String(), cancel, served
}

// selfSigned is a serving certificate for 127.0.0.1 and the pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "diserver"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func TestServeOverTLSUntilTheContextEnds(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob), newPod(newJob(testJob), "learner", 0, 0, "10.0.0.1"))
	cert, pool := selfSigned(t)
	addr, cancel, served := serve(t, f, &tls.Config{Certificates: []tls.Certificate{cert}})

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+replicasPath(testJob), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil {
		t.Fatalf("GET over TLS: %d (TLS %v), want 200 over TLS", resp.StatusCode, resp.TLS != nil)
	}
	// TLS below 1.2 is refused whatever the config given.
	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get("https://" + addr + replicasPath(testJob)); err == nil {
		resp.Body.Close()
		t.Error("a TLS 1.1 client was served")
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after its context ended: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Error("the server still accepts connections after shutting down")
	}
}

// noticingAuthenticator tells, on entered, each request that reaches the
// handler (authentication is its first step), then authenticates as next.
type noticingAuthenticator struct {
	next    Authenticator
	entered chan<- struct{}
}

func (a *noticingAuthenticator) Authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	a.entered <- struct{}{}
	return a.next.Authenticate(ctx, token)
}

// waitUntilRefused waits until addr refuses connections: the server has
// closed its listener, the first thing a shutdown does.
func waitUntilRefused(t *testing.T, addr string) {
	t.Helper()
	testwait.Eventually(t, 5*time.Second, addr+" to refuse connections", func(context.Context) (bool, error) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true, nil
		}
		conn.Close()
		return false, nil
	})
}

func TestServeFinishesRequestsInFlightWhenTheContextEnds(t *testing.T) {
	f := newFixture(t, Config{}, newJob(testJob))
	entered := make(chan struct{}, 1)
	f.server.authn = &noticingAuthenticator{next: f.server.authn, entered: entered}
	addr, cancel, served := serve(t, f, nil)
	// The request reaches the handler, which waits for its body; the
	// context ends and the server shuts down meanwhile; the body comes;
	// the answer still goes out.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"replicas": 1}`
	head := "POST " + replicasPath(testJob) + " HTTP/1.1\r\nHost: diserver\r\nAuthorization: Bearer admin\r\nContent-Length: 15\r\n\r\n"
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach the handler")
	}
	cancel()
	waitUntilRefused(t, addr)
	if _, err := conn.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer of a request in flight at shutdown: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a request in flight at shutdown: %d, want 200", resp.StatusCode)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if got := f.job(testJob).Spec.Tasks[1].Replicas; got != 4 {
		t.Errorf("collector replicas = %d, want 4", got)
	}
}

func TestServeCutsOffSlowClients(t *testing.T) {
	cases := map[string]struct {
		send string // then nothing more
	}{
		"headers that never end": {
			send: "GET " + replicasPath(testJob) + " HTTP/1.1\r\nHost: diserver\r\nAuthorization: Bearer admin\r\n",
		},
		"a body that never comes": {
			send: "POST " + replicasPath(testJob) + " HTTP/1.1\r\nHost: diserver\r\nAuthorization: Bearer admin\r\nContent-Length: 100\r\n\r\n{\"repl",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, Config{Limits: serving.Limits{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 400 * time.Millisecond}}, newJob(testJob))
			addr, _, _ := serve(t, f, nil)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte(tc.send)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			r := bufio.NewReader(conn)
			var got strings.Builder
			for {
				line, err := r.ReadString('\n')
				got.WriteString(line)
				if err == nil {
					continue
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the server kept a stalled connection open for %s (read %q)", time.Since(start), got.String())
				}
				break
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("the server cut off a stalled client after %s", took)
			}
			if s := got.String(); s != "" && !strings.HasPrefix(s, "HTTP/1.1 4") {
				t.Errorf("a stalled client was answered %q", s)
			}
			if got := f.job(testJob).Spec.Tasks[1].Replicas; got != 3 {
				t.Errorf("collector replicas = %d after a stalled request, want 3", got)
			}
		})
	}
}

// TestServeBoundsTheConnectionsOpenAtOnce holds the one connection allowed
// idle: a second one is accepted, and served, only once the idle one is cut
// off. The listener under the server counts what it has accepted and what is
// still open: a connection's own close comes before its slot is given back,
// so the most ever open at once is what the bound let in.
func TestServeBoundsTheConnectionsOpenAtOnce(t *testing.T) {
	const cutOff = 500 * time.Millisecond
	f := newFixture(t, Config{Limits: serving.Limits{MaxConnections: 1, ReadHeaderTimeout: cutOff, IdleTimeout: cutOff}}, newJob(testJob))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	counted := &countingListener{Listener: ln}
	addr, _, _ := serveOn(t, f, counted, nil)
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	testwait.Eventually(t, 5*time.Second, "the idle connection to be accepted", func(context.Context) (bool, error) {
		accepted, _, _ := counted.counts()
		return accepted == 1, nil
	})

	client := &http.Client{Timeout: 10 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+replicasPath(testJob), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET while another connection holds the one slot: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET once the idle connection was cut off: %d", resp.StatusCode)
	}
	accepted, _, most := counted.counts()
	if accepted != 2 || most != 1 {
		t.Errorf("accepted %d connections, at most %d open at once; want 2, never more than the 1 allowed", accepted, most)
	}
}

// countingListener counts the connections it accepts, those open, and the
// most open at once.
type countingListener struct {
	net.Listener
	mu                   sync.Mutex
	accepted, open, most int
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.accepted++
	l.open++
	l.most = max(l.most, l.open)
	return &countedConn{Conn: c, l: l}, nil
}

func (l *countingListener) counts() (accepted, open, most int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted, l.open, l.most
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		c.l.open--
	})
	return err
}
