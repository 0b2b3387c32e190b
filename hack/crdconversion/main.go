// Command crdconversion adds to the DIJob CRD, which serves v1alpha1 and
// v2alpha1, the conversion stanza controller-gen does not write: strategy
// Webhook, ConversionReview v1, and a clientConfig naming the Service of the
// plain manifests (build/deploy/nereid.yaml: release nereid in
// nereid-system). The GlobalManager rewrites the clientConfig (its Service
// or URL, and the CA bundle of the certificate it serves) when it starts, so
// a release of another name or namespace needs no edit of the CRD.
//
// Usage: go run ./hack/crdconversion <dir of CRD YAML files>; the DIJob CRD
// in it is rewritten.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nereid-ml/nereid/hack/internal/crdfile"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
)

// The CRD and the webhook it names by default.
const (
	crdFile          = "diengine.opendilab.org_dijobs.yaml"
	defaultNamespace = "nereid-system"
	defaultService   = "nereid-dijob-conversion"
	defaultPort      = 443
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdconversion <dir of CRD YAML files>")
		os.Exit(2)
	}
	if err := addConversion(filepath.Join(os.Args[1], crdFile)); err != nil {
		fmt.Fprintln(os.Stderr, "crdconversion:", err)
		os.Exit(1)
	}
}

func addConversion(path string) error {
	return crdfile.Edit(path, func(crd map[string]any) error {
		spec, ok := crd["spec"].(map[string]any)
		if !ok {
			return fmt.Errorf("no spec")
		}
		if versions, _ := spec["versions"].([]any); len(versions) < 2 {
			return fmt.Errorf("%d versions; a conversion webhook needs two", len(versions))
		}
		spec["conversion"] = map[string]any{
			"strategy": "Webhook",
			"webhook": map[string]any{
				"conversionReviewVersions": []any{"v1"},
				"clientConfig": map[string]any{
					"service": map[string]any{
						"namespace": defaultNamespace,
						"name":      defaultService,
						"path":      conversion.Path,
						"port":      defaultPort,
					},
				},
			},
		}
		return nil
	})
}
