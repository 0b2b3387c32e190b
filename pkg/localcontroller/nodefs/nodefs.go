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
	"path"
	"path/filepath"
	"strings"
)

// Root is the edge node's filesystem as the LocalController sees it.
type Root struct {
	// Dir is where the node's "/" is: "/" (or "") on the node itself, the
	// node's folder in the local control plane, the host mount in a Pod.
	Dir string
	// Allowed are the node paths under which Dataset, Model and outputDir
	// URLs may be (the LocalController's --allowed-paths). Empty allows every
	// path, as Sedna does: a job's author then reads and writes any file of
	// the node the LocalController can.
	Allowed []string
}

// Resolve returns where the node path url is under r.Dir. It refuses a URL
// that is not a node path (s3://bucket/x, a relative path), one whose ".."
// elements climb above the node's "/", and, with r.Allowed set, one outside
// every allowed path, whether by its name or through a symbolic link on the
// node (the deepest part of the path that exists must lie under an allowed
// path too, once its links are followed).
func (r Root) Resolve(url string) (string, error) {
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
	dir := r.Dir
	if dir == "" {
		dir = "/"
	}
	resolved := filepath.Join(dir, filepath.FromSlash(url))
	if len(r.Allowed) == 0 {
		return resolved, nil
	}
	if !r.allows(path.Clean(url)) {
		return "", fmt.Errorf("URL %q is outside the node paths this LocalController may use (--allowed-paths %s)", url, strings.Join(r.Allowed, ","))
	}
	// Follow the links of what exists of the path: a link under an allowed
	// path must not lead out of it.
	existing := resolved
	for {
		if _, err := os.Lstat(existing); err == nil {
			break
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			break
		}
		existing = parent
	}
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", fmt.Errorf("URL %q: %w", url, err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("the node root %s: %w", dir, err)
	}
	rel, err := filepath.Rel(realDir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("URL %q leads out of the node's filesystem through a link", url)
	}
	// Where a link took the path elsewhere, it must be to an allowed path; a
	// path without links is the URL's own (an ancestor of it, where the rest
	// does not exist yet), which is allowed.
	if target := NodePath(realDir, real); target != NodePath(dir, existing) && !r.allows(target) {
		return "", fmt.Errorf("URL %q leads through a link to %s, outside the node paths this LocalController may use (--allowed-paths %s)",
			url, target, strings.Join(r.Allowed, ","))
	}
	return resolved, nil
}

// allows says whether the clean node path p is one of r.Allowed or under one.
func (r Root) allows(p string) bool {
	for _, a := range r.Allowed {
		a = path.Clean(a)
		if a == "/" || p == a || strings.HasPrefix(p, a+"/") {
			return true
		}
	}
	return false
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
