package localrun

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// TestTheLocalRunsIdentityHasNoNameOfARelease: the identity the local run's
// GlobalManager runs as (the chart's, moved to Namespace) shares no name with
// the README's release in SystemNamespace, so helm install makes its own and
// helm uninstall removes only those; its ClusterRoleBinding and policy name
// its own ServiceAccount.
func TestTheLocalRunsIdentityHasNoNameOfARelease(t *testing.T) {
	rendered, err := ReadManifests(plainManifests)
	if err != nil {
		t.Fatal(err)
	}
	release := NewGlobalManagerIdentity(rendered)
	id, err := release.In(Namespace)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, obj := range release.Objects {
		names[obj.GetKind()+" "+qualifiedName(obj)] = true
	}
	var got []string
	for _, obj := range id.Objects {
		name := obj.GetKind() + " " + qualifiedName(obj)
		got = append(got, name)
		if names[name] {
			t.Errorf("%s is a name of the release's too", name)
		}
		js, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(js), SystemNamespace) {
			t.Errorf("%s still names %s: %s", name, SystemNamespace, js)
		}
	}
	want := []string{
		"Namespace nereid-local",
		"ServiceAccount nereid-local/nereid-globalmanager",
		"ServiceAccount nereid-local/nereid-localcontroller",
		"ClusterRole nereid-local-nereid-globalmanager",
		"ClusterRoleBinding nereid-local-nereid-globalmanager",
		"Role nereid-local/nereid-globalmanager",
		"RoleBinding nereid-local/nereid-globalmanager",
		"ValidatingAdmissionPolicy nereid-local-nereid-globalmanager-owner-label",
		"ValidatingAdmissionPolicyBinding nereid-local-nereid-globalmanager-owner-label",
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the local run's identity (-want,+got):\n%s", diff)
	}
	for _, obj := range id.Objects {
		if obj.GetKind() != "ClusterRoleBinding" {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(obj.Object, "subjects")
		if diff := cmp.Diff([]any{map[string]any{"kind": "ServiceAccount", "name": GlobalManagerServiceAccount, "namespace": Namespace}}, subjects); diff != "" {
			t.Errorf("the ClusterRoleBinding's subjects (-want,+got):\n%s", diff)
		}
	}
}

func TestRoleInCopiesTheRoleAndItsBinding(t *testing.T) {
	rendered, err := ReadManifests(plainManifests)
	if err != nil {
		t.Fatal(err)
	}
	var copied []string
	for _, obj := range NewGlobalManagerIdentity(rendered).RoleIn("nereid-local") {
		copied = append(copied, obj.GetKind()+" "+qualifiedName(obj))
	}
	if diff := cmp.Diff([]string{"Role nereid-local/nereid-globalmanager", "RoleBinding nereid-local/nereid-globalmanager"}, copied); diff != "" {
		t.Errorf("RoleIn (-want,+got):\n%s", diff)
	}
}
