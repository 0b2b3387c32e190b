package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/test/framework"
)

// datasetOn creates a Dataset of ns on node.
func datasetOn(t *testing.T, ns, name, node string) *sednav1.Dataset {
	t.Helper()
	d, err := framework.SednaClient(t).SednaV1alpha1().Datasets(ns).Create(t.Context(), &sednav1.Dataset{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       sednav1.DatasetSpec{URL: "/data/" + name + ".txt", Format: "txt", NodeName: node},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// lifelongSampleOn is Sedna's own lifelong learning sample in ns, named
// name, with its workers pinned to node and its Dataset (made here) on
// dataNode.
func lifelongSampleOn(t *testing.T, ns, name, node, dataNode string) *sednav1.LifelongLearningJob {
	t.Helper()
	sample := framework.ReadManifest(t, filepath.Join(framework.SednaCompat(t), "samples", "lifelonglearningjobv1alpha1.yaml"), "LifelongLearningJob")
	job := &sednav1.LifelongLearningJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sample.Object, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace, job.Name = ns, name
	job.Spec.Dataset.Name = name + "-data"
	for _, tmpl := range job.PodTemplates() {
		tmpl.Spec.NodeName = node
	}
	datasetOn(t, ns, job.Spec.Dataset.Name, dataNode)
	return job
}

// jobLinkSays is a check that a lifelong learning job's EdgeLinked
// condition is False with reason and a message containing want.
func jobLinkSays(t *testing.T, ns, name, reason, want string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		j, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := common.FindJobCondition(j.Status.JobConditions, edgehub.ConditionEdgeLinked)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == reason && strings.Contains(c.Message, want), nil
	}
}

// datasetLinkSays is a check that a Dataset's EdgeLinked condition has
// reason and a message containing want.
func datasetLinkSays(t *testing.T, ns, name, reason, want string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		d, err := framework.SednaClient(t).SednaV1alpha1().Datasets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := apimeta.FindStatusCondition(d.Status.Conditions, edgehub.ConditionEdgeLinked)
		return c != nil && c.Reason == reason && strings.Contains(c.Message, want), nil
	}
}

// warned is a check that the object of uid has a Warning event of reason
// whose message names name.
func warned(t *testing.T, ns string, uid types.UID, reason, name string) func(ctx context.Context) (bool, error) {
	return func(context.Context) (bool, error) {
		for _, e := range framework.Events(t, ns, uid) {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Message, name) {
				return true, nil
			}
		}
		return false, nil
	}
}

// allOf is a check that every one of checks holds.
func allOf(checks ...func(ctx context.Context) (bool, error)) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		for _, c := range checks {
			if ok, err := c(ctx); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	}
}

