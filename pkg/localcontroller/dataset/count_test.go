package dataset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeIndex(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "index")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCountAndSamples(t *testing.T) {
	cases := map[string]struct {
		content, format string
		wantHeader      string
		wantSamples     []string
	}{
		"txt":                      {content: "a.jpg 1\nb.jpg 0\n", format: "txt", wantSamples: []string{"a.jpg 1", "b.jpg 0"}},
		"txt without a last EOL":   {content: "a\nb", format: "txt", wantSamples: []string{"a", "b"}},
		"txt with blank lines":     {content: "\na\n\n   \n\t\nb\n\n", format: "txt", wantSamples: []string{"a", "b"}},
		"txt with CRLF":            {content: "a\r\nb\r\n\r\n", format: "txt", wantSamples: []string{"a", "b"}},
		"txt keeps inner spaces":   {content: "  a b  \n", format: "txt", wantSamples: []string{"  a b  "}},
		"empty txt":                {content: "", format: "txt"},
		"csv":                      {content: "x,y\n1,2\n3,4\n", format: "csv", wantHeader: "x,y", wantSamples: []string{"1,2", "3,4"}},
		"csv with blank rows":      {content: "x,y\n\n1,2\n  \n3,4\n\n", format: "csv", wantHeader: "x,y", wantSamples: []string{"1,2", "3,4"}},
		"csv of only a header":     {content: "x,y\n", format: "csv", wantHeader: "x,y"},
		"csv header after a blank": {content: "\nx,y\n1,2\n", format: "csv", wantHeader: "x,y", wantSamples: []string{"1,2"}},
		"empty csv":                {content: "", format: "csv"},
		"a long line":              {content: strings.Repeat("x", 200_000) + "\nb\n", format: "txt", wantSamples: []string{strings.Repeat("x", 200_000), "b"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeIndex(t, tc.content)
			header, samples, err := Samples(path, tc.format)
			if err != nil {
				t.Fatalf("Samples: %v", err)
			}
			if header != tc.wantHeader {
				t.Errorf("header %q, want %q", header, tc.wantHeader)
			}
			if diff := cmp.Diff(tc.wantSamples, samples); diff != "" {
				t.Errorf("samples (-want,+got):\n%s", diff)
			}
			n, err := Count(path, tc.format)
			if err != nil || int(n) != len(tc.wantSamples) {
				t.Errorf("Count = %d, %v; want %d", n, err, len(tc.wantSamples))
			}
		})
	}
}

func TestCountErrors(t *testing.T) {
	cases := map[string]struct {
		path, format string
		wantErr      string
	}{
		"missing file":   {path: "/nonexistent/x.txt", format: "txt", wantErr: "no such file or directory"},
		"a directory":    {path: os.TempDir(), format: "txt", wantErr: "is a directory"},
		"unknown format": {path: writeIndex(t, "a\n"), format: "json", wantErr: `unknown dataset format "json"`},
		"no format":      {path: writeIndex(t, "a\n"), format: "", wantErr: `unknown dataset format ""`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			n, err := Count(tc.path, tc.format)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Count = %d, %v; want an error containing %q", n, err, tc.wantErr)
			}
			if _, _, err := Samples(tc.path, tc.format); err == nil {
				t.Errorf("Samples accepted what Count refused")
			}
		})
	}
}
