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