// TestWorkWhereNoLocalControllerServesSaysWhyWithinSeconds is Sedna's own
// lifelong learning sample with its Dataset on a cloud node, where Sedna
// runs a LocalController and Nereid's chart by default does not: the
// Dataset and the job say which node and why within 10 s of their
// creation, each with a Warning; so do a Dataset on a node that does not
// exist and a job pinned to one.
func TestWorkWhereNoLocalControllerServesSaysWhyWithinSeconds(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManagerWithEdgeHub(t, ns)

	job := lifelongSampleOn(t, ns, "on-cloud", "cloud-0", "cloud-0")
	nowhere := lifelongSampleOn(t, ns, "pinned-nowhere", "no-such-node", "edge-0")
	created := time.Now()
	lonely := datasetOn(t, ns, "nowhere", "no-such-node")
	for _, j := range []*sednav1.LifelongLearningJob{job, nowhere} {
		if _, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 10*time.Second, "the Datasets and jobs to say which node and why", allOf(
		datasetLinkSays(t, ns, job.Spec.Dataset.Name, edgehub.ReasonNoLocalController, "node cloud-0 runs no LocalController"),
		datasetLinkSays(t, ns, "nowhere", edgehub.ReasonNoSuchNode, "no node no-such-node exists"),
		jobLinkSays(t, ns, job.Name, edgehub.ReasonNoLocalController, "node cloud-0 runs no LocalController"),
		jobLinkSays(t, ns, nowhere.Name, edgehub.ReasonNoSuchNode, "no node no-such-node exists"),
	))
	if took := time.Since(created); took > 10*time.Second {
		t.Errorf("the conditions came %s after the objects were made, want at most 10 s", took)
	}
	uid := func(get func(ctx context.Context) (metav1.Object, error)) types.UID {
		o, err := get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return o.GetUID()
	}
	d := uid(func(ctx context.Context) (metav1.Object, error) {
		return framework.SednaClient(t).SednaV1alpha1().Datasets(ns).Get(ctx, job.Spec.Dataset.Name, metav1.GetOptions{})
	})
	jobUID := uid(func(ctx context.Context) (metav1.Object, error) {
		return framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
	})
	nowhereUID := uid(func(ctx context.Context) (metav1.Object, error) {
		return framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Get(ctx, nowhere.Name, metav1.GetOptions{})
	})
	framework.Eventually(t, 5*time.Second, "a Warning event on each, naming the node", allOf(
		warned(t, ns, d, edgehub.ReasonNoLocalController, "cloud-0"),
		warned(t, ns, lonely.UID, edgehub.ReasonNoSuchNode, "no-such-node"),
		warned(t, ns, jobUID, edgehub.ReasonNoLocalController, "cloud-0"),
		warned(t, ns, nowhereUID, edgehub.ReasonNoSuchNode, "no-such-node"),
	))
	// kubectl get shows it.
	out, err := framework.Kubectl(t, "get", "-n", ns, "datasets", job.Spec.Dataset.Name)
	if err != nil || !strings.Contains(out, "EDGE") || !strings.Contains(out, edgehub.ReasonNoLocalController) {
		t.Errorf("kubectl get datasets: %v\n%s\nwant an EDGE column saying %s", err, out, edgehub.ReasonNoLocalController)
	}
}

// TestWorkOnAnEdgeNodeWithoutItsLocalControllerSaysSo: a job made while
// the link of the edge node it is pinned to is down says LinkDown within
// seconds instead of going Running silently; a Dataset on that node says
// so once the link has been down as long as a Lease lasts; a Dataset on an
// edge node no LocalController ever connected from says that.
func TestWorkOnAnEdgeNodeWithoutItsLocalControllerSaysSo(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	hubStarted := time.Now()
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	kube := framework.KubeClient(t)
	link := func(want string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			l, err := kube.CoordinationV1().Leases(ns).Get(ctx, links.LeaseName("edge-0"), metav1.GetOptions{})
			return err == nil && l.Annotations[links.AnnotationLink] == want, nil
		}
	}
	framework.Eventually(t, 30*time.Second, "edge-0's link up", link(links.LinkConnected))
	lc.Stop(t)
	stopped := time.Now()
	framework.Eventually(t, 30*time.Second, "edge-0's link down", link(links.LinkDisconnected))

	job := lifelongSampleOn(t, ns, "on-edge-0", "edge-0", "edge-0")
	datasetOn(t, ns, "on-edge-1", "edge-1")
	created := time.Now()
	if _, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the new job to say edge-0's link is down",
		jobLinkSays(t, ns, job.Name, edgehub.ReasonLinkDown, "edge node edge-0 is down since"))
	// The hub forgives a LocalController a heartbeat (10 s) to come back.
	if took := time.Since(later(created, stopped.Add(10*time.Second))); took > 10*time.Second {
		t.Errorf("the job said its link is down %s after it was made (and a heartbeat after the link went down), want at most 10 s", took)
	}
	j, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 5*time.Second, "a Warning on the job", warned(t, ns, j.UID, edgehub.ReasonLinkDown, "edge-0"))

	// A hub judges a node it never heard from once a Lease would have
	// lasted since it started (40 s); a link down, once it lasted as long.
	framework.Eventually(t, 70*time.Second, "the Datasets to say edge-0's link is down and edge-1 never connected", allOf(
		datasetLinkSays(t, ns, "on-edge-1", edgehub.ReasonNoLocalController, "no LocalController has connected from edge node edge-1"),
		datasetLinkSays(t, ns, job.Spec.Dataset.Name, edgehub.ReasonLinkDown, "edge node edge-0 is down since"),
	))
	t.Logf("the Datasets said so %s after the hub started, %s after the link went down",
		time.Since(hubStarted).Round(time.Second), time.Since(stopped).Round(time.Second))
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 40*time.Second, "the job and its Dataset to say edge-0 is linked again", allOf(
		func(ctx context.Context) (bool, error) {
			j, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
			c := (*sednav1.JobCondition)(nil)
			if err == nil {
				c = common.FindJobCondition(j.Status.JobConditions, edgehub.ConditionEdgeLinked)
			}
			return c != nil && c.Status == corev1.ConditionTrue, err
		},
		datasetLinkSays(t, ns, job.Spec.Dataset.Name, edgehub.ReasonLinked, ""),
	))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestAJobWhoseEdgeLinkIsDownSaysSoAndRecovers stops the LocalController of
