// Command imagearchive writes a container image of one static binary as an
// image archive, without a container engine: what `make images` makes where
// neither docker nor podman runs, for `ctr -n k8s.io images import` (or
// a registry through a tool that takes an OCI layout; its docker manifest
// is for `docker load`, not tried here: no docker daemon runs here).
//
// Usage: go run ./hack/imagearchive/cmd/imagearchive -binary <file> -ref <image> -o <archive.tar>
//
// The image is what build/docker/<binary>.Dockerfile makes on
// gcr.io/distroless/static:nonroot, minus what a static Nereid binary does
// not read: one layer with the binary at /<name>, /etc/passwd and
// /etc/group naming root and nonroot (65532), /tmp and nonroot's home; the
// user 65532:65532 by number (the kubelet checks runAsNonRoot against a
// number) and the binary as the entrypoint.
//
// The archive holds the image twice over the same blobs: as an OCI image
// layout (oci-layout, index.json, whose manifest names the image in
// io.containerd.image.name and org.opencontainers.image.ref.name) and as a
// docker archive (manifest.json). The layer is an uncompressed tar, so its
// digest is its diff ID. Every time in it is the Unix epoch: the same
// binary makes the same archive, byte for byte.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nereid-ml/nereid/hack/imagearchive"
)

func main() {
	binary := flag.String("binary", "", "the static binary to put at the image's root (required)")
	ref := flag.String("ref", "", "the image's name, registry/repository:tag, as the chart names it (required)")
	out := flag.String("o", "", "the archive to write (required); its folder is made if missing")
	arch := flag.String("arch", runtime.GOARCH, "the binary's architecture, as GOARCH says it")
	flag.Parse()
	if *binary == "" || *ref == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "imagearchive: -binary, -ref and -o are required")
		flag.Usage()
		os.Exit(2)
	}
	data, err := os.ReadFile(*binary)
	if err != nil {
		fatal(err)
	}
	img := imagearchive.Image{Ref: *ref, Name: filepath.Base(*binary), Binary: data, User: imagearchive.Nonroot + ":" + imagearchive.Nonroot, Arch: *arch}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fatal(err)
	}
	var buf bytes.Buffer
	if err := imagearchive.Write(&buf, img); err != nil {
		fatal(err)
	}
	if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "imagearchive:", err)
	os.Exit(1)
}
