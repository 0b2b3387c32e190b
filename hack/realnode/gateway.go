package realnode

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/hack/realnode/netns"
)

// Gateway joins the host's loopback, where the control plane listens and
// nothing else may, to the run's cluster network, in both directions, without
// an address or a rule in the host's own network namespace:
//
//   - Forwards: a listener inside the cluster network namespace per port
//     (the API server's, on the gateway address the API server advertises as
//     the "kubernetes" Service's endpoint) that connects to the same port on
//     the host's 127.0.0.1;
//   - Reverse: a listener on the host's 127.0.0.1 per port that connects to
//     the same port of the gateway address in the cluster network (where the
//     local run's GlobalManager listens with real nodes);
//   - Egress: an HTTP CONNECT proxy on a Unix socket of the host, for the
//     API server's egress selector, that connects to node and pod addresses
//     (and Service addresses, which the node's kube-proxy translates) from a
//     node's network namespace, and to loopback addresses from the host's.
type Gateway struct {
	// ClusterNetns is the file of the namespace the forwards listen in.
	ClusterNetns string
	// ListenIP is their address there.
	ListenIP netip.Addr
	// Ports are forwarded from ListenIP:port to 127.0.0.1:port.
	Ports []int
	// Reverse are forwarded from 127.0.0.1:port to ListenIP:port.
	Reverse []int
	// EgressSocket is the proxy's Unix socket; its folder is made 0700, so
	// that only root reaches it.
	EgressSocket string
	// DialNetns is the file of the namespace the proxy dials the cluster from.
	DialNetns string
	// MaxConns bounds the connections open at once through each listener,
	// so that a pod that opens many cannot take every descriptor;
	// defaultMaxConns when zero.
	MaxConns int

	// requestTimeout bounds the wait for the whole CONNECT request, so that
	// a client that stalls gives its slot back; dialTimeout when zero (tests
	// shorten it).
	requestTimeout time.Duration
}

// dialTimeout bounds one connection's setup.
const dialTimeout = 10 * time.Second

// defaultMaxConns is MaxConns when it is not set.
const defaultMaxConns = 1024

// An Accept that fails other than for its listener's closing is retried
// after a delay doubling from minAcceptDelay to maxAcceptDelay, as
// net/http's Server does: such failures mostly pass (EMFILE, ECONNABORTED),
// and a listener given up on would leave its clients hanging in the listen
// queue.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

// Run serves until ctx ends. It returns once every listener is up when
// ready is not nil (closing it), and an error if one cannot be made;
// either way, only once the listeners made and their connections are
// closed.
func (g *Gateway) Run(ctx context.Context, ready chan<- struct{}) error {
	logger := klog.FromContext(ctx)
	// Deferred in this order, cancel runs before Wait: it makes every serve
	// close its listener and connections, which Wait then waits for.
	ctx, cancel := context.WithCancel(ctx)
	var served sync.WaitGroup
	defer served.Wait()
	defer cancel()
	// A forward listens on port at one end and connects to the same port at
	// the other: from the cluster network to the host's loopback (Ports),
	// and back (Reverse).
	type end struct{ netns, ip string }
	type forward struct {
		port     int
		from, to end
	}
	host, cluster := end{"", "127.0.0.1"}, end{g.ClusterNetns, g.ListenIP.String()}
	var forwards []forward
	for _, port := range g.Ports {
		forwards = append(forwards, forward{port, cluster, host})
	}
	for _, port := range g.Reverse {
		forwards = append(forwards, forward{port, host, cluster})
	}
	for _, f := range forwards {
		addr := net.JoinHostPort(f.from.ip, strconv.Itoa(f.port))
		l, err := netns.Listen(f.from.netns, addr)
		if err != nil {
			return fmt.Errorf("listening on %s (network namespace %q): %w", addr, f.from.netns, err)
		}
		target := net.JoinHostPort(f.to.ip, strconv.Itoa(f.port))
		served.Go(func() { g.serve(ctx, l, forwardTo(f.to.netns, target)) })
	}
	if err := os.MkdirAll(filepath.Dir(g.EgressSocket), 0o700); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Dir(g.EgressSocket), 0o700); err != nil {
		return err
	}
	_ = os.Remove(g.EgressSocket)
	el, err := net.Listen("unix", g.EgressSocket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", g.EgressSocket, err)
	}
	served.Go(func() { g.serve(ctx, el, g.connect) })
	logger.Info("Gateway serving", "forwards", g.Ports, "reverse", g.Reverse, "on", g.ListenIP, "egress", g.EgressSocket)
	if ready != nil {
		close(ready)
	}
	<-ctx.Done()
	return nil
}

// serve accepts on l until it is closed or ctx ends (which closes it),
// handling each connection in a goroutine of its own, at most MaxConns at
// once (the others wait in the listen queue). It returns once those
// connections have ended too, which ctx's end brings about by closing them.
func (g *Gateway) serve(ctx context.Context, l net.Listener, handle func(context.Context, net.Conn)) {
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	var conns sync.WaitGroup
	defer conns.Wait()
	slots := make(chan struct{}, g.maxConns())
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		c, err := accept(ctx, l)
		if err != nil {
			return
		}
		conns.Go(func() {
			defer func() { <-slots }()
			defer c.Close()
			// A handler waiting on c, for a request or in a tunnel, ends
			// with ctx.
			stop := context.AfterFunc(ctx, func() { _ = c.Close() })
			defer stop()
			handle(ctx, c)
		})
	}
}

