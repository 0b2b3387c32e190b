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

// imageOnce builds and imports an image once per test binary, and tells
// every test that needs it how that went.
type imageOnce struct {
	sync.Once
	err error
	out []byte // what the build printed
}

// ensure runs build the first time, and fails t when it failed.
func (o *imageOnce) ensure(t *testing.T, what string, build func() ([]byte, error)) {
	t.Helper()
	o.Do(func() { o.out, o.err = build() })
	if o.err != nil {
		t.Fatalf("building the %s image: %v\n%s", what, o.err, o.out)
	}
}

var probeOnce imageOnce

// ensureProbeImage builds ./probe statically, wraps it as an image and
// imports it into every real node, once per test binary.
func ensureProbeImage(t *testing.T) {
	t.Helper()
	probeOnce.ensure(t, "probe", func() ([]byte, error) {
		dir, err := os.MkdirTemp("", "nereid-e2e-probe-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "probe")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return out, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		img := imagearchive.Image{Ref: probeImage, Name: "probe", Binary: data, User: imagearchive.Nonroot + ":" + imagearchive.Nonroot, Arch: runtime.GOARCH}
		if err := imagearchive.Write(&buf, img); err != nil {
			return nil, err
		}
		archive := filepath.Join(dir, "probe.tar")
		if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
			return nil, err
		}
		return nil, framework.ImportImage(t.Context(), archive)
	})
}

// workerImage is hack/workerimage's worker: Sedna's library and Nereid's
// worker roles on Debian's python3.
const workerImage = "localhost/nereid/worker:1"

// workerImages are hack/workerimage's images (worker, di-mock), each built
// once per test binary.
var workerImages = map[string]*imageOnce{"worker": {}, "di-mock": {}}

// ensureWorkerImage builds hack/workerimage's image name — worker (from
// ../shared's Sedna library) or di-mock (DI-orchestrator's mock of
// DI-engine, under the name its DIJob gives) — and imports it into every real
// node, once per test binary; the test skips without ../shared's files. Its
// Debian root filesystem is made once and kept in the tools' cache.
func ensureWorkerImage(t *testing.T, name string) {
	t.Helper()
	root := framework.RepoRoot()
	archive := filepath.Join(framework.OutDir(), "images", name+".tar")
	args := []string{"run", "./hack/workerimage", "-image", name, "-cache", filepath.Join(framework.CacheDir(), "images"), "-o", archive}
	switch name {
	case "worker":
		args = append(args, "-sedna", framework.SednaCompat(t), "-py", filepath.Join(root, "test", "sednalib", "py"), "-ref", workerImage)
	case "di-mock":
		args = append(args, "-di-mock", filepath.Join(framework.DIv1alpha1Compat(t), "di-mock"))
	}
	workerImages[name].ensure(t, name, func() ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return out, err
		}
		return nil, framework.ImportImage(t.Context(), archive)
	})
}
