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
			got, err := Root{Dir: tc.root}.Resolve(tc.url)
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

// With allowed paths, a URL elsewhere is refused, by its name or through a
// link that leads out of them; a path not created yet under an allowed one
// is fine.
func TestResolveKeepsToTheAllowedPaths(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"data", "etc", "output"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", "shadow"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A user's links inside an allowed path: to elsewhere, and to another
	// allowed path.
	if err := os.Symlink(filepath.Join(dir, "etc"), filepath.Join(dir, "data", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../etc/shadow", filepath.Join(dir, "data", "shadow")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "output"), filepath.Join(dir, "data", "out")); err != nil {
		t.Fatal(err)
	}
	r := Root{Dir: dir, Allowed: []string{"/data", "/output/"}}
	cases := map[string]string{ // url: the error wanted, "" for none
		"/data/x.txt":                "",
		"/data":                      "",
		"/output/round-1/train.txt":  "", // not created yet
		"/data/new/deeper/file":      "",
		"/data/out/round-2/x":        "", // a link to another allowed path
		"/etc/shadow":                "outside the node paths",
		"/database/x":                "outside the node paths",
		"/":                          "outside the node paths",
		"/data/../etc/shadow":        "outside the node paths",
		"/data/escape/shadow":        "through a link",
		"/data/shadow":               "through a link",
		"/data/escape/new/file.txt":  "through a link",
		"/data/escape/../data/x.txt": "", // lexically /data/x.txt
	}
	for url, wantErr := range cases {
		_, err := r.Resolve(url)
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("Resolve(%q): %v, want it allowed", url, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("Resolve(%q): %v, want an error containing %q", url, err, wantErr)
		}
	}
}

func TestNodePathUndoesResolve(t *testing.T) {
	for _, root := range []string{"/", "", "/tmp/nodes/edge-0"} {
		for _, url := range []string{"/", "/data/x.txt", "/output/round-1/data", "/.hidden/x"} {
			p, err := Root{Dir: root}.Resolve(url)
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
