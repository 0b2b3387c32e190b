// Package dashboard is `kubectl nereid dashboard`: a read-only web page of
// the edge fleet and the jobs, served by the plugin on the user's own
// machine and read from the cluster with the user's own kubeconfig.
//
// What it guarantees:
//   - It listens on a loopback address only (127.0.0.1 by default; --address
//     refuses any other) on a port the system picks unless --port says.
//   - Every request for cluster data needs the token made for this run (32
//     random bytes), as `Authorization: Bearer <token>`: without it 401,
//     with another token 403. The URL the command prints carries it once;
//     the page (its HTML, script and style, served to anyone who reaches
//     the port: they hold no data) takes it out of the address bar, sends
//     it with each request, and keeps it in its origin's localStorage once
//     the dashboard accepted it. It is never a cookie: a browser sends
//     127.0.0.1's cookies to every port of it, so a server of another
//     local user there would receive it.
//   - The Host header must be 127.0.0.1:<port> or localhost:<port> (or
//     [::1]:<port> on ::1), else 421: a web page of another site that a
//     rebinding DNS name points at the dashboard gets nothing.
//   - GET only (405 otherwise), no request body, bounded headers; no CORS
//     header, so no other origin may read an answer; each answer carries a
//     Content-Security-Policy of 'self' only (the page runs no inline script),
//     frame-ancestors 'none', nosniff and no-referrer.
//   - It reads the cluster as the user (kubectl's --kubeconfig, --context,
//     -n/-A), so it shows exactly what the user may see; it writes nothing
//     and adds nothing to the cluster.
//
// The page (web/) polls the JSON endpoints every 2 seconds; docs/kubectl-plugin.md
// describes it.
package dashboard

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/nereid-ml/nereid/pkg/plugin/cli"
	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// Command is `kubectl nereid dashboard`.
var Command = cli.Command{
	Name:    "dashboard",
	Summary: "Serve a read-only web page of the fleet and the jobs on 127.0.0.1 until Ctrl-C.",
	Run:     run,
}

// options are the command's flags.
type options struct {
	address string
	port    int
}

func run(ctx context.Context, env *cli.Env, args []string) error {
	fs := cli.NewFlagSet(env, "dashboard", "dashboard [--port N] [--address 127.0.0.1] [kube flags]")
	var o options
	fs.StringVar(&o.address, "address", "127.0.0.1", "The loopback address to listen on (127.0.0.1, ::1 or another 127.x.y.z); any other is refused.")
	fs.IntVar(&o.port, "port", 0, "The port to listen on; 0 lets the system pick a free one.")
	kube := cli.AddKubeFlags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.NoArgs(fs); err != nil {
		return err
	}
	addr, err := listenAddress(o)
	if err != nil {
		return &cli.UsageError{Err: err}
	}
	clients, err := kube.Clients()
	if err != nil {
		return err
	}
	return Serve(ctx, env, addr, NewClusterSource(clients), clients.Namespace)
}

// listenAddress checks the flags: a loopback address and a port in range.
func listenAddress(o options) (netip.AddrPort, error) {
	ip, err := netip.ParseAddr(o.address)
	// A zone (::1%lo) cannot be in a browser's URL nor its Host header.
	if err != nil || !ip.IsLoopback() || ip.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("--address %q: want a loopback address such as 127.0.0.1 or ::1 (the dashboard is for this machine's user only)", o.address)
	}
	if o.port < 0 || o.port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("--port %d: want 0 to 65535", o.port)
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(o.port)), nil
}

// Serve listens on addr, prints the URL to open and the namespace src
// reads ("" for every namespace), and serves the dashboard of src until
// ctx ends.
func Serve(ctx context.Context, env *cli.Env, addr netip.AddrPort, src Source, namespace string) error {
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	bound := netip.MustParseAddrPort(ln.Addr().String())
	token := newToken()
	h := NewHandler(src, token, bound)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	fmt.Fprintf(env.Stdout, "Open %s\n(read-only, for this machine's user; %s; Ctrl-C stops it)\n", pageURL(bound, token), scopeLine(namespace))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("stopping: %w", err)
	}
	return nil
}

// scopeLine says which namespace's jobs the page shows.
func scopeLine(namespace string) string {
	if namespace == "" {
		return "the jobs of every namespace"
	}
	return "the jobs of " + view.Scope(namespace) + " (-A for every namespace)"
}

// pageURL is the URL the user opens: the first page with the token.
func pageURL(addr netip.AddrPort, token string) string {
	return "http://" + addr.String() + "/?token=" + token
}

// newToken is 32 random bytes, URL-safe (crypto/rand.Read never fails).
func newToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
