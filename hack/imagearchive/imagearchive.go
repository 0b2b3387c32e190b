// Package imagearchive writes a container image as an image archive without a
// container engine: an OCI image layout and a docker archive over the same
// blobs, which `ctr -n k8s.io images import` (and `docker load`) take. Every
// time in it is the Unix epoch: the same input makes the same archive, byte
// for byte. ./cmd/imagearchive is its command; hack/realnode and the
// end-to-end tests make the images of the local run's real nodes with it.
package imagearchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"path"
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

// Nonroot is distroless's user, by number.
const Nonroot = "65532"

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
