package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

// writeDatasets writes, for each Dataset of the manifest file, a small
// index file at its URL on its node (the node's root folder under outDir,
// as make local-up made it), so the example's Datasets are readable from
// the first run: a Dataset whose index file is missing is Readable=False
// and says so on its jobs.
func writeDatasets(outDir, manifest string, samples int) error {
	f, err := os.Open(manifest)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var ds sednav1.Dataset
		if err := dec.Decode(&ds); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading %s: %w", manifest, err)
		}
		if ds.Kind != "Dataset" || ds.Spec.URL == "" {
			continue
		}
		root := filepath.Join(outDir, "edge", ds.Spec.NodeName, "root")
		if _, err := os.Stat(root); err != nil {
			return fmt.Errorf("no node root for %s at %s: run make local-up first", ds.Spec.NodeName, root)
		}
		path := filepath.Join(root, ds.Spec.URL)
		if _, err := os.Stat(path); err == nil {
			continue // kept from an earlier run
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		var b []byte
		if ds.Spec.Format == "csv" {
			b = append(b, "sample,label\n"...)
		}
		for i := 1; i <= samples; i++ {
			b = fmt.Appendf(b, "images/%06d.jpg labels/%06d.txt\n", i, i)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		say("dataset %s on %s: %d samples (under %s)", ds.Name, ds.Spec.NodeName, samples, root)
	}
}
