package realnode

import (
	"bufio"
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
	// so that a pod that opens many cannot take every descriptor.
	MaxConns int
}

// dialTimeout bounds one connection's setup.
const dialTimeout = 10 * time.Second

// Run serves until ctx ends. It returns once every listener is up when
// ready is not nil (closing it), and an error if one cannot be made.
func (g *Gateway) Run(ctx context.Context, ready chan<- struct{}) error {
	logger := klog.FromContext(ctx)
	var listeners []net.Listener
	closeAll := func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}
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
			closeAll()
			return fmt.Errorf("listening on %s (network namespace %q): %w", addr, f.from.netns, err)
		}
		listeners = append(listeners, l)
		target, ns := net.JoinHostPort(f.to.ip, strconv.Itoa(f.port)), f.to.netns
		go g.serve(ctx, l, func(ctx context.Context, c net.Conn) {
			ctx, cancel := context.WithTimeout(ctx, dialTimeout)
			up, err := netns.Dial(ctx, ns, target)
			cancel()
			if err != nil {
				logger.V(2).Info("Forward failed", "from", c.RemoteAddr(), "to", target, "err", err)
				return
			}
			splice(c, up)
		})
	}
	if err := os.MkdirAll(filepath.Dir(g.EgressSocket), 0o700); err != nil {
		closeAll()
		return err
	}
	if err := os.Chmod(filepath.Dir(g.EgressSocket), 0o700); err != nil {
		closeAll()
		return err
	}
	_ = os.Remove(g.EgressSocket)
	el, err := net.Listen("unix", g.EgressSocket)
	if err != nil {
		closeAll()
		return fmt.Errorf("listening on %s: %w", g.EgressSocket, err)
	}
	listeners = append(listeners, el)
	go g.serve(ctx, el, g.connect)
	logger.Info("Gateway serving", "forwards", g.Ports, "reverse", g.Reverse, "on", g.ListenIP, "egress", g.EgressSocket)
	if ready != nil {
		close(ready)
	}
	<-ctx.Done()
	closeAll()
	return nil
}

// serve accepts on l until it is closed, handling each connection in a
// goroutine of its own, at most MaxConns at once (the others wait in the
// listen queue).
func (g *Gateway) serve(ctx context.Context, l net.Listener, handle func(context.Context, net.Conn)) {
	slots := make(chan struct{}, max(g.MaxConns, 1))
	for {
		slots <- struct{}{}
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				klog.FromContext(ctx).Error(err, "Accepting", "listener", l.Addr())
			}
			return
		}
		go func() {
			defer func() { <-slots }()
			defer c.Close()
			handle(ctx, c)
		}()
	}
}

// maxConnectRequest bounds the CONNECT request the proxy reads.
const maxConnectRequest = 8 << 10

// connect serves one HTTP CONNECT request of the API server: it connects to
// the host:port asked for and then copies bytes both ways.
func (g *Gateway) connect(ctx context.Context, c net.Conn) {
	logger := klog.FromContext(ctx)
	_ = c.SetReadDeadline(time.Now().Add(dialTimeout))
	br := bufio.NewReaderSize(io.LimitReader(c, maxConnectRequest), 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		logger.V(2).Info("Bad CONNECT request", "err", err)
		return
	}
	if req.Method != http.MethodConnect {
		_, _ = io.WriteString(c, "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
		return
	}
	target := req.Host
	up, err := g.dial(ctx, target)
	if err != nil {
		logger.V(2).Info("CONNECT failed", "to", target, "err", err)
		_, _ = fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
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
	splice(c, up)
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
// end on as a half close, then closes b (the caller closes a).
func splice(a, b net.Conn) {
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
		MaxConns:     1024,
	}, nil
}
