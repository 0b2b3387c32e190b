// Package netns makes sockets in another network namespace from a
// multi-threaded Go program: on an OS thread that entered it for the time it
// takes to make the socket, which then belongs to that namespace for good.
package netns

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Do runs f on an OS thread that has entered the network namespace at
// path; a socket f makes belongs to that namespace for its whole life, on
// whichever thread it is later used. The thread goes back to this process's
// namespace afterwards, or, when it cannot, is left locked so that it ends
// with its goroutine instead of serving others from the wrong namespace.
func Do(path string, f func() error) error {
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer target.Close()
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening this thread's network namespace: %w", err)
	}
	defer own.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering network namespace %s: %w", path, err)
	}
	ferr := f()
	if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("leaving network namespace %s: %w", path, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Listen listens on TCP address addr inside the network namespace at path
// ("" for this process's own).
func Listen(path, addr string) (net.Listener, error) {
	if path == "" {
		return net.Listen("tcp", addr)
	}
	var l net.Listener
	err := Do(path, func() error {
		var err error
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// Dial connects to TCP address addr from inside the network namespace at
// path ("" for this process's own). Only the socket is made there: the
// connection's wait happens on Go's poller, so ctx bounds it as usual.
func Dial(ctx context.Context, path, addr string) (net.Conn, error) {
	if path == "" {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	var c net.Conn
	err := Do(path, func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

// HTTPClient is an HTTP client whose connections are made from inside the
// network namespace at path ("" for this process's own), each request
// bounded by timeout.
func HTTPClient(path string, timeout time.Duration) *http.Client {
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) { return Dial(ctx, path, addr) }
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// AnswersOK says whether GET url answers 200 to a client in the network
// namespace at path ("" for this process's), within timeout.
func AnswersOK(ctx context.Context, path, url string, timeout time.Duration) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := HTTPClient(path, timeout).Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
