package integration

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/protection"
	"github.com/nereid-ml/nereid/test/framework"
)

func TestModelNamedByAJobWaitsForItToGoBeforeItIsDeleted(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	applyExampleFiles(t, ns, "incrementallearningjob", "01-models.yaml", "00-dataset.yaml", "10-incrementallearningjob.yaml")
	models := framework.SednaClient(t).SednaV1alpha1().Models(ns)
	framework.Eventually(t, 30*time.Second, "the deploy model protected", func(ctx context.Context) (bool, error) {
		m, err := models.Get(ctx, "deploy-model", metav1.GetOptions{})
		return err == nil && slices.Contains(m.Finalizers, protection.ModelFinalizer), err
	})

	synced := framework.ReadController(t, gm, protection.ModelName)
	if err := models.Delete(t.Context(), "deploy-model", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the deletion blocked, visibly", func(ctx context.Context) (bool, error) {
		m, err := models.Get(ctx, "deploy-model", metav1.GetOptions{})
		return err == nil && m.DeletionTimestamp != nil && apimeta.IsStatusConditionTrue(m.Status.Conditions, protection.ConditionDeletionBlocked), err
	})
	// Its condition written, the controller has synced the model again on
	// that write's event, and kept the finalizer.
	framework.WaitForSyncAfter(t, synced)
	m, err := models.Get(t.Context(), "deploy-model", metav1.GetOptions{})
	if err != nil || !slices.Contains(m.Finalizers, protection.ModelFinalizer) {
		t.Fatalf("the model while the job names it: %v, finalizers %v; want it there, protected", err, m.GetFinalizers())
	}

	if err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(ns).Delete(t.Context(), "helmet-detection-demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the model gone with the job", func(ctx context.Context) (bool, error) {
		_, err := models.Get(ctx, "deploy-model", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// A model no job names goes at once (the finalizer is removed).
	if err := models.Delete(t.Context(), "initial-model", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "an unnamed model deleted", func(ctx context.Context) (bool, error) {
		_, err := models.Get(ctx, "initial-model", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
