package sednaswitch

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/nereid-ml/nereid/test/framework"
)

// runPreflight runs nereid-preflight against the test cluster and returns its
// output and exit code.
func runPreflight(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), framework.Binary(t, "nereid-preflight"), append([]string{"--kubeconfig", framework.KubeconfigPath()}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running nereid-preflight: %v", err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// TestPreflightListsObjectsNereidDoesNotServe runs nereid-preflight against
// Sedna's CRDs: an object of a kind Nereid does not serve (a ReidJob) is
// listed by kind, namespace and name and the exit status is 1; a running
// Sedna GlobalManager is named with the command that stops it; with both gone
// it exits 0 and counts the served kinds' objects.
func TestPreflightListsObjectsNereidDoesNotServe(t *testing.T) {
	compat := framework.SednaCompat(t)
	ctx := t.Context()
	ns := framework.Namespace(t)
	installSednaCRDs(t, compat)
	dyn, err := dynamic.NewForConfig(framework.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	datasets, _ := framework.SednaResource("Dataset")
	ds := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sedna.io/v1alpha1", "kind": "Dataset",
		"metadata": map[string]any{"name": "counted"},
		"spec":     map[string]any{"url": "/data/index.txt", "format": "txt", "nodeName": "edge-0"},
	}}
	if _, err := dyn.Resource(datasets).Namespace(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reid := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "sedna.io/v1alpha1", "kind": "ReidJob",
		"metadata": map[string]any{"name": "pedestrian-reid"},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "reid", "image": "kubeedge/sedna-example-multi-edge-inference-reid:v0.1.0"}},
		}}},
	}}
	reidGVR := schema.GroupVersionResource{Group: "sedna.io", Version: "v1alpha1", Resource: "reidjobs"}
	if _, err := dyn.Resource(reidGVR).Namespace(ns).Create(ctx, reid, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a ReidJob under Sedna's CRD: %v", err)
	}
	// Sedna's GlobalManager, still running, in a namespace of this test.
	gm := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "gm"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"sedna": "gm"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"sedna": "gm"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "gm", Image: "kubeedge/sedna-gm:v0.6.0"}}},
			},
		},
	}
	kube := framework.KubeClient(t)
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, gm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--namespace", ns, "--sedna-namespace", ns}

	out, code := runPreflight(t, flags...)
	for _, want := range []string{
		"ReidJob                  " + ns + "/pedestrian-reid (sedna.io/v1alpha1)",
		"Dataset                  1",
		"kubectl -n " + ns + " scale deployment gm --replicas=0",
		"Not ready to switch",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("nereid-preflight's output lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("nereid-preflight exited %d with an unserved object; want 1:\n%s", code, out)
	}

	if err := dyn.Resource(reidGVR).Namespace(ns).Delete(ctx, reid.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.AppsV1().Deployments(ns).Patch(ctx, "gm", "application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, waitLong, "nereid-preflight to say the cluster is ready", func(_ context.Context) (bool, error) {
		out, code = runPreflight(t, flags...)
		return code == 0, nil
	})
	if !strings.Contains(out, "Dataset                  1") || strings.Contains(out, "pedestrian-reid") || !strings.Contains(out, "Ready to switch") {
		t.Errorf("nereid-preflight once ready:\n%s", out)
	}

	help, code := runPreflight(t, "--help")
	for _, flag := range []string{"-kubeconfig", "-namespace", "-sedna-namespace", "-sedna-globalmanager", "-sedna-localcontroller", "-timeout", "Exit status"} {
		if !strings.Contains(help, flag) {
			t.Errorf("nereid-preflight --help does not explain %s:\n%s", flag, help)
		}
	}
	if code != 0 {
		t.Errorf("nereid-preflight --help exited %d", code)
	}
}
