package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/test/framework"
)

// datasetOn creates a Dataset of ns on node.
func datasetOn(t *testing.T, ns, name, node string) *sednav1.Dataset {
	t.Helper()
	d, err := sednaClient(t).SednaV1alpha1().Datasets(ns).Create(t.Context(), &sednav1.Dataset{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       sednav1.DatasetSpec{URL: "/data/" + name + ".txt", Format: "txt", NodeName: node},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitForDatasetLink waits until the Dataset's EdgeLinked condition has
// reason and a message that contains want.
func waitForDatasetLink(t *testing.T, ns, name, reason, want string, within time.Duration) {
	t.Helper()
	framework.Eventually(t, within, fmt.Sprintf("Dataset %s to say %s (%s)", name, reason, want), func(ctx context.Context) (bool, error) {
		d, err := sednaClient(t).SednaV1alpha1().Datasets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(d.Status.Conditions, edgehub.ConditionEdgeLinked)
		return c != nil && c.Reason == reason && strings.Contains(c.Message, want), nil
	})
}

// TestWorkWhereNoLocalControllerServesSaysWhyWithinSeconds is Sedna's own
// lifelong learning sample with its Dataset on a cloud node, where Sedna
// runs a LocalController and Nereid's chart by default does not: the
// Dataset and the job say which node and why within 10 s, with a Warning;
// so does a Dataset on a node that does not exist.
func TestWorkWhereNoLocalControllerServesSaysWhyWithinSeconds(t *testing.T) {
	dir := framework.SednaCompat(t)
	ns := framework.Namespace(t)
	framework.StartGlobalManagerWithEdgeHub(t, ns)

	sample := framework.ReadManifest(t, filepath.Join(dir, "samples", "lifelonglearningjobv1alpha1.yaml"), "LifelongLearningJob")
	job := &sednav1.LifelongLearningJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sample.Object, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace = ns
	// The sample's workers and Dataset on the cluster's cloud node.
	for _, tmpl := range job.PodTemplates() {
		tmpl.Spec.NodeName = "cloud-0"
	}
	datasetOn(t, ns, job.Spec.Dataset.Name, "cloud-0")
	datasetOn(t, ns, "nowhere", "no-such-node")
	if _, err := sednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForDatasetLink(t, ns, job.Spec.Dataset.Name, edgehub.ReasonNoLocalController, "node cloud-0 runs no LocalController", 10*time.Second)
	waitForDatasetLink(t, ns, "nowhere", edgehub.ReasonNoSuchNode, "no node no-such-node exists", 10*time.Second)
	framework.Eventually(t, 10*time.Second, "the job to say its Dataset's node has no LocalController", func(ctx context.Context) (bool, error) {
		j, err := sednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := common.FindJobCondition(j.Status.JobConditions, edgehub.ConditionEdgeLinked)
		return c != nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "cloud-0"), nil
	})
	d, err := sednaClient(t).SednaV1alpha1().Datasets(ns).Get(t.Context(), job.Spec.Dataset.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 10*time.Second, "a Warning event naming the node", func(context.Context) (bool, error) {
		return countEvents(t, ns, d.UID, edgehub.ReasonNoLocalController, "cloud-0") > 0, nil
	})
	// kubectl get shows it.
	out, err := framework.Kubectl(t, "get", "-n", ns, "datasets", job.Spec.Dataset.Name)
	if err != nil || !strings.Contains(out, "EDGE") || !strings.Contains(out, edgehub.ReasonNoLocalController) {
		t.Errorf("kubectl get datasets: %v\n%s\nwant an EDGE column saying %s", err, out, edgehub.ReasonNoLocalController)
	}
}

// TestAJobWhoseEdgeLinkIsDownSaysSoAndRecovers stops the LocalController of
// the node a federated learning job's Dataset and training worker are on:
// the job and the Dataset say the link is down, naming the node and since
// when, and go back once it reconnects.
func TestAJobWhoseEdgeLinkIsDownSaysSoAndRecovers(t *testing.T) {
	ns, _, lc, _ := reportingWorker(t)
	jobLink := func(ctx context.Context) (*sednav1.JobCondition, error) {
		j, err := sednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return common.FindJobCondition(j.Status.Conditions, edgehub.ConditionEdgeLinked), nil
	}
	lc.Stop(t)
	stopped := time.Now()
	// Within the Lease's duration: the hub waits a heartbeat for a
	// LocalController that restarts, then scans every 2 s.
	framework.Eventually(t, 40*time.Second, "the job to say edge-0's link is down", func(ctx context.Context) (bool, error) {
		c, err := jobLink(ctx)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == edgehub.ReasonLinkDown &&
			strings.Contains(c.Message, "edge node edge-0 is down since"), err
	})
	t.Logf("the link condition came %s after the LocalController stopped", time.Since(stopped).Round(time.Second))
	out, err := framework.Kubectl(t, "get", "-n", ns, "federatedlearningjobs", flJob)
	if err != nil || !strings.Contains(out, edgehub.ReasonLinkDown) {
		t.Errorf("kubectl get federatedlearningjobs: %v\n%s\nwant its EDGE column to say %s", err, out, edgehub.ReasonLinkDown)
	}
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 40*time.Second, "the job to say its nodes are linked again", func(ctx context.Context) (bool, error) {
		c, err := jobLink(ctx)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == edgehub.ReasonLinked, err
	})
}