// maxConns is MaxConns, or defaultMaxConns when it is not set.
func (g *Gateway) maxConns() int {
	if g.MaxConns > 0 {
		return g.MaxConns
	}
	return defaultMaxConns
}

// accept is l.Accept, retried with a growing delay while it fails: it
// fails only once l is closed or ctx has ended.
func accept(ctx context.Context, l net.Listener) (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err == nil || errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
			return c, err
		}
		delay = min(max(2*delay, minAcceptDelay), maxAcceptDelay)
		klog.FromContext(ctx).Error(err, "Accepting, retrying", "listener", l.Addr(), "after", delay)
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}
}

// forwardTo is a forward's handler: it connects to target from the network
// namespace at ns ("" for this process's own) and copies bytes both ways.
func forwardTo(ns, target string) func(context.Context, net.Conn) {
	return func(ctx context.Context, c net.Conn) {
		logger := klog.FromContext(ctx)
		dialCtx, cancel := context.WithTimeout(ctx, dialTimeout)
		up, err := netns.Dial(dialCtx, ns, target)
		cancel()
		if err != nil {
			logger.V(2).Info("Forward failed", "from", c.RemoteAddr(), "to", target, "err", err)
			return
		}
		splice(ctx, c, up)
	}
}

// maxConnectRequest bounds the CONNECT request the proxy reads.
const maxConnectRequest = 8 << 10

// connect serves one HTTP CONNECT request of the API server: it connects to
// the host:port asked for and then copies bytes both ways.
func (g *Gateway) connect(ctx context.Context, c net.Conn) {
	logger := klog.FromContext(ctx)
	deadline := time.Now().Add(cmp.Or(g.requestTimeout, dialTimeout))
	_ = c.SetReadDeadline(deadline)
	lr := &io.LimitedReader{R: c, N: maxConnectRequest}
	br := bufio.NewReaderSize(lr, 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		logger.V(2).Info("Bad CONNECT request", "err", err)
		switch {
		case lr.N == 0:
			reply(c, http.StatusRequestHeaderFieldsTooLarge)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), !time.Now().Before(deadline):
			// The client went away or stalled: no one to answer. The clock
			// tells a stall, as ReadRequest parses a line cut off by the
			// deadline as a whole (malformed) one.
		default:
			reply(c, http.StatusBadRequest)
		}
		return
	}
	if req.Method != http.MethodConnect {
		reply(c, http.StatusMethodNotAllowed)
		return
	}
	target := req.Host
	up, err := g.dial(ctx, target)
	if err != nil {
		logger.V(2).Info("CONNECT failed", "to", target, "err", err)
		reply(c, http.StatusBadGateway)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		up.Close()
		return
	}
	// Bytes the client sent after its request are already in br.
	if n := br.Buffered(); n > 0 {
		buffered, _ := br.Peek(n)
		if _, err := up.Write(buffered); err != nil {
			up.Close()
			return
		}
	}
	splice(ctx, c, up)
}

// reply answers c's request with status and no body.
func reply(c net.Conn, status int) {
	_, _ = fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n\r\n", status, http.StatusText(status))
}

// dial connects to target (host:port, the host an IP address) from the
// host's network namespace when it is a loopback address, else from the
// cluster's.
func (g *Gateway) dial(ctx context.Context, target string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(target)
	if err != nil {
		return nil, fmt.Errorf("target %q is not an IP address and port: %w", target, err)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	ns := g.DialNetns
	if ap.Addr().IsLoopback() {
		ns = ""
	}
	return netns.Dial(ctx, ns, target)
}

// splice copies a to b and b to a until both directions end, passing each
// end on as a half close, or until ctx ends, which closes both; then closes
// b (the caller closes a).
func splice(ctx context.Context, a, b net.Conn) {
	stop := context.AfterFunc(ctx, func() {
		_ = a.Close()
		_ = b.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	_ = b.Close()
}

// NewGateway is the Gateway of o's run: the API server's port forwarded
// from the gateway address, egress from the first node's namespace.
func NewGateway(o Options) (*Gateway, error) {
	l, err := NewLayout(o.OutDir, o.Nodes)
	if err != nil {
		return nil, err
	}
	if len(l.Nodes) == 0 {
		return nil, errors.New("a gateway needs at least one real node to dial the cluster from")
	}
	return &Gateway{
		ClusterNetns: NetnsPath(l.ClusterNetns()),
		ListenIP:     l.GatewayIP(),
		Ports:        []int{o.APIServerPort},
		Reverse:      o.ReversePorts,
		EgressSocket: l.EgressSocket(),
		DialNetns:    NetnsPath(l.NodeNetns(0)),
		MaxConns:     defaultMaxConns,
	}, nil
}
