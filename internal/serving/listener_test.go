package serving

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
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

func TestLimitsBoundTheConnectionsOpenAtOnce(t *testing.T) {
	addr := serve(t, Limits{MaxConnections: 2}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	get := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + addr + "/")
			if err == nil {
				_ = resp.Body.Close()
			}
			done <- err
		}()
		return done
	}
	third := get()
	select {
	case err := <-third:
		t.Fatalf("a third connection was served while two were open: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	_ = held[0].Close()
	select {
	case err := <-third:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not served once one closed")
	}
}
