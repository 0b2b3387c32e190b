package nodefs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	cases := map[string]struct {
		root, url string
		want      string
		wantErr   string
	}{
		"a node path under /":         {root: "/", url: "/data/x.txt", want: "/data/x.txt"},
		"a node path under a folder":  {root: "/tmp/nodes/edge-0", url: "/data/x.txt", want: "/tmp/nodes/edge-0/data/x.txt"},
		"an empty root is /":          {root: "", url: "/data/x.txt", want: "/data/x.txt"},
		".. that stays on the node":   {root: "/r", url: "/data/../models/m", want: "/r/models/m"},
		"a trailing slash":            {root: "/r", url: "/output/", want: "/r/output"},
		"s3":                          {root: "/r", url: "s3://bucket/x.txt", wantErr: "not a node path"},
		"relative":                    {root: "/r", url: "data/x.txt", wantErr: "not a node path"},
		"empty":                       {root: "/r", url: "", wantErr: "not a node path"},
		".. above the root":           {root: "/r", url: "/../etc/passwd", wantErr: "climbs above"},
		".. above the root, later on": {root: "/r", url: "/data/../../etc/passwd", wantErr: "climbs above"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Resolve(tc.root, tc.url)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve(%q, %q) = %q, %v; want an error containing %q", tc.root, tc.url, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Resolve(%q, %q) = %q, %v; want %q", tc.root, tc.url, got, err, tc.want)
			}
		})
	}
}

func TestWriteFileReplacesWholeAndLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "f.txt")
	for _, content := range []string{"first\n", "second, longer\n"} {
		if err := WriteFile(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Errorf("read %q, %v; want %q", got, err, content)
		}
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only f.txt: %v", len(entries), entries)
	}
}

func TestCopyFileKeepsContentAndMode(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("model"), 0o640); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "out", "dst")
	if err := CopyFile(dst, src); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	if got, _ := os.ReadFile(dst); string(got) != "model" {
		t.Errorf("content %q, want %q", got, "model")
	}
	if err := CopyFile(filepath.Join(dir, "x"), filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("copying a missing file: %v, want not-exist", err)
	}
}

func TestNodePathUndoesResolve(t *testing.T) {
	for _, root := range []string{"/", "", "/tmp/nodes/edge-0"} {
		for _, url := range []string{"/", "/data/x.txt", "/output/round-1/data", "/.hidden/x"} {
			p, err := Resolve(root, url)
			if err != nil {
				t.Fatal(err)
			}
			if got := NodePath(root, p); got != url {
				t.Errorf("NodePath(%q, %q) = %q, want %q", root, p, got, url)
			}
		}
	}
	if got := NodePath("/tmp/nodes/edge-0", "/etc/passwd"); got != "/etc/passwd" {
		t.Errorf("a path outside the root became %q", got)
	}
}
