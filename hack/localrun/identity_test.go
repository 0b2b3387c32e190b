package localrun

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// plainManifests is build/deploy/nereid.yaml, from this package's folder.
var plainManifests = filepath.Join("..", "..", "build", "deploy", "nereid.yaml")

func TestTheGlobalManagerIdentityIsTheChartsRBACAndPolicy(t *testing.T) {
	rendered, err := ReadManifests(plainManifests)
	if err != nil {
		t.Fatal(err)
	}
	id := NewGlobalManagerIdentity(rendered)
	var got []string
	for _, obj := range id.Objects {
		got = append(got, obj.GetKind()+" "+qualifiedName(obj))
	}
	want := []string{
		"Namespace nereid-system",
		"ServiceAccount nereid-system/nereid-globalmanager",
		"ServiceAccount nereid-system/nereid-localcontroller",
		"ClusterRole nereid-system-nereid-globalmanager",
		"ClusterRoleBinding nereid-system-nereid-globalmanager",
		"Role nereid-system/nereid-globalmanager",
		"RoleBinding nereid-system/nereid-globalmanager",
		"ValidatingAdmissionPolicy nereid-system-nereid-globalmanager-owner-label",
		"ValidatingAdmissionPolicyBinding nereid-system-nereid-globalmanager-owner-label",
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the identity's objects (-want,+got):\n%s", diff)
	}
}

// TestTheIdentityIsMarkedAsTheReleases checks what lets the README's helm
// install take the local run's GlobalManager identity over: Helm's ownership
// annotations on every object the release makes, and on nothing else (the
// namespace, the Role copied into another namespace).
func TestTheIdentityIsMarkedAsTheReleases(t *testing.T) {
	rendered, err := ReadManifests(plainManifests)
	if err != nil {
		t.Fatal(err)
	}
	id := NewGlobalManagerIdentity(rendered)
	id.OwnedByRelease(Release, SystemNamespace)
	for _, obj := range append(id.Objects, id.RoleIn("nereid-local")...) {
		a := obj.GetAnnotations()
		marked := a[helmReleaseName] == Release && a[helmReleaseNamespace] == SystemNamespace
		wantMarked := obj.GetKind() != "Namespace" && obj.GetNamespace() != "nereid-local"
		if marked != wantMarked {
			t.Errorf("%s %s: marked as release %s's: %v, want %v (annotations %v)", obj.GetKind(), qualifiedName(obj), Release, marked, wantMarked, a)
		}
		if wantMarked && obj.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s %s lacks the label app.kubernetes.io/managed-by=Helm, without which helm refuses it", obj.GetKind(), qualifiedName(obj))
		}
	}
	var copied []string
	for _, obj := range id.RoleIn("nereid-local") {
		copied = append(copied, obj.GetKind()+" "+qualifiedName(obj))
	}
	if diff := cmp.Diff([]string{"Role nereid-local/nereid-globalmanager", "RoleBinding nereid-local/nereid-globalmanager"}, copied); diff != "" {
		t.Errorf("RoleIn (-want,+got):\n%s", diff)
	}
}
