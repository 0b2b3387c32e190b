// Command imagerefs prints the image each Nereid binary is built as, read
// from the Helm chart, the one place image names live: values.yaml gives the
// registry, repository and tag of each component's image, and an empty tag
// means the chart's appVersion (Chart.yaml), as the chart's templates say.
// `make images` (hack/images.sh) builds the images under these names.
//
// Usage: go run ./hack/imagerefs [-chart build/charts/nereid] [-registry <registry>]
//
// -registry names the images in another registry, as the chart names them
// with --set globalManager.image.registry=<registry> --set
// localController.image.registry=<registry>: where a user pushes them.
//
// It prints one line per binary: the binary's name (its cmd/ and Dockerfile
// name) and the image reference, for example
//
//	globalmanager ghcr.io/nereid-ml/nereid-globalmanager:v0.1.0
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// image is a component's image in values.yaml.
type image struct {
	Registry   string `json:"registry"`
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
}

type component struct {
	Image image `json:"image"`
}

// values is the part of values.yaml that names the images.
type values struct {
	GlobalManager   component `json:"globalManager"`
	LocalController component `json:"localController"`
}

// chart is the part of Chart.yaml that gives the default tag.
type chart struct {
	AppVersion string `json:"appVersion"`
}

// binaryImage is one binary and the image it is built as.
type binaryImage struct {
	Binary, Ref string
}

func main() {
	dir := flag.String("chart", "build/charts/nereid", "Directory of the Helm chart.")
	registry := flag.String("registry", "", "Registry of both images instead of values.yaml's (as the chart's globalManager.image.registry and localController.image.registry).")
	flag.Parse()
	refs, err := imageRefs(*dir, *registry)
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagerefs:", err)
		os.Exit(1)
	}
	for _, r := range refs {
		fmt.Println(r.Binary, r.Ref)
	}
}

// imageRefs reads the images of the chart in dir, in the order of the
// binaries: globalmanager, localcontroller; a registry that is not empty
// replaces values.yaml's.
func imageRefs(dir, registry string) ([]binaryImage, error) {
	var c chart
	if err := readYAML(filepath.Join(dir, "Chart.yaml"), &c); err != nil {
		return nil, err
	}
	var v values
	if err := readYAML(filepath.Join(dir, "values.yaml"), &v); err != nil {
		return nil, err
	}
	var out []binaryImage
	for _, b := range []struct {
		name string
		img  image
	}{{"globalmanager", v.GlobalManager.Image}, {"localcontroller", v.LocalController.Image}} {
		if registry != "" {
			b.img.Registry = registry
		}
		ref, err := b.img.ref(c.AppVersion)
		if err != nil {
			return nil, fmt.Errorf("the %s image in %s: %w", b.name, filepath.Join(dir, "values.yaml"), err)
		}
		out = append(out, binaryImage{Binary: b.name, Ref: ref})
	}
	return out, nil
}

// ref is the image reference as the chart's nereid.image template makes it.
func (i image) ref(appVersion string) (string, error) {
	tag := i.Tag
	if tag == "" {
		tag = appVersion
	}
	switch {
	case i.Repository == "":
		return "", fmt.Errorf("no repository")
	case tag == "":
		return "", fmt.Errorf("no tag and no appVersion in Chart.yaml")
	case i.Registry == "":
		return i.Repository + ":" + tag, nil
	}
	return i.Registry + "/" + i.Repository + ":" + tag, nil
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}
