package serving

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// serve serves handler within limits on a loopback port until the test ends.
func serve(t *testing.T, limits Limits, handler http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := limits.Server(handler)
	go func() { _ = srv.Serve(limits.Listener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// closedWithin says whether the server closes c within d (a read ends).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var timeout net.Error
	return !(errors.As(err, &timeout) && timeout.Timeout())
}

func TestLimitsCutOffSlowAndIdleClients(t *testing.T) {
	limits := Limits{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}
	addr := serve(t, limits, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	for name, send := range map[string]string{
		"headers never end":      "POST / HTTP/1.1\r\nHost: x\r\n",
		"a body that never ends": "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, send); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(c, 3*time.Second) {
			t.Errorf("%s: the connection is still open 3s later", name)
		}
		_ = c.Close()
	}

	// A keep-alive connection, answered, then idle.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !closedWithin(c, 3*time.Second) {
		t.Error("an idle keep-alive connection is still open 3s later")
	}
}

// pipeListener is a listener of in-memory connections (net.Pipe), for the
// tests that run in a synctest bubble, where sockets cannot be: Dial hands
// Accept the server's end, queued as the kernel's backlog would queue it.
type pipeListener struct {
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn, 16), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

func (l *pipeListener) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A third connection waits, unserved, while two are open, and is served
// once one of them closes. The test runs in a synctest bubble: synctest.Wait
// shows the third request blocked, not merely slow.
func TestLimitsBoundTheConnectionsOpenAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		limits := Limits{MaxConnections: 2}
		srv := limits.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		served := make(chan struct{})
		go func() {
			_ = srv.Serve(limits.Listener(ln))
			close(served)
		}()
		defer func() {
			_ = srv.Close()
			<-served
		}()
		var held []net.Conn
		for range 2 {
			c, err := ln.DialContext(t.Context(), "", "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			held = append(held, c)
		}
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: ln.DialContext}}
		defer client.CloseIdleConnections()
		third := make(chan error, 1)
		go func() {
			resp, err := client.Get("http://" + ln.Addr().String() + "/")
			if err == nil {
				_ = resp.Body.Close()
			}
			third <- err
		}()
		synctest.Wait()
		select {
		case err := <-third:
			t.Fatalf("a third connection was served while two were open: %v", err)
		default:
		}
		_ = held[0].Close()
		if err := <-third; err != nil {
			t.Fatalf("the third connection, once one closed: %v", err)
		}
	})
}
