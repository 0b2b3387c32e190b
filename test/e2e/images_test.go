package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/nereid-ml/nereid/hack/imagearchive"
	"github.com/nereid-ml/nereid/test/framework"
)

// probeImage is the image of ./probe, which every real node has once
// ensureProbeImage ran.
const probeImage = "localhost/nereid/probe:e2e"

var probeOnce struct {
	sync.Once
	err error
	out []byte
}

// ensureProbeImage builds ./probe statically, wraps it as an image and
// imports it into every real node, once per test binary.
func ensureProbeImage(t *testing.T) {
	t.Helper()
	probeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nereid-e2e-probe-")
		if err != nil {
			probeOnce.err = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "probe")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if probeOnce.out, probeOnce.err = cmd.CombinedOutput(); probeOnce.err != nil {
			return
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			probeOnce.err = err
			return
		}
		var buf bytes.Buffer
		img := imagearchive.Image{Ref: probeImage, Name: "probe", Binary: data, User: imagearchive.Nonroot + ":" + imagearchive.Nonroot, Arch: runtime.GOARCH}
		if probeOnce.err = imagearchive.Write(&buf, img); probeOnce.err != nil {
			return
		}
		archive := filepath.Join(dir, "probe.tar")
		if probeOnce.err = os.WriteFile(archive, buf.Bytes(), 0o644); probeOnce.err != nil {
			return
		}
		probeOnce.err = framework.ImportImage(t.Context(), archive)
	})
	if probeOnce.err != nil {
		t.Fatalf("building the probe image: %v\n%s", probeOnce.err, probeOnce.out)
	}
}

// workerImage is hack/workerimage's: Sedna's library and DI-orchestrator's
// mock of DI-engine on Debian's python3.
const workerImage = "localhost/nereid/worker:1"

var workerOnce struct {
	sync.Once
	err error
	out []byte
}

// ensureWorkerImage builds the worker image from ../shared's Sedna library
// and DI mock (the test skips without them) and imports it into every real
// node, once per test binary. Its Debian root filesystem is made once and
// kept in the tools' cache.
func ensureWorkerImage(t *testing.T) {
	t.Helper()
	sedna := framework.SednaCompat(t)
	di := framework.DIv1alpha1Compat(t)
	workerOnce.Do(func() {
		root := framework.RepoRoot()
		archive := filepath.Join(framework.OutDir(), "images", "worker.tar")
		cmd := exec.Command("go", "run", "./hack/workerimage", "-sedna", sedna, "-di-mock", filepath.Join(di, "di-mock"),
			"-py", filepath.Join(root, "test", "sednalib", "py"), "-cache", filepath.Join(framework.CacheDir(), "images"),
			"-o", archive, "-ref", workerImage)
		cmd.Dir = root
		if workerOnce.out, workerOnce.err = cmd.CombinedOutput(); workerOnce.err != nil {
			return
		}
		workerOnce.err = framework.ImportImage(t.Context(), archive)
	})
	if workerOnce.err != nil {
		t.Fatalf("building the worker image: %v\n%s", workerOnce.err, workerOnce.out)
	}
}
