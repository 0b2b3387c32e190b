// Package nodefs maps the node paths of Datasets, Models and outputDirs to
// files the LocalController can open, and writes files so that no reader ever
// sees one half written.
//
// A node path is what a Sedna user writes in a spec (/data/x.txt): a path on
// the edge node's filesystem. The LocalController sees that filesystem under
// its node root: "/" when it runs on the node itself, the node's folder in the
// local control plane.
package nodefs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Resolve returns where the node path url is under root. It refuses a URL
// that is not a node path (s3://bucket/x, a relative path) and one whose ".."
// elements climb above the node's "/", which would leave root.
func Resolve(root, url string) (string, error) {
	if !strings.HasPrefix(url, "/") {
		return "", fmt.Errorf("URL %q is not a node path: the LocalController reads only paths on its node, starting with /", url)
	}
	depth := 0
	for _, elem := range strings.Split(url, "/") {
		switch elem {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return "", fmt.Errorf("URL %q climbs above the node's root with ..", url)
			}
		default:
			depth++
		}
	}
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, filepath.FromSlash(url)), nil
}

// WriteFile writes data to path, creating its directory, through a temporary
// file renamed into place: a reader sees the old file or the new one, whole.
func WriteFile(path string, data []byte) error {
	return writeAtomic(path, 0o644, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// CopyFile copies the regular file src to dst as WriteFile writes, keeping
// src's permission bits.
func CopyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	return writeAtomic(dst, fi.Mode().Perm(), func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// writeAtomic creates path's directory, writes a hidden temporary file beside
// path with write, syncs it (the report saying the file is ready is synced
// too), and renames it to path.
func writeAtomic(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// NodePath is the node path of path, a path under root that Resolve returned:
// what a user would recognise in a message. A path outside root is returned
// as it is.
func NodePath(root, path string) string {
	if root == "" {
		root = "/"
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return path
	}
	if rel == "." {
		return "/"
	}
	return "/" + filepath.ToSlash(rel)
}
