// Package serving bounds what the clients of an HTTP server may hold of it:
// time (a request's headers, its body, the answer, an idle keep-alive) and
// connections open at once. The GlobalManager's DIJob replicas API and the
// LocalController's worker API serve callers that are not the cluster's
// administrators, and both are built this way.
package serving

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Limits are an HTTP server's bounds on its clients. A zero field leaves
// that bound off (Go's http.Server's default).
type Limits struct {
	// ReadHeaderTimeout bounds the reading of a request's headers,
	// ReadTimeout of the whole request, body included.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// WriteTimeout bounds the time from the end of the request's headers
	// to the end of the answer: a client that does not read its answer is
	// cut off.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// MaxConnections bounds the connections open at once: past it, new
	// ones wait to be accepted (Listener).
	MaxConnections int
}

// Server is an http.Server of handler with l's timeouts and header bound.
func (l Limits) Server(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// Listener is ln accepting at most l.MaxConnections connections open at a
// time, or ln itself when there is no such bound.
func (l Limits) Listener(ln net.Listener) net.Listener {
	if l.MaxConnections <= 0 {
		return ln
	}
	return newLimitListener(ln, l.MaxConnections)
}

// limitListener accepts at most cap(slots) connections open at a time:
// past that, Accept waits for one to close, so that a flood of idle or slow
// connections costs a bounded number of file descriptors and goroutines
// (each of them is cut off by the server's timeouts).
type limitListener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close stops Accept, also while it waits for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// limitConn gives its slot back when closed, once.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Admit decides, as a connection is accepted, whether it is served: ok
// false closes it at once. A release that is not nil is called once when an
// admitted connection closes.
type Admit func(remote netip.Addr) (release func(), ok bool)

// Filter is ln serving only the connections admit admits; the others are
// closed as they are accepted, before a byte is read, and counted by
// refused when it is not nil. Put it under Limits.Listener, so that a
// refused connection never holds one of its slots.
func Filter(ln net.Listener, admit Admit, refused func()) net.Listener {
	return &filterListener{Listener: ln, admit: admit, refused: refused}
}

type filterListener struct {
	net.Listener
	admit   Admit
	refused func()
}

// Accept returns the next connection admit admits.
func (l *filterListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		var addr netip.Addr
		if tcp, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			addr = tcp.AddrPort().Addr().Unmap()
		}
		release, ok := l.admit(addr)
		if !ok {
			_ = c.Close()
			if l.refused != nil {
				l.refused()
			}
			continue
		}
		if release == nil {
			return c, nil
		}
		return &limitConn{Conn: c, release: release}, nil
	}
}
