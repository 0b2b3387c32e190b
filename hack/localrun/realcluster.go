package localrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// RealCluster is what hack/realnode tells the local run about the real nodes
// it brought up (NEREID_REAL_NODES), in RealClusterFile: where their cluster
// network is, which the GlobalManager joins so that pods reach it from their
// own addresses.
type RealCluster struct {
	// Nodes are the real nodes' names, the cloud ones first.
	Nodes []string `json:"nodes"`
	// Edge are those of Nodes that are edge nodes.
	Edge []string `json:"edge"`
	// Netns is the file of the cluster network's namespace.
	Netns string `json:"netns"`
	// NodeNetns are the files of the nodes' network namespaces, by node:
	// their host networks, where a process on the node but in no pod runs.
	NodeNetns map[string]string `json:"nodeNetns"`
	// GatewayIP is that namespace's address, which every node and pod
	// reaches: the GlobalManager listens there, and the gateway forwards
	// the API server's port from it.
	GatewayIP string `json:"gatewayIP"`
	// ReversePorts are forwarded by the gateway from the host's 127.0.0.1
	// to GatewayIP: the GlobalManager's ports, for what runs on the host
	// (kwok's nodes' LocalControllers, the demos, the tests).
	ReversePorts []int `json:"reversePorts"`
}

// RealClusterFile is where hack/realnode writes the RealCluster of outDir.
func RealClusterFile(outDir string) string { return filepath.Join(outDir, "real", "cluster.json") }

// ReadRealCluster reads outDir's RealCluster; nil when it has no real nodes.
func ReadRealCluster(outDir string) (*RealCluster, error) {
	data, err := os.ReadFile(RealClusterFile(outDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var c RealCluster
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("reading %s: %w", RealClusterFile(outDir), err)
	}
	return &c, nil
}

// Write writes c as outDir's RealCluster.
func (c RealCluster) Write(outDir string) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(RealClusterFile(outDir)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(RealClusterFile(outDir), append(data, '\n'), 0o644)
}

// Cloud are those of c's nodes that are not edge nodes.
func (c RealCluster) Cloud() []string {
	var out []string
	for _, n := range c.Nodes {
		if !slices.Contains(c.Edge, n) {
			out = append(out, n)
		}
	}
	return out
}

// NetnsOf is the file of node's network namespace.
func (c RealCluster) NetnsOf(node string) string { return c.NodeNetns[node] }
