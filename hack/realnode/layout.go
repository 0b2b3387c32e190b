package realnode

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
)

// MaxNodes bounds the real nodes of one run: each takes a /24 of the cluster
// network for its pods.
const MaxNodes = 20

// The cluster network. Every run has the same addresses: they exist only in
// the run's own network namespaces, which no other run and not the host see.
var (
	// clusterCIDR holds the nodes' addresses and their pods' (kube-proxy's
	// --cluster-cidr: traffic from outside it is masqueraded).
	clusterCIDR = netip.MustParsePrefix("10.201.0.0/16")
	// nodeNet is the bridge of the cluster network namespace: the gateway's
	// address and the nodes' addresses.
	nodeNet = netip.MustParsePrefix("10.201.0.0/24")
	// gatewayIP is the cluster network namespace's own address on the bridge:
	// the Gateway listens there (the API server's advertised address) and
	// CoreDNS answers there (the kubelets' clusterDNS).
	gatewayIP = netip.MustParseAddr("10.201.0.1")
)

// Layout names everything of one run's real nodes: its folders, namespaces,
// cgroups, addresses. It is a pure function of the out dir and the node
// names, so that Down finds what Up made without reading any state.
type Layout struct {
	OutDir string
	Nodes  []string
	// ID tells this run's namespaces and cgroups from another run's: the
	// first 8 hex digits of the out dir's sha256.
	ID string
}

// nodeName is what a real node may be called: a DNS label (Kubernetes' rule
// for a Node's name, shortened so that every derived name stays short).
var nodeName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$`)

// NewLayout checks the node names and lays out their run.
func NewLayout(outDir string, nodes []string) (Layout, error) {
	if !filepath.IsAbs(outDir) {
		return Layout{}, fmt.Errorf("out dir %q is not an absolute path", outDir)
	}
	if len(nodes) > MaxNodes {
		return Layout{}, fmt.Errorf("%d real nodes asked for, at most %d", len(nodes), MaxNodes)
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if !nodeName.MatchString(n) {
			return Layout{}, fmt.Errorf("real node name %q is not a DNS label of at most 32 characters", n)
		}
		if seen[n] {
			return Layout{}, fmt.Errorf("real node name %q given twice", n)
		}
		seen[n] = true
	}
	sum := sha256.Sum256([]byte(filepath.Clean(outDir)))
	return Layout{OutDir: filepath.Clean(outDir), Nodes: nodes, ID: hex.EncodeToString(sum[:4])}, nil
}

// Dir holds the real nodes' files: certificates, configurations, and a
// folder per node.
func (l Layout) Dir() string { return filepath.Join(l.OutDir, "real") }

// NodeDir is node i's folder: its containerd's and kubelet's state, its
// configurations, and root/, whose folders stand in for the node's paths
// that hostPath volumes name.
func (l Layout) NodeDir(i int) string { return filepath.Join(l.Dir(), "nodes", l.Nodes[i]) }

// RunDir is on the host's /run, for what must have a short path (a Unix
// socket's is at most 107 bytes, and an out dir may be deep): the API
// server's egress socket and the files that hold the nodes' mount
// namespaces.
func (l Layout) RunDir() string { return "/run/nereid-" + l.ID }

// EgressSocket is where the Gateway's HTTP CONNECT proxy listens, for the
// API server's egress selector.
func (l Layout) EgressSocket() string { return filepath.Join(l.RunDir(), "egress.sock") }

// MountNS is the file that holds node i's mount namespace.
func (l Layout) MountNS(i int) string { return filepath.Join(l.RunDir(), "ns", l.Nodes[i]) }

// ClusterNetns is the name (ip netns) of the cluster network's namespace.
func (l Layout) ClusterNetns() string { return "nereid-" + l.ID }

// NodeNetns is the name (ip netns) of node i's network namespace.
func (l Layout) NodeNetns(i int) string { return fmt.Sprintf("nereid-%s-%d", l.ID, i) }

// NetnsPath is the file of a network namespace named by ip netns.
func NetnsPath(name string) string { return filepath.Join("/run/netns", name) }

// Cgroup is the run's cgroup, relative to each hierarchy's root: everything
// the run starts is in it.
func (l Layout) Cgroup() string { return "/nereid-" + l.ID }

// NodeCgroup is node i's cgroup: the kubelet's cgroupRoot, its pods under
// it, and its daemons in daemons/.
func (l Layout) NodeCgroup(i int) string { return l.Cgroup() + "/" + l.Nodes[i] }

// ClusterCgroup holds the processes of the cluster network namespace: the
// Gateway and CoreDNS.
func (l Layout) ClusterCgroup() string { return l.Cgroup() + "/cluster" }

// GatewayIP is the cluster network namespace's address.
func (l Layout) GatewayIP() netip.Addr { return gatewayIP }

// NodeIP is node i's address (its InternalIP).
func (l Layout) NodeIP(i int) netip.Addr {
	b := nodeNet.Addr().As4()
	b[3] = byte(11 + i)
	return netip.AddrFrom4(b)
}

// PodCIDR is the range node i's pods get their addresses from.
func (l Layout) PodCIDR(i int) netip.Prefix {
	b := clusterCIDR.Addr().As4()
	b[2] = byte(1 + i)
	return netip.PrefixFrom(netip.AddrFrom4(b), 24)
}

// ClusterCIDR holds every node's and pod's address.
func (l Layout) ClusterCIDR() netip.Prefix { return clusterCIDR }

// NodeNet is the nodes' network, on the cluster network namespace's bridge.
func (l Layout) NodeNet() netip.Prefix { return nodeNet }

// prefixOf writes addr with net's prefix length ("10.201.0.1/24").
func prefixOf(addr netip.Addr, net netip.Prefix) string {
	return netip.PrefixFrom(addr, net.Bits()).String()
}
