// Package crdfile edits the CRD YAML files controller-gen writes, for the
// steps of hack/update-codegen.sh that finish them (hack/crddesc,
// hack/crdconversion).
package crdfile

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// Edit reads the CRD at path, lets edit change it, and writes it back as
// a YAML document.
func Edit(path string, edit func(crd map[string]any) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := edit(crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}
