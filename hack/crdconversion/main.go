// Command crdconversion adds to the DIJob CRD, which serves v1alpha1 and
// v2alpha1, the conversion stanza controller-gen does not write: strategy
// Webhook, ConversionReview v1, and a clientConfig naming the Service of the
// plain manifests (build/deploy/nereid.yaml: release nereid in
// nereid-system). The GlobalManager rewrites the clientConfig (its Service
// or URL, and the CA bundle of the certificate it serves) when it starts, so
// a release of another name or namespace needs no edit of the CRD.
//
// The clientConfig also says url: null. A GlobalManager with no Service
// (the local run's) points the CRD at a URL and drops the Service. Without
// the null, applying the file again merges: kubectl's client-side apply adds
// the file's Service and keeps the URL (it deletes only what the file sets
// to null or the last applied configuration held), server-side apply keeps
// the URL its manager set, and the API server refuses a webhook with both
// ("exactly one of url or service is required"). With it, a client-side
// apply puts the file's Service in the URL's place, and a server-side apply
// names the GlobalManager's url as a conflict, which --force-conflicts takes
// over; the GlobalManager points the CRD at itself again within
// conversion.RecheckPeriod.
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
					// Exactly one of url and service: see the package comment.
					"url": nil,
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
