package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// The proxy's cases run Run with no forwards, so in the test's own network
// namespace and without root: a request, and what the proxy answers it.
var proxyCases = map[string]struct {
	request func(echo, closed string) string
	want    int // the answer's status code; 0 for a connection closed without one
}{
	"CONNECT to the echo, with 7 KiB of header": {
		request: func(echo, _ string) string { return connectRequest(echo, 7<<10) + "hello" },
		want:    http.StatusOK,
	},
	"GET": {
		request: func(echo, _ string) string { return "GET / HTTP/1.1\r\nHost: " + echo + "\r\n\r\n" },
		want:    http.StatusMethodNotAllowed,
	},
	"CONNECT to not-an-address": {
		request: func(_, _ string) string { return connectRequest("not-an-address", 0) },
		want:    http.StatusBadGateway,
	},
	"CONNECT to a port nothing listens on": {
		request: func(_, closed string) string { return connectRequest(closed, 0) },
		want:    http.StatusBadGateway,
	},
	// Over maxConnectRequest, although the request is whole: without the
	// bound it would be served.
	"header over 8 KiB": {
		request: func(echo, _ string) string { return connectRequest(echo, 16<<10) + "hello" },
		want:    http.StatusRequestHeaderFieldsTooLarge,
	},
	"a request line that is not HTTP's": {
		request: func(_, _ string) string { return "HELLO\r\n\r\n" },
		want:    http.StatusBadRequest,
	},
	// Cut off by the request timeout, well before the client's own deadline.
	"half a request line, then nothing": {
		request: func(_, _ string) string { return "CONNECT 127.0." },
		want:    0,
	},
}

func TestGatewayProxyAnswersEachRequestAndServesTheNextClient(t *testing.T) {
	t.Parallel()
	echo, closed := startEcho(t), closedAddr(t)
	for name, tc := range proxyCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			socket, _ := startProxy(t, &Gateway{MaxConns: 4, requestTimeout: 200 * time.Millisecond})
			c, br := dialProxy(t, socket)
			if _, err := io.WriteString(c, tc.request(echo.addr, closed)); err != nil {
				t.Fatalf("writing the request: %v", err)
			}
			if got := answer(t, br); got != tc.want {
				t.Fatalf("answer %d, want %d (0: closed without one)", got, tc.want)
			}
			if tc.want == http.StatusOK {
				checkTunnel(t, c, br)
			}
			c.Close()
			checkGoodClient(t, socket, echo.addr)
		})
	}
}

// A flood of clients gets MaxConns forwarded at once, the others waiting
// (not refused) until a slot is free.
func TestGatewayForwardsAtMostMaxConnsAtOnce(t *testing.T) {
	t.Parallel()
	const bound, flood = 4, 50
	// quiet is how long the target must see no connection over the bound;
	// without the bound, the flood's reach it within milliseconds.
	const quiet = 200 * time.Millisecond
	_, ctx := ktesting.NewTestContext(t)
	echo := startEcho(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g := &Gateway{MaxConns: bound}
	served := make(chan struct{})
	go func() {
		defer close(served)
		g.serve(ctx, l, forwardTo("", echo.addr))
	}()
	var clients []net.Conn
	for range flood {
		c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
		if err != nil {
			t.Fatalf("client %d of the flood: %v", len(clients), err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	for i := range bound {
		select {
		case <-echo.accepted:
		case <-time.After(2 * time.Second):
			t.Fatalf("%d connections reached the target, want %d", i, bound)
		}
	}
	select {
	case <-echo.accepted:
		t.Fatalf("connection %d reached the target while %d were open, the bound", bound+1, bound)
	case <-time.After(quiet):
	}
	for _, c := range clients {
		c.Close()
	}
	c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	checkEcho(t, c, bufio.NewReader(c), "ping")
	c.Close()
	l.Close()
	select {
	case <-served:
	case <-time.After(2 * time.Second):
		t.Fatal("serve did not return within 2s of its listener closing")
	}
}

// Run returns when its context ends, although a tunnel is still open,
// closing the tunnel, and its socket accepts no one afterwards.
func TestGatewayRunStopsListeningWhenContextEnds(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	socket, stop := startProxy(t, &Gateway{MaxConns: 4})
	c, br := dialProxy(t, socket)
	if _, err := io.WriteString(c, connectRequest(echo.addr, 0)); err != nil {
		t.Fatal(err)
	}
	if got := answer(t, br); got != http.StatusOK {
		t.Fatalf("answer %d, want 200", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkClosed(t, "the tunnel", c)
	if c, err := net.Dial("unix", socket); err == nil {
		c.Close()
		t.Error("the proxy's socket accepts connections after Run returned")
	}
}

// A failed Accept that is not the listener's closing (here EMFILE, a
// process out of descriptors, which passes) does not end serve: the next
// client is forwarded.
func TestGatewayKeepsAcceptingAfterTemporaryErrors(t *testing.T) {
	t.Parallel()
	echo := startEcho(t)
	l := listenLoopback(t)
	const failures = 3 // retried after 5, 10 and 20ms
	flaky := &flakyListener{Listener: l, failures: make(chan error, failures)}
	for range failures {
		flaky.failures <- &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	startServe(t, &Gateway{MaxConns: 4}, flaky, forwardTo("", echo.addr))
	c := dialForward(t, l.Addr().String())
	checkEcho(t, c, bufio.NewReader(c), "ping")
}

// With every slot taken, serve still returns when its context ends, and the
// clients it holds, forwarded or waiting for a slot, see their connection
// closed.
func TestGatewayServeEndsWithItsContextWhenEverySlotIsTaken(t *testing.T) {
	t.Parallel()
	const bound = 2
	echo := startEcho(t)
	l := listenLoopback(t)
	cancel, served := startServe(t, &Gateway{MaxConns: bound}, l, forwardTo("", echo.addr))
	var held []net.Conn
	for range bound {
		c := dialForward(t, l.Addr().String())
		checkEcho(t, c, bufio.NewReader(c), "ping")
		held = append(held, c)
	}
	waiting := dialForward(t, l.Addr().String())
	cancel()
	select {
	case <-served:
	case <-time.After(2 * time.Second):
		t.Fatal("serve did not return within 2s of its context ending")
	}
	for i, c := range held {
		checkClosed(t, fmt.Sprintf("forwarded client %d", i), c)
	}
	checkClosed(t, "the client waiting for a slot", waiting)
}

// A Gateway without MaxConns has NewGateway's bound: it forwards many
// clients at once, not one.
func TestGatewayWithoutMaxConnsForwardsManyAtOnce(t *testing.T) {
	t.Parallel()
	if got := (&Gateway{}).maxConns(); got != defaultMaxConns {
		t.Errorf("bound %d, want %d", got, defaultMaxConns)
	}
	echo := startEcho(t)
	l := listenLoopback(t)
	startServe(t, &Gateway{}, l, forwardTo("", echo.addr))
	for range 8 {
		c := dialForward(t, l.Addr().String())
		checkEcho(t, c, bufio.NewReader(c), "ping")
	}
}

// flakyListener fails an Accept with each of its failures in turn, then
// accepts as its Listener does.
type flakyListener struct {
	net.Listener
	failures chan error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	select {
	case err := <-l.failures:
		return nil, err
	default:
		return l.Listener.Accept()
	}
}

// listenLoopback is a TCP listener on 127.0.0.1, closed when the test ends.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// startServe runs g.serve on l until cancel (or the test's end) ends its
// context; served is closed when serve returns, which the test's end waits
// for, 2s at most.
func startServe(t *testing.T, g *Gateway, l net.Listener, handle func(context.Context, net.Conn)) (cancel context.CancelFunc, served <-chan struct{}) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.serve(ctx, l, handle)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Error("serve did not return within 2s of its context ending")
		}
	})
	return cancel, done
}

// dialForward connects to a forward's listener at addr, the whole exchange
// bounded by a second.
func dialForward(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Second))
	return c
}

// checkClosed checks that the other end of c has closed it: a read ends at
// once, and not for c's own deadline.
func checkClosed(t *testing.T, what string, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := io.ReadAll(c)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Errorf("%s: still open a second after the context ended", what)
	}
}

