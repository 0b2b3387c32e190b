// Package realnode runs real Kubernetes nodes beside the local control plane of
// hack/local-up.sh: a kubelet, a containerd and a kube-proxy per node, built from
// the same pinned modules as the control plane, running real containers.
//
// Everything a node is lives in namespaces and cgroups the run makes, so that
// two runs (a `make local-up` and `make test`) and the host itself do not see
// each other's networks, mounts or processes:
//
//   - a network namespace for the cluster network (Layout.ClusterNetns) holds a
//     bridge that every node's veth joins; the Gateway listens there on the
//     cluster's gateway address and forwards to the API server on the host's
//     loopback, and CoreDNS answers cluster names there;
//   - a network namespace per node holds its address on that bridge, the CNI
//     bridge of its pods, its routes to the other nodes' pods and the rules its
//     kube-proxy writes (none is written in the host's own tables);
//   - a mount namespace per node, a slave of the host's, in which the node's
//     own folders under the out dir stand in for the paths the chart's
//     hostPath volumes name (/var/lib/nereid, /data, …), and in which the
//     kubelet's and containerd's mounts stay;
//   - a cgroup per node holds its processes and, under it, its pods: stopping
//     a node kills what is in it, shims and containers included.
//
// The API server reaches the nodes (logs, exec, webhooks behind Services)
// through the Gateway's HTTP CONNECT proxy on a Unix socket, which dials from
// a node's network namespace: its egress selector's "cluster" connection.
//
// Up brings the nodes up and Down takes them down, restoring the kernel
// settings the kubelet changes; the command in ./cmd/realnode calls them for
// hack/local-up.sh and hack/local-down.sh.
package realnode
