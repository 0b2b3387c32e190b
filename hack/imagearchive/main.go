// Command imagearchive writes a container image of one static binary as an
// image archive, without a container engine: what `make images` makes where
// neither docker nor podman runs, for `ctr -n k8s.io images import` (or
// a registry through a tool that takes an OCI layout; its docker manifest
// is for `docker load`, not tried here: no docker daemon runs here).
//
// Usage: go run ./hack/imagearchive -binary <file> -ref <image> -o <archive.tar>
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
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"time"
)

// Image is what an archive holds: one binary, its entrypoint and its user.
type Image struct {
	Ref    string // the image's full name, registry/repository:tag
	Name   string // the binary's name in the image's root
	Binary []byte
	User   string // uid:gid
	Arch   string // GOARCH of the binary
}

// nonroot is distroless's user, by number.
const nonroot = "65532"

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
	img := Image{Ref: *ref, Name: filepath.Base(*binary), Binary: data, User: nonroot + ":" + nonroot, Arch: *arch}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, img); err != nil {
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

// epoch is every time in an archive, so that it is reproducible.
var epoch = time.Unix(0, 0).UTC()

// entry is a file or folder of a layer.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	data     []byte // nil for a folder
}

// Layer is the image's only layer, as an uncompressed tar.
func Layer(img Image) ([]byte, error) {
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: 65532, gid: 65532},
		{name: "tmp/", mode: 0o1777},
		{name: img.Name, mode: 0o755, data: img.Binary},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: epoch, Format: tar.FormatPAX}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Media types of the OCI image spec.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
)

// Descriptor points at a blob (OCI image spec).
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// blob is a blob of the archive and its descriptor.
type blob struct {
	desc Descriptor
	data []byte
}

func newBlob(mediaType string, data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{desc: Descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}, data: data}
}

func (b blob) path() string { return path.Join("blobs", "sha256", b.desc.Digest[len("sha256:"):]) }

func jsonBlob(mediaType string, v any) (blob, error) {
	data, err := json.Marshal(v)
	return newBlob(mediaType, data), err
}

// Write writes img's archive to w.
func Write(w io.Writer, img Image) error {
	layerData, err := Layer(img)
	if err != nil {
		return err
	}
	layer := newBlob(mediaLayer, layerData)
	config, err := jsonBlob(mediaConfig, map[string]any{
		"architecture": img.Arch, "os": "linux", "created": epoch.Format(time.RFC3339),
		"config": map[string]any{"User": img.User, "Entrypoint": []string{"/" + img.Name},
			"Env": []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layer.desc.Digest}},
	})
	if err != nil {
		return err
	}
	manifest, err := jsonBlob(mediaManifest, map[string]any{"schemaVersion": 2, "mediaType": mediaManifest,
		"config": config.desc, "layers": []Descriptor{layer.desc}})
	if err != nil {
		return err
	}
	named := manifest.desc
	named.Annotations = map[string]string{"io.containerd.image.name": img.Ref, "org.opencontainers.image.ref.name": img.Ref}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []Descriptor{named}})
	if err != nil {
		return err
	}
	docker, err := json.Marshal([]map[string]any{{"Config": config.path(), "RepoTags": []string{img.Ref}, "Layers": []string{layer.path()}}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{layer.path(), layer.data}, {config.path(), config.data}, {manifest.path(), manifest.data},
		{"index.json", index}, {"manifest.json", docker},
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}
