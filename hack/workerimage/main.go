// Command workerimage writes the images the local run's real nodes run
// Sedna's and DI-engine's own worker code in, as image archives, without a
// container engine. Each is a Debian root filesystem (mmdebstrap, variant
// minbase) with python3 and, from Debian's packages, what the code imports
// (made once per release and package list and kept in -cache), and a layer
// of the code:
//
//   - worker (localhost/nereid/worker:1), on bookworm: what Sedna's
//     lib/requirements.txt names (minio, imported only for s3 URLs, and
//     pycocotools are left out); Sedna's library (<sedna>/lib/sedna,
//     unchanged) at /opt/nereid/lib, Nereid's worker roles and stand-ins for
//     TensorFlow and scikit-learn (test/sednalib/py) at /opt/nereid/py, both
//     on PYTHONPATH;
//   - di-mock (docker.io/opendilab/di-mock:v0.0.5, the name its DIJob gives),
//     DI-orchestrator's mock of DI-engine as its own Dockerfile builds it:
//     the mock (-di-mock, unchanged) at /app, where its DIJob's commands run
//     it (python3 -u main.py …), on bullseye, whose packages are the versions
//     its requirements.txt pins (Flask 1.1.2, easydict 1.9, URLObject 2.4.3):
//     its servers shut down through werkzeug.server.shutdown, which Werkzeug
//     2.1 removed, so on bookworm's Flask a coordinator that converged never
//     exits. bash and ping too (its DIJob runs `until ping …`).
//
// Usage: go run ./hack/workerimage -image worker -sedna ../shared/sedna-compat -o worker.tar
//
//	go run ./hack/workerimage -image di-mock -di-mock ../shared/di-compat/v1alpha1/di-mock -o di-mock.tar
//
// It needs root and mmdebstrap (apt-get install mmdebstrap) for the root
// filesystems, and Debian's package mirror.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/nereid-ml/nereid/hack/imagearchive"
)

// image is one image this command writes.
type image struct {
	// Ref is the image's name, which the end-to-end tests' pods name.
	Ref string
	// Suite is the Debian release of its root filesystem, Packages its
	// packages.
	Suite    string
	Packages []string
	Config   imagearchive.Config
}

// pathEnv is the images' PATH.
const pathEnv = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Images are the images by -image's name.
var Images = map[string]image{
	"worker": {
		Ref: "localhost/nereid/worker:1", Suite: "bookworm",
		Packages: []string{"python3", "bash", "iputils-ping", "ca-certificates",
			// Sedna's lib/requirements.txt
			"python3-numpy", "python3-colorlog", "python3-websockets", "python3-requests", "python3-yaml",
			"python3-fastapi", "python3-pydantic", "python3-tenacity", "python3-joblib", "python3-pandas",
			"python3-six", "python3-uvicorn", "python3-multipart"},
		Config: imagearchive.Config{
			Env: []string{pathEnv, "PYTHONPATH=/opt/nereid/py:/opt/nereid/lib", "PYTHONUNBUFFERED=1",
				// As Sedna's example images set it: the backend whose
				// weights FederatedLearning sends is Keras's.
				"BACKEND_TYPE=KERAS"},
			Cmd: []string{"python3"},
		},
	},
	"di-mock": {
		Ref: "docker.io/opendilab/di-mock:v0.0.5", Suite: "bullseye",
		Packages: []string{"python3", "bash", "iputils-ping",
			// di-mock/requirements.txt
			"python3-numpy", "python3-requests", "python3-easydict", "python3-urlobject", "python3-flask", "python3-responses"},
		Config: imagearchive.Config{Env: []string{pathEnv}, Cmd: []string{"python3"}, WorkingDir: "/app"},
	},
}

func main() {
	name := flag.String("image", "worker", "The image to write: worker (Sedna's library and Nereid's worker roles) or di-mock (DI-orchestrator's mock of DI-engine).")
	sedna := flag.String("sedna", "../shared/sedna-compat", "Sedna's files (lib/sedna is its library); for -image worker.")
	diMock := flag.String("di-mock", "../shared/di-compat/v1alpha1/di-mock", "DI-orchestrator's mock of DI-engine; for -image di-mock.")
	py := flag.String("py", "test/sednalib/py", "Nereid's worker roles and stand-ins; for -image worker.")
	cache := flag.String("cache", ".cache/images", "Where the root filesystems are kept between runs.")
	out := flag.String("o", "", "The archive to write (required).")
	ref := flag.String("ref", "", "The image's name (default the image's own: "+Images["worker"].Ref+", "+Images["di-mock"].Ref+").")
	flag.Parse()
	img, ok := Images[*name]
	switch {
	case !ok:
		fail(fmt.Errorf("-image %q: want worker or di-mock", *name))
	case *out == "":
		fail(fmt.Errorf("-o is required"))
	}
	if *ref != "" {
		img.Ref = *ref
	}
	trees := map[string]string{"/app": *diMock}
	if *name == "worker" {
		trees = map[string]string{"/opt/nereid/lib/sedna": filepath.Join(*sedna, "lib", "sedna"), "/opt/nereid/py": *py}
	}
	if err := write(img, trees, *cache, *out); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s as %s\n", img.Ref, *out)
}

// write writes img's archive to out: its root filesystem from cache and a
// layer of trees (path in the image → folder here).
func write(img image, trees map[string]string, cache, out string) error {
	base, err := rootfs(cache, img)
	if err != nil {
		return err
	}
	overlay := out + ".layer"
	if err := writeOverlay(overlay, trees); err != nil {
		return err
	}
	defer os.Remove(overlay)
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := imagearchive.WriteLayers(w, img.Ref, runtime.GOARCH, img.Config, []string{base, overlay}); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}

// rootfs returns img's root filesystem's tar in cache, made with mmdebstrap
// unless one of the same release and package list is there.
func rootfs(cache string, img image) (string, error) {
	sum := sha256.Sum256([]byte(img.Suite + " " + strings.Join(img.Packages, ",")))
	file := filepath.Join(cache, "debian-"+img.Suite+"-"+hex.EncodeToString(sum[:6])+".tar")
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", fmt.Errorf("the image's root filesystem needs mmdebstrap: apt-get install mmdebstrap")
	}
	fmt.Fprintf(os.Stderr, "making %s's Debian root filesystem (%s, %d packages) with mmdebstrap; it is kept in %s\n", img.Ref, img.Suite, len(img.Packages), file)
	cmd := exec.Command("mmdebstrap", "--variant=minbase", "--mode=root", "--format=tar", "--quiet",
		"--include="+strings.Join(img.Packages, ","), img.Suite, file+".tmp")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		_ = os.Remove(file + ".tmp")
		return "", fmt.Errorf("mmdebstrap: %w", err)
	}
	return file, os.Rename(file+".tmp", file)
}

// writeOverlay writes the layer of trees.
func writeOverlay(file string, trees map[string]string) error {
	for _, dst := range slices.Sorted(maps.Keys(trees)) {
		if _, err := os.Stat(trees[dst]); err != nil {
			return fmt.Errorf("the image needs %s: %w", trees[dst], err)
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
