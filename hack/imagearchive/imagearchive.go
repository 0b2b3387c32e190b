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
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
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

// blob is a blob of the archive and its descriptor: its bytes, or the file
// that holds them (a layer of hundreds of megabytes is not read into memory).
type blob struct {
	desc Descriptor
	data []byte
	file string
}

func newBlob(mediaType string, data []byte) blob {
	sum := sha256.Sum256(data)
	return blob{desc: Descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(data))}, data: data}
}

// fileBlob is the blob of the file at name, digested as it is now.
func fileBlob(mediaType, name string) (blob, error) {
	f, err := os.Open(name)
	if err != nil {
		return blob{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return blob{}, fmt.Errorf("reading %s: %w", name, err)
	}
	return blob{desc: Descriptor{MediaType: mediaType, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: n}, file: name}, nil
}

func (b blob) path() string { return path.Join("blobs", "sha256", b.desc.Digest[len("sha256:"):]) }

// writeTo writes the blob's bytes as the archive's entry.
func (b blob) writeTo(tw *tar.Writer) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: b.path(), Mode: 0o644, Size: b.desc.Size, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if b.file == "" {
		_, err := tw.Write(b.data)
		return err
	}
	f, err := os.Open(b.file)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(tw, f)
	if err == nil && n != b.desc.Size {
		err = fmt.Errorf("%s changed while it was written (%d bytes, digested %d)", b.file, n, b.desc.Size)
	}
	return err
}

func jsonBlob(mediaType string, v any) (blob, error) {
	data, err := json.Marshal(v)
	return newBlob(mediaType, data), err
}

// Config is how an image's container runs.
type Config struct {
	User       string   // uid:gid
	Entrypoint []string // nil for none
	Cmd        []string
	Env        []string // NAME=value
	WorkingDir string
}

// defaultPath is the PATH of an image that sets none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Write writes img's archive to w: one layer, of its binary.
func Write(w io.Writer, img Image) error {
	layerData, err := Layer(img)
	if err != nil {
		return err
	}
	cfg := Config{User: img.User, Entrypoint: []string{"/" + img.Name}, Env: []string{defaultPath}}
	return writeArchive(w, img.Ref, img.Arch, cfg, []blob{newBlob(mediaLayer, layerData)})
}

// WriteLayers writes the archive of an image of the layers in the files
// named (uncompressed tars, the first the bottom one) to w.
func WriteLayers(w io.Writer, ref, arch string, cfg Config, layerFiles []string) error {
	var layers []blob
	for _, f := range layerFiles {
		b, err := fileBlob(mediaLayer, f)
		if err != nil {
			return err
		}
		layers = append(layers, b)
	}
	return writeArchive(w, ref, arch, cfg, layers)
}

func writeArchive(w io.Writer, ref, arch string, cfg Config, layers []blob) error {
	diffIDs := make([]string, len(layers))
	descs := make([]Descriptor, len(layers))
	for i, l := range layers {
		diffIDs[i], descs[i] = l.desc.Digest, l.desc
	}
	runCfg := map[string]any{"User": cfg.User, "Env": cfg.Env}
	if cfg.Entrypoint != nil {
		runCfg["Entrypoint"] = cfg.Entrypoint
	}
	if cfg.Cmd != nil {
		runCfg["Cmd"] = cfg.Cmd
	}
	if cfg.WorkingDir != "" {
		runCfg["WorkingDir"] = cfg.WorkingDir
	}
	config, err := jsonBlob(mediaConfig, map[string]any{
		"architecture": arch, "os": "linux", "created": epoch.Format(time.RFC3339),
		"config": runCfg,
		"rootfs": map[string]any{"type": "layers", "diff_ids": diffIDs},
	})
	if err != nil {
		return err
	}
	manifest, err := jsonBlob(mediaManifest, map[string]any{"schemaVersion": 2, "mediaType": mediaManifest,
		"config": config.desc, "layers": descs})
	if err != nil {
		return err
	}
	named := manifest.desc
	named.Annotations = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": mediaIndex, "manifests": []Descriptor{named}})
	if err != nil {
		return err
	}
	layerPaths := make([]string, len(layers))
	for i, l := range layers {
		layerPaths[i] = l.path()
	}
	docker, err := json.Marshal([]map[string]any{{"Config": config.path(), "RepoTags": []string{ref}, "Layers": layerPaths}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := writeFile(tw, "oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, b := range append(append([]blob{}, layers...), config, manifest) {
		if seen[b.desc.Digest] {
			continue // two identical layers are one blob
		}
		seen[b.desc.Digest] = true
		if err := b.writeTo(tw); err != nil {
			return err
		}
	}
	if err := writeFile(tw, "index.json", index); err != nil {
		return err
	}
	if err := writeFile(tw, "manifest.json", docker); err != nil {
		return err
	}
	return tw.Close()
}

func writeFile(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// DirLayer writes to w a layer of the trees under each source folder, at the
// path in the image its key names ("/opt/app" -> "./src"): folders 0755 and
// files with their own permission bits, all owned by root, every time the
// epoch, in path order, so that the same trees make the same layer. skip
// leaves out entries (by base name and whether a folder) and what is under
// them. The parents of each image path are in the layer too.
func DirLayer(w io.Writer, trees map[string]string, skip func(name string, dir bool) bool) error {
	tw := tar.NewWriter(w)
	written := map[string]bool{}
	dir := func(name string) error {
		if name == "" || written[name] {
			return nil
		}
		written[name] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
	}
	dsts := make([]string, 0, len(trees))
	for d := range trees {
		dsts = append(dsts, d)
	}
	slices.Sort(dsts)
	for _, dst := range dsts {
		root := strings.Trim(path.Clean(dst), "/")
		parts := strings.Split(root, "/")
		for i := 1; i < len(parts); i++ {
			if err := dir(strings.Join(parts[:i], "/")); err != nil {
				return err
			}
		}
		src := trees[dst]
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != src && skip != nil && skip(d.Name(), d.IsDir()) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			name := path.Join(root, filepath.ToSlash(rel))
			switch {
			case d.IsDir():
				return dir(name)
			case d.Type().IsRegular():
				info, err := d.Info()
				if err != nil {
					return err
				}
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(info.Mode().Perm()), Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
					return err
				}
				_, err = tw.Write(data)
				return err
			default:
				return nil // links and devices: the trees here have none
			}
		})
		if err != nil {
			return fmt.Errorf("writing %s into the layer at /%s: %w", src, root, err)
		}
	}
	return tw.Close()
}
