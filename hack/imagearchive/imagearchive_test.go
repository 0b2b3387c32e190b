package imagearchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// readTar is every regular file of an archive by name, and each entry's header.
func readTar(t *testing.T, data []byte) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files, headers := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, headers
		} else if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// blobOf is the blob of d in the archive's files, its digest checked.
func blobOf(t *testing.T, files map[string][]byte, d Descriptor) []byte {
	t.Helper()
	data, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		t.Fatalf("no blob %s in the archive", d.Digest)
	}
	sum := sha256.Sum256(data)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s holds %s, %d bytes (descriptor says %d)", d.Digest, got, len(data), d.Size)
	}
	return data
}

func write(t *testing.T, img Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestArchiveIsAnImageBothLayoutsAgreeOn: the OCI layout names the image
// and leads, digests checked, to a config whose diff ID is the layer's and
// whose entrypoint and user are the binary's and nonroot's; the docker
// manifest points at the same blobs under the same name; the layer holds
// the binary (executable), nonroot's passwd and group lines and home; the
// same image writes the same bytes.
func TestArchiveIsAnImageBothLayoutsAgreeOn(t *testing.T) {
	img := Image{Ref: "ghcr.io/nereid-ml/nereid-globalmanager:v0.1.0", Name: "globalmanager",
		Binary: []byte("\x7fELF not really"), User: "65532:65532", Arch: "amd64"}
	data := write(t, img)
	files, _ := readTar(t, data)
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %q", files["oci-layout"])
	}
	var index struct{ Manifests []Descriptor }
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	if m := index.Manifests[0]; m.MediaType != mediaManifest || m.Annotations["io.containerd.image.name"] != img.Ref ||
		m.Annotations["org.opencontainers.image.ref.name"] != img.Ref {
		t.Errorf("the index's manifest %+v, want the image named %s", m, img.Ref)
	}
	var manifest struct {
		Config Descriptor
		Layers []Descriptor
	}
	if err := json.Unmarshal(blobOf(t, files, index.Manifests[0]), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v, %d layers", err, len(manifest.Layers))
	}
	var config struct {
		Architecture, OS string
		Config           struct {
			User       string
			Entrypoint []string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(blobOf(t, files, manifest.Config), &config); err != nil {
		t.Fatal(err)
	}
	layer := manifest.Layers[0]
	if config.Architecture != "amd64" || config.OS != "linux" || config.Config.User != "65532:65532" ||
		strings.Join(config.Config.Entrypoint, " ") != "/globalmanager" || len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != layer.Digest {
		t.Errorf("config %+v, want linux/amd64, user 65532:65532, entrypoint /globalmanager, diff ID %s", config, layer.Digest)
	}
	var docker []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &docker); err != nil || len(docker) != 1 {
		t.Fatalf("manifest.json %s: %v", files["manifest.json"], err)
	}
	if d := docker[0]; d.Config != "blobs/sha256/"+strings.TrimPrefix(manifest.Config.Digest, "sha256:") ||
		len(d.Layers) != 1 || d.Layers[0] != "blobs/sha256/"+strings.TrimPrefix(layer.Digest, "sha256:") ||
		len(d.RepoTags) != 1 || d.RepoTags[0] != img.Ref {
		t.Errorf("manifest.json %+v does not name the OCI layout's blobs and image", d)
	}
	content, headers := readTar(t, blobOf(t, files, layer))
	if h := headers["globalmanager"]; h == nil || h.Mode != 0o755 || string(content["globalmanager"]) != string(img.Binary) {
		t.Errorf("the layer's /globalmanager %+v, want the binary, mode 0755", h)
	}
	if !strings.Contains(string(content["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(content["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("passwd %q, group %q: want nonroot as 65532", content["etc/passwd"], content["etc/group"])
	}
	if h := headers["home/nonroot/"]; h == nil || h.Uid != 65532 || h.Typeflag != tar.TypeDir {
		t.Errorf("home/nonroot/ %+v, want a folder of 65532", h)
	}
	if h := headers["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ %+v, want mode 1777", h)
	}
	if !bytes.Equal(write(t, img), data) {
		t.Error("the same image wrote different bytes")
	}
}
