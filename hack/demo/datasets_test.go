package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The federated example's Datasets get their index files on their nodes,
// so make demo's Datasets are readable from its first run.
func TestTheFederatedExamplesDatasetsAreWrittenOnTheirNodes(t *testing.T) {
	out := t.TempDir()
	for _, n := range []string{"edge-0", "edge-1"} {
		if err := os.MkdirAll(filepath.Join(out, "edge", n, "root"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeDatasets(out, "../../examples/federatedlearningjob/00-datasets.yaml", 5); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"edge/edge-0/root/data/surface-defect/1.txt", "edge/edge-1/root/data/surface-defect/2.txt"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || strings.Count(string(b), "\n") != 5 {
			t.Errorf("%s: %v, %q; want 5 samples", f, err, b)
		}
	}
}