// the node a federated learning job's Dataset and training worker are on:
// the job and the Dataset say the link is down, naming the node and since
// when; its Training condition no longer says AllWorkersRunning; all go
// back once it reconnects. The job's other node, edge-1, has its own
// LocalController: without one it would say NoLocalController a heartbeat
// after the hub started, and the job would never be linked.
func TestAJobWhoseEdgeLinkIsDownSaysSoAndRecovers(t *testing.T) {
	t.Parallel()
	ns, hub, lc, _ := reportingWorker(t)
	framework.StartLocalController(t, hub, "edge-1", framework.EdgeIdentity(t, ns, "edge-1"))
	jobLink := func(ctx context.Context) (*sednav1.JobCondition, error) {
		j, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
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
	// Meanwhile Training does not say all is well.
	training := func(ctx context.Context) (*sednav1.JobCondition, error) {
		j, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return common.FindJobCondition(j.Status.Conditions, "Training"), nil
	}
	framework.Eventually(t, 10*time.Second, "Training to say edge-0's link is down, not AllWorkersRunning", func(ctx context.Context) (bool, error) {
		c, err := training(ctx)
		return c != nil && c.Status == corev1.ConditionUnknown && c.Reason == common.ReasonEdgeLinkDown &&
			strings.Contains(c.Message, "edge node edge-0 is down since"), err
	})
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
	framework.Eventually(t, 10*time.Second, "Training to say all workers run again", func(ctx context.Context) (bool, error) {
		c, err := training(ctx)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "AllWorkersRunning", err
	})
}

// TestAJointInferenceServiceWhoseEdgeLinkIsDownIsNotSaidReady stops the
// LocalController of edge-0, where the joint inference example's edge
// worker runs: the service's EdgeLinked condition says the link is down,
// naming the node, and its Ready condition goes Unknown (EdgeLinkDown)
// instead of saying Available, since the cloud knows the edge worker only
// as it last heard; kubectl get's EDGE column shows it. Both go back once
// the LocalController reconnects.
func TestAJointInferenceServiceWhoseEdgeLinkIsDownIsNotSaidReady(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	applyJointInferenceExample(t, ns)
	conds := conditionsOf(framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns).Get, jiName)

	lc.Stop(t)
	stopped := time.Now()
	// Within the Lease's duration, as for a job (the hub waits a heartbeat
	// for a LocalController that restarts, then scans every 2 s).
	sednaCondition(t, 40*time.Second, "service "+jiName, conds, edgehub.ConditionEdgeLinked, corev1.ConditionFalse, edgehub.ReasonLinkDown,
		says("edge node edge-0 is down since"))
	t.Logf("the link condition came %s after the LocalController stopped", time.Since(stopped).Round(time.Second))
	msg := sednaCondition(t, 10*time.Second, "service "+jiName, conds, "Ready", corev1.ConditionUnknown, common.ReasonEdgeLinkDown,
		says("edge worker: 1 of 1 replicas available", "edge node edge-0 is down since"))
	t.Logf("Ready: %s", msg)
	out, err := framework.Kubectl(t, "get", "-n", ns, "jointinferenceservices", jiName)
	if err != nil || !strings.Contains(out, "EDGE") || !strings.Contains(out, edgehub.ReasonLinkDown) {
		t.Errorf("kubectl get jointinferenceservices: %v\n%s\nwant its EDGE column to say %s", err, out, edgehub.ReasonLinkDown)
	}

	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	sednaCondition(t, 40*time.Second, "service "+jiName, conds, edgehub.ConditionEdgeLinked, corev1.ConditionTrue, edgehub.ReasonLinked, says())
	sednaCondition(t, 10*time.Second, "service "+jiName, conds, "Ready", corev1.ConditionTrue, "Available", says("edge worker: 1 of 1 replicas available"))
}

