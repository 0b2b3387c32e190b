// Command workerimage writes the image the local run's real nodes run Sedna's
// and DI-engine's own worker code in, as an image archive, without a
// container engine:
//
//   - a Debian root filesystem (mmdebstrap, variant minbase) with python3
//     and, from Debian's packages, what Sedna's library and DI-orchestrator's
//     mock of DI-engine import (their requirements.txt, as Debian packages;
//     minio, imported only for s3 URLs, and pycocotools are left out), bash
//     and ping (the mock's DIJob runs `until ping …`); it is made once per
//     package list and kept in -cache;
//   - a layer over it with Sedna's library (<sedna>/lib/sedna, unchanged) at
//     /opt/nereid/lib, Nereid's worker roles and stand-ins for TensorFlow and
//     scikit-learn (test/sednalib/py) at /opt/nereid/py, both on PYTHONPATH,
//     and DI-orchestrator's mock (-di-mock, unchanged) at /app,
//     where its DIJob's commands run it (python3 -u main.py …).
//
// Usage: go run ./hack/workerimage -sedna ../shared/sedna-compat -di-mock ../shared/di-compat/v1alpha1/di-mock -o worker.tar
//
// It needs root and mmdebstrap (apt-get install mmdebstrap) for the root
// filesystem, and Debian's package mirror.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/nereid-ml/nereid/hack/imagearchive"
)

// Suite is the Debian release of the root filesystem: this machine's.
const Suite = "bookworm"

// Packages are the root filesystem's Debian packages.
var Packages = []string{
	"python3", "bash", "iputils-ping", "ca-certificates",
	// Sedna's lib/requirements.txt
	"python3-numpy", "python3-colorlog", "python3-websockets", "python3-requests", "python3-yaml",
	"python3-fastapi", "python3-pydantic", "python3-tenacity", "python3-joblib", "python3-pandas",
	"python3-six", "python3-uvicorn", "python3-multipart",
	// DI-orchestrator's di-mock/requirements.txt
	"python3-easydict", "python3-urlobject", "python3-flask", "python3-responses",
}

// Ref is the image's name, which the end-to-end tests' pods name.
const Ref = "localhost/nereid/worker:1"

func main() {
	sedna := flag.String("sedna", "../shared/sedna-compat", "Sedna's files (lib/sedna is its library).")
	diMock := flag.String("di-mock", "../shared/di-compat/v1alpha1/di-mock", "DI-orchestrator's mock of DI-engine.")
	py := flag.String("py", "test/sednalib/py", "Nereid's worker roles and stand-ins.")
	cache := flag.String("cache", ".cache/images", "Where the root filesystem is kept between runs.")
	out := flag.String("o", "", "The archive to write (required).")
	ref := flag.String("ref", Ref, "The image's name.")
	flag.Parse()
	if *out == "" {
		fail(fmt.Errorf("-o is required"))
	}
	base, err := rootfs(*cache)
	if err != nil {
		fail(err)
	}
	overlay := *out + ".layer"
	if err := writeOverlay(overlay, *sedna, *diMock, *py); err != nil {
		fail(err)
	}
	defer os.Remove(overlay)
	f, err := os.Create(*out + ".tmp")
	if err != nil {
		fail(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	cfg := imagearchive.Config{
		Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"PYTHONPATH=/opt/nereid/py:/opt/nereid/lib", "PYTHONUNBUFFERED=1",
			// As Sedna's example images set it: the backend whose weights
			// FederatedLearning sends is Keras's.
			"BACKEND_TYPE=KERAS"},
		Cmd: []string{"python3"}, WorkingDir: "/app",
	}
	if err := imagearchive.WriteLayers(w, *ref, runtime.GOARCH, cfg, []string{base, overlay}); err != nil {
		fail(err)
	}
	if err := w.Flush(); err != nil {
		fail(err)
	}
	if err := f.Close(); err != nil {
		fail(err)
	}
	if err := os.Rename(*out+".tmp", *out); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s as %s\n", *ref, *out)
}

// rootfs returns the root filesystem's tar in cache, made with mmdebstrap
// unless one of the same package list is there.
func rootfs(cache string) (string, error) {
	sum := sha256.Sum256([]byte(Suite + " " + strings.Join(Packages, ",")))
	file := filepath.Join(cache, "debian-"+Suite+"-"+hex.EncodeToString(sum[:6])+".tar")
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("the worker image's root filesystem needs mmdebstrap: apt-get install mmdebstrap")
	}
	fmt.Fprintf(os.Stderr, "making the worker image's Debian root filesystem (%s, %d packages) with mmdebstrap; it is kept in %s\n", Suite, len(Packages), file)
	cmd := exec.Command("mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar", "--quiet",
		"--include="+strings.Join(Packages, ","), Suite, file+".tmp")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		_ = os.Remove(file + ".tmp")
		return "", fmt.Errorf("mmdebstrap: %w", err)
	}
	return file, os.Rename(file+".tmp", file)
}

// writeOverlay writes the layer of Sedna's library, the worker roles and the
// DI mock.
func writeOverlay(file, sedna, diMock, py string) error {
	trees := map[string]string{
		"/opt/nereid/lib/sedna": filepath.Join(sedna, "lib", "sedna"),
		"/opt/nereid/py":        py,
		"/app":                  diMock,
	}
	for _, src := range trees {
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("the worker image needs %s: %w", src, err)
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	// sitecustomize.py gives a kwok pod's process its pod's network; a real
	// pod has one.
	skip := func(name string, dir bool) bool {
		return name == "__pycache__" || (!dir && (name == "sitecustomize.py" || strings.HasSuffix(name, ".pyc")))
	}
	if err := imagearchive.DirLayer(w, trees, skip); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "workerimage:", err)
	os.Exit(1)
}
