package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/protection"
	"github.com/nereid-ml/nereid/test/framework"
)

// A Dataset a running job names is protected as a Model is: its delete
// waits, Terminating, with DeletionBlocked naming the job, and the job runs
// on, its phase what its pods do. Should the Dataset go all the same (its
// finalizer removed by hand), the job says the reference is missing but
// does not call its running workers Pending.
func TestDatasetNamedByARunningJobWaitsAndTheJobRunsOn(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	applyFederatedExample(t, ns)
	datasets := framework.SednaClient(t).SednaV1alpha1().Datasets(ns)
	const name = "edge0-surface-defect-detection-dataset"
	framework.Eventually(t, 30*time.Second, "the dataset protected", func(ctx context.Context) (bool, error) {
		d, err := datasets.Get(ctx, name, metav1.GetOptions{})
		return err == nil && slices.Contains(d.Finalizers, protection.DatasetFinalizer), err
	})

	if err := datasets.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the deletion blocked, naming the job", func(ctx context.Context) (bool, error) {
		d, err := datasets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(d.Status.Conditions, protection.ConditionDeletionBlocked)
		return d.DeletionTimestamp != nil && c != nil && c.Status == metav1.ConditionTrue &&
			strings.Contains(c.Message, "FederatedLearningJob "+ns+"/"+flJob), nil
	})
	job := waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
	if job.Status.Active != 3 {
		t.Errorf("while its dataset waits: active %d, want 3", job.Status.Active)
	}

	// Forced away: the job's next sync sees it missing.
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	if out, err := framework.Kubectl(t, "patch", "-n", ns, "dataset", name, "--type=json",
		"-p", `[{"op":"remove","path":"/metadata/finalizers"}]`); err != nil {
		t.Fatalf("removing the finalizer: %v\n%s", err, out)
	}
	framework.Eventually(t, 30*time.Second, "the job saying its dataset is missing", func(ctx context.Context) (bool, error) {
		j, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := common.FindJobCondition(j.Status.Conditions, common.ConditionReferencesResolved)
		return c != nil && c.Reason == "MissingReference", nil
	})
	framework.WaitForSyncAfter(t, synced)
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(t.Context(), flJob, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status.Phase != sednav1.FLJobRunning || job.Status.Active != 3 {
		t.Errorf("its dataset gone, the job with 3 running pods reads phase %s, active %d; want Running, 3", job.Status.Phase, job.Status.Active)
	}

	// The other dataset goes with the job.
	if err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Delete(t.Context(), flJob, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := datasets.Delete(t.Context(), "edge1-surface-defect-detection-dataset", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the other dataset gone with the job", func(ctx context.Context) (bool, error) {
		_, err := datasets.Get(ctx, "edge1-surface-defect-detection-dataset", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