// echoServer is a target on 127.0.0.1 that sends back what it receives and
// reports each connection it accepts.
type echoServer struct {
	addr     string
	accepted chan struct{}
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{addr: l.Addr().String(), accepted: make(chan struct{}, 256)}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			e.accepted <- struct{}{}
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	return e
}

// closedAddr is an address on 127.0.0.1 that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startProxy runs g with its egress proxy alone, on a socket in a folder of
// the test's, until stop (or the test's end) ends its context; stop says
// whether Run returned, within 2s, without an error.
func startProxy(t *testing.T, g *Gateway) (socket string, stop func() error) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	g.EgressSocket = filepath.Join(t.TempDir(), "egress", "s")
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- g.Run(ctx, ready) }()
	stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(2 * time.Second):
			return errors.New("Run did not return within 2s of its context ending")
		}
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(2 * time.Second):
		t.Fatal("Run not ready within 2s")
	}
	return g.EgressSocket, stop
}

// dialProxy connects to the proxy, the whole exchange bounded by a second.
func dialProxy(t *testing.T, socket string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(time.Second))
	return c, bufio.NewReader(c)
}

// connectRequest asks for a tunnel to target, with a header of about pad
// bytes more.
func connectRequest(target string, pad int) string {
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if pad > 0 {
		req += "X-Pad: " + strings.Repeat("a", pad) + "\r\n"
	}
	return req + "\r\n"
}

// answer is the status code of the proxy's answer, or 0 when it closed the
// connection without one (a reset too: the kernel resets a Unix socket
// closed with bytes unread).
func answer(t *testing.T, br *bufio.Reader) int {
	t.Helper()
	if _, err := br.Peek(1); errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		return 0
	} else if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode
}

// checkTunnel checks that the tunnel c opened to the echo carries bytes both
// ways: those sent with the request, then more, and that the end of the
// client's writes comes back as the end of its reads.
func checkTunnel(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	got := make([]byte, len("hello"))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "hello" {
		t.Fatalf("the bytes sent with the request came back as %q (%v), want %q", got, err, "hello")
	}
	checkEcho(t, c, br, "world")
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		t.Fatalf("after the client's end of writes: %q, %v; want the end of reads", rest, err)
	}
}

// checkEcho sends msg on c and wants it back on br.
func checkEcho(t *testing.T, c net.Conn, br *bufio.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatalf("sending %q: %v", msg, err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
		t.Fatalf("got back %q (%v), want %q", got, err, msg)
	}
}

// checkGoodClient checks that the proxy still opens a working tunnel.
func checkGoodClient(t *testing.T, socket, echo string) {
	t.Helper()
	c, br := dialProxy(t, socket)
	if _, err := io.WriteString(c, connectRequest(echo, 0)+"hello"); err != nil {
		t.Fatal(err)
	}
	if got := answer(t, br); got != http.StatusOK {
		t.Fatalf("a good client after: answer %d, want 200", got)
	}
	checkTunnel(t, c, br)
}
