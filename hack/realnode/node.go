package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PauseImage is the image of every pod's sandbox, built here (images.go):
// nothing can be pulled.
const PauseImage = "localhost/nereid/pause:1"

// containerdSocket is the node's runtime endpoint, in its own /run.
const containerdSocket = "/run/containerd/containerd.sock"

// nodeFiles writes node i's configurations under its folder: containerd's,
// the CNI network's, the kubelet's and kube-proxy's.
func nodeFiles(l Layout, i int, opts Options) error {
	dir := l.NodeDir(i)
	files := map[string]string{
		"containerd.toml":                       containerdConfig(),
		"kubelet.yaml":                          kubeletConfig(l, i, opts),
		"kube-proxy.yaml":                       kubeProxyConfig(l, i, dir),
		"resolv.conf":                           "",
		"root/etc/cni/net.d/10-nereid.conflist": cniConfig(l, i),
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig is containerd's configuration: its defaults (paths at
// /var/lib/containerd and /run/containerd, which are the node's own in its
// mount namespace) but for what this machine needs.
func containerdConfig() string {
	return fmt.Sprintf(`version = 2

[plugins."io.containerd.grpc.v1.cri"]
  # runc cannot give the sandbox its negative oom_score_adj: processes here
  # lack CAP_SYS_RESOURCE, and without this every sandbox fails to start.
  restrict_oom_score_adj = true
  sandbox_image = %q
  # The pods' network namespaces under the runtime's state (the node's own
  # /run), not in the host's /run/netns.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
`, PauseImage)
}

// cniConfig is the node's pod network: a bridge in the node's network
// namespace, the pods' gateway, addresses from the node's range. No masquerade
// (every address is the cluster's: a pod's address is what its peers see, as
// the LocalController's and the v1 replicas server's checks need).
func cniConfig(l Layout, i int) string {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "nereid",
		"plugins": []any{map[string]any{
			"type":        "bridge",
			"bridge":      "cni0",
			"isGateway":   true,
			"ipMasq":      false,
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":   "host-local",
				"ranges": [][]map[string]string{{{"subnet": l.PodCIDR(i).String()}}},
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}},
	}
	data, _ := json.MarshalIndent(conf, "", "  ")
	return string(data) + "\n"
}

// kubeletConfig is the kubelet's configuration.
func kubeletConfig(l Layout, i int, opts Options) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The node's address in its own network namespace, so that every node has
# port 10250 (and its hostNetwork pods their ports) to itself.
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# cgroup v1 here, which the kubelet refuses unless told; no systemd.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
# The node's pods under the node's cgroup: the kubelet removes any pod
# cgroup under its root it does not know, which would be the other nodes'.
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
clusterDNS: [%s]
clusterDomain: cluster.local
resolvConf: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
registerNode: true
# The kubelet's own defaults, but for the images: none can be pulled again,
# so none is collected.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "2%%", imagefs.available: "2%%"}
serializeImagePulls: false
volumePluginDir: %s
`, l.NodeIP(i), l.NodeCgroup(i), containerdSocket, l.GatewayIP(),
		filepath.Join(l.NodeDir(i), "resolv.conf"), opts.CAFile,
		filepath.Join(l.NodeDir(i), "volume-plugins"))
}

// kubeProxyConfig is kube-proxy's configuration: its iptables rules go to
// the node's network namespace, where it runs. It leaves alone the
// connection tracking settings that are the host's (a network namespace
// shares the host's conntrack table size).
func kubeProxyConfig(l Layout, i int, dir string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, filepath.Join(dir, "kube-proxy.kubeconfig"), l.Nodes[i], l.ClusterCIDR())
}

// nodeCommand is the command line that runs bin in node i's namespaces and
// its cgroup of daemons.
func nodeCommand(l Layout, i int, bin string, args ...string) (string, []string, error) {
	return nsCommand(l.NodeCgroup(i)+"/daemons", []string{"--mount=" + l.MountNS(i), "--net=" + NetnsPath(l.NodeNetns(i))}, bin, args...)
}

// nsCommand is the command line that moves into cgroup, enters the
// namespaces nsenterArgs name and execs bin: the process keeps the pid the
// starter saw, for its pid file.
func nsCommand(cgroup string, nsenterArgs []string, bin string, args ...string) (string, []string, error) {
	join, err := joinCgroupScript(cgroup)
	if err != nil {
		return "", nil, err
	}
	quoted := make([]string, len(nsenterArgs))
	for k, a := range nsenterArgs {
		quoted[k] = shellQuote(a)
	}
	script := join + "exec nsenter " + strings.Join(quoted, " ") + ` -- "$@"`
	return "/bin/sh", append([]string{"-c", script, "realnode", bin}, args...), nil
}
