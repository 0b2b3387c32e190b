package localrun

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/test/framework"
)

// TestADatasetOnTheCloudNodeIsCountedWhereLocalControllersRunEverywhere is
// Sedna's lifelong learning example's placement, its Dataset on a cloud
// node, on a local run whose LocalControllers run on every node: cloud-0's
// LocalController counts it, and nothing says a LocalController is missing.
func TestADatasetOnTheCloudNodeIsCountedWhereLocalControllersRunEverywhere(t *testing.T) {
	ns := framework.Namespace(t)
	// cloud-0's node root, as its LocalController sees it.
	file := filepath.Join(framework.OutDir(), "edge", "cloud-0", "root", "data", ns+"-atcii.csv")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("a,b\n1,2\n3,4\n5,6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	client, err := sednaclient.NewForConfig(framework.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.SednaV1alpha1().Datasets(ns).Create(t.Context(), &sednav1.Dataset{
		ObjectMeta: metav1.ObjectMeta{Name: "lifelong-dataset"},
		Spec:       sednav1.DatasetSpec{URL: "/data/" + ns + "-atcii.csv", Format: "csv", NodeName: "cloud-0"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "cloud-0's LocalController to count the Dataset", func(ctx context.Context) (bool, error) {
		d, err := client.SednaV1alpha1().Datasets(ns).Get(ctx, "lifelong-dataset", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if c := apimeta.FindStatusCondition(d.Status.Conditions, edgehub.ConditionEdgeLinked); c != nil {
			t.Fatalf("the Dataset says %s: %s", c.Reason, c.Message)
		}
		return d.Status.NumberOfSamples == 3, nil
	})
}
