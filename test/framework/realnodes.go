package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nereid-ml/nereid/hack/localrun"
)

// OnlyRealNodes makes the control plane's nodes real ones, n edge nodes
// (real-0 … real-<n-1>) and a cloud node (real-cloud-0), kubelets running
// real containers (hack/realnode), and no kwok node, so that every pod runs.
// They need root; where they cannot run, Run starts no cluster and every
// test that calls RealNodes skips, saying why.
func OnlyRealNodes(n int) Option {
	return func(o *runOptions) { o.realNodes = n }
}

// realNodesSkip is why the real nodes could not run; "" when they run.
var realNodesSkip string

// realNodesUnavailable says why real nodes cannot run here, or "".
func realNodesUnavailable() string {
	if os.Geteuid() != 0 {
		return "real nodes need root (network and mount namespaces, cgroups, containerd)"
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		if _, err := exec.LookPath("containerd"); err != nil {
			return "real nodes need containerd, runc and the CNI plugins, and there is no apt-get to install them"
		}
	}
	return ""
}

// RealNodes skips the test where the real nodes cannot run, and returns
// them.
func RealNodes(t testing.TB) *localrun.RealCluster {
	t.Helper()
	if realNodesSkip != "" {
		t.Skip(realNodesSkip)
	}
	c, err := localrun.ReadRealCluster(OutDir())
	if err != nil || c == nil {
		t.Fatalf("reading the real nodes of %s: %v", OutDir(), err)
	}
	return c
}

// ImportImage imports an image archive into every real node's containerd,
// for pods that name it with imagePullPolicy Never or IfNotPresent.
func ImportImage(ctx context.Context, archive string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(OutDir(), "bin", "realnode"), "import", "--out-dir="+OutDir(), archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("importing %s into the real nodes: %w\n%s", archive, err, out)
	}
	return nil
}

// WriteRealNodeFile writes content at path on a real node, as a file of the
// node's own (hack/realnode gives every node its own folder for the paths
// that hostPath volumes name: /data, /model, /var/lib/nereid, …).
func WriteRealNodeFile(t testing.TB, node, path, content string) {
	t.Helper()
	full := filepath.Join(OutDir(), "real", "nodes", node, "root", filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