// TestLearningStagesPinnedToACloudNodeSayItHasNoLocalController is Sedna's
// own lifelong learning sample set up as Sedna's README does (its train
// and eval workers on the cloud node), and Sedna's incremental learning
// sample with only its train worker there; the samples' placeholder node
// "edge-node" is replaced by cloud-0 for those stages and by edge-0, which
// has its LocalController, for the others and for the Datasets. A
// learning cycle's every stage reports its end through its node's
// LocalController, so both jobs say cloud-0 has none, where a federated
// aggregator in the cloud needs none.
func TestLearningStagesPinnedToACloudNodeSayItHasNoLocalController(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))

	ll := lifelongSampleOn(t, ns, "robot-dog-delivery", "edge-0", "edge-0")
	ll.Spec.TrainSpec.Template.Spec.NodeName = "cloud-0"
	ll.Spec.EvalSpec.Template.Spec.NodeName = "cloud-0"
	if _, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Create(t.Context(), ll, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sample := framework.ReadManifest(t, filepath.Join(framework.SednaCompat(t), "samples", "incrementallearningjob_v1alpha1.yaml"), "IncrementalLearningJob")
	il := &sednav1.IncrementalLearningJob{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sample.Object, il); err != nil {
		t.Fatal(err)
	}
	il.Namespace = ns
	for _, tmpl := range il.PodTemplates() {
		tmpl.Spec.NodeName = "edge-0"
	}
	il.Spec.TrainSpec.Template.Spec.NodeName = "cloud-0"
	datasetOn(t, ns, il.Spec.Dataset.Name, "edge-0")
	if _, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(ns).Create(t.Context(), il, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const says = "node cloud-0 runs no LocalController"
	framework.Eventually(t, 20*time.Second, "both jobs to say cloud-0 has no LocalController", allOf(
		jobLinkSays(t, ns, ll.Name, edgehub.ReasonNoLocalController, says),
		func(ctx context.Context) (bool, error) {
			j, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(ns).Get(ctx, il.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := common.FindJobCondition(j.Status.JobConditions, edgehub.ConditionEdgeLinked)
			return c != nil && c.Status == corev1.ConditionFalse && c.Reason == edgehub.ReasonNoLocalController &&
				strings.Contains(c.Message, says) && !strings.Contains(c.Message, "edge-0"), nil
		},
	))
	out, err := framework.Kubectl(t, "get", "-n", ns, "ll", ll.Name)
	if err != nil || !strings.Contains(out, edgehub.ReasonNoLocalController) {
		t.Errorf("kubectl get ll: %v\n%s\nwant its EDGE column to say %s", err, out, edgehub.ReasonNoLocalController)
	}
}
