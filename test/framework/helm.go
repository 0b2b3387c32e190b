package framework

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// ChartDir is the path of Nereid's Helm chart.
func ChartDir() string {
	return filepath.Join(RepoRoot(), "build", "charts", "nereid")
}

// helmPath is the helm that hack/build-tools.sh builds from hack/tools/helm: the
// tests use that one, never whatever helm is on PATH, so they check the chart with
// the pinned version.
func helmPath(t testing.TB) string {
	t.Helper()
	p := filepath.Join(toolsDir(), "helm")
	if !isExecutable(p) {
		t.Fatalf("no helm at %s: build it with `bash hack/build-tools.sh helm` (make tools)", p)
	}
	return p
}

// helmTimeout bounds one helm command.
const helmTimeout = 5 * time.Minute

// Helm runs the pinned helm and returns its standard output. When helm fails, the
// error holds its exit status and standard error, which a test can check for what a
// user would read. It may run in a test's cleanup.
func Helm(t testing.TB, args ...string) (stdout string, err error) {
	t.Helper()
	// Not t.Context() itself: it is cancelled before the test's cleanups
	// run, and a cleanup's helm uninstall must still run.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), helmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmPath(t), args...)
	// No user's helm settings or repositories: the chart alone decides.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	if kubeconfigPath != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfigPath) // the test cluster, as admin
	}
	return runTool(cmd, "helm", args)
}

// RenderChart renders the chart as release "nereid" in namespace with the CRDs and
// the given extra helm arguments (--set ..., -f values.yaml), writes the result to a
// file of the test's temporary directory and returns its path, for ReadManifests or
// kubectl apply -f.
func RenderChart(t testing.TB, namespace string, args ...string) string {
	t.Helper()
	return RenderRelease(t, "nereid", namespace, args...)
}

// RenderRelease is RenderChart for a release of another name. Its cluster-wide
// objects (the GlobalManager's ClusterRole and its binding) are named after
// the release and its namespace, so do not replace those of the default
// release in SystemNamespace, which the GlobalManagers of the tests run with.
func RenderRelease(t testing.TB, release, namespace string, args ...string) string {
	t.Helper()
	out, err := Helm(t, append([]string{"template", release, ChartDir(), "--namespace", namespace, "--include-crds"}, args...)...)
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	path := filepath.Join(t.TempDir(), "rendered.yaml")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
