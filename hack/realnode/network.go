package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// run runs a host command and returns its error with what it printed.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// netnsExists says whether ip netns knows the namespace name.
func netnsExists(name string) bool {
	_, err := os.Stat(NetnsPath(name))
	return err == nil
}

// setUpNetwork makes the cluster network namespace with its bridge and, per
// node, a network namespace joined to the bridge by a veth pair, with routes
// to every other node's pods. Nothing of it is in the host's namespace.
func setUpNetwork(ctx context.Context, l Layout) error {
	c := l.ClusterNetns()
	ipc := func(args ...string) error { return run(ctx, "ip", append([]string{"-n", c}, args...)...) }
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "nr0", "type", "bridge"},
		{"addr", "add", prefixOf(l.GatewayIP(), l.NodeNet()), "dev", "nr0"},
		{"link", "set", "nr0", "up"},
	}
	if err := run(ctx, "ip", "netns", "add", c); err != nil {
		return err
	}
	for _, s := range steps {
		if err := ipc(s...); err != nil {
			return err
		}
	}
	if err := forwardIPv4(ctx, c); err != nil {
		return err
	}
	for i := range l.Nodes {
		n := l.NodeNetns(i)
		veth := fmt.Sprintf("nrv%d", i)
		if err := run(ctx, "ip", "netns", "add", n); err != nil {
			return err
		}
		ipn := func(args ...string) error { return run(ctx, "ip", append([]string{"-n", n}, args...)...) }
		for _, s := range [][]string{
			{"link", "set", "lo", "up"},
		} {
			if err := ipn(s...); err != nil {
				return err
			}
		}
		if err := ipc("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n); err != nil {
			return err
		}
		if err := ipc("link", "set", veth, "master", "nr0", "up"); err != nil {
			return err
		}
		if err := ipc("route", "add", l.PodCIDR(i).String(), "via", l.NodeIP(i).String()); err != nil {
			return err
		}
		for _, s := range [][]string{
			{"addr", "add", prefixOf(l.NodeIP(i), l.NodeNet()), "dev", "eth0"},
			{"link", "set", "eth0", "up"},
			// A default route, so that a Service address (which only the
			// node's kube-proxy rules translate) is routable at all.
			{"route", "add", "default", "via", l.GatewayIP().String()},
		} {
			if err := ipn(s...); err != nil {
				return err
			}
		}
		for j := range l.Nodes {
			if j != i {
				if err := ipn("route", "add", l.PodCIDR(j).String(), "via", l.NodeIP(j).String()); err != nil {
					return err
				}
			}
		}
		if err := forwardIPv4(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// forwardIPv4 lets the namespace route between its interfaces (its own
// setting: net.ipv4 is per network namespace).
func forwardIPv4(ctx context.Context, netns string) error {
	return run(ctx, "nsenter", "--net="+NetnsPath(netns), "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward")
}

// tearDownNetwork deletes the run's network namespaces, whatever nodes it
// had; their interfaces, routes and rules go with them.
func tearDownNetwork(ctx context.Context, l Layout) error {
	names, _ := filepath.Glob(NetnsPath(l.ClusterNetns() + "-*"))
	names = append(names, NetnsPath(l.ClusterNetns()))
	for _, p := range names {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := run(ctx, "ip", "netns", "delete", filepath.Base(p)); err != nil {
			return err
		}
	}
	return nil
}
