package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/jointinference"
	"github.com/nereid-ml/nereid/test/framework"
)

const jiName = "helmet-detection-inference-example"

// applyJointInferenceExample applies examples/jointinferenceservice in ns and
// waits until the service is Ready with both workers available.
func applyJointInferenceExample(t *testing.T, ns string) *sednav1.JointInferenceService {
	t.Helper()
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example("jointinferenceservice")); err != nil {
		t.Fatalf("applying the example: %v\n%s", err, out)
	}
	return waitForReadyService(t, ns)
}

func waitForReadyService(t *testing.T, ns string) *sednav1.JointInferenceService {
	t.Helper()
	var ji *sednav1.JointInferenceService
	framework.Eventually(t, 90*time.Second, "the service to be Ready with 2 active workers", func(ctx context.Context) (bool, error) {
		var err error
		ji, err = framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns).Get(ctx, jiName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return common.IsJobConditionTrue(ji.Status.Conditions, "Ready") && ji.Status.Active == 2 &&
			ji.Status.ObservedGeneration == ji.Generation, nil
	})
	return ji
}

func deployments(ctx context.Context, t *testing.T, ns string, owner metav1.Object) (map[string]*appsv1.Deployment, error) {
	list, err := framework.KubeClient(t).AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(owner).String()})
	if err != nil {
		return nil, err
	}
	out := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		out[list.Items[i].Labels[common.LabelWorkerRole]] = &list.Items[i]
	}
	return out, nil
}

func envValue(d *appsv1.Deployment, name string) string {
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestJointInferenceServiceDeleteRemovesEverythingItOwns(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	ji := applyJointInferenceExample(t, ns)
	kube := framework.KubeClient(t)
	sel := metav1.ListOptions{LabelSelector: common.OwnerSelector(ji).String()}
	hpas, err := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(t.Context(), sel)
	if err != nil || len(hpas.Items) != 1 || hpas.Items[0].Name != "hpa-"+jiName+"-deployment-cloud" {
		t.Fatalf("the service's autoscalers: %v, %d, want 1: the cloud worker's, by Sedna's name", err, len(hpas.Items))
	}
	if out, err := framework.Kubectl(t, "delete", "-n", ns, "ji", jiName, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	framework.Eventually(t, 60*time.Second, "the garbage collector to remove every child and their pods", func(ctx context.Context) (bool, error) {
		d, err1 := kube.AppsV1().Deployments(ns).List(ctx, sel)
		s, err2 := kube.CoreV1().Services(ns).List(ctx, sel)
		h, err3 := kube.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, sel)
		p, err4 := kube.CoreV1().Pods(ns).List(ctx, sel)
		for _, err := range []error{err1, err2, err3, err4} {
			if err != nil {
				return false, err
			}
		}
		return len(d.Items)+len(s.Items)+len(h.Items)+len(p.Items) == 0, nil
	})
}

func TestJointInferenceServiceRecreatesDeletedDeploymentOnce(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	ji := applyJointInferenceExample(t, ns)
	before, err := deployments(t.Context(), t, ns, ji)
	if err != nil || len(before) != 2 {
		t.Fatalf("deployments: %v, %d, want 2", err, len(before))
	}
	edge := before["edge"]
	synced := framework.ReadController(t, gm, jointinference.Name)
	if err := framework.KubeClient(t).AppsV1().Deployments(ns).Delete(t.Context(), edge.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the edge Deployment to come back", func(ctx context.Context) (bool, error) {
		now, err := deployments(ctx, t, ns, ji)
		d, ok := now["edge"]
		return ok && d.UID != edge.UID, err
	})
	after := framework.WaitForSyncAfter(t, synced)
	list, err := framework.KubeClient(t).AppsV1().Deployments(ns).List(t.Context(), metav1.ListOptions{LabelSelector: common.OwnerSelector(ji).String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Items {
		if d.Labels[common.LabelWorkerRole] == "cloud" && d.UID != before["cloud"].UID {
			t.Errorf("the cloud Deployment was replaced")
		}
	}
	if len(list.Items) != 2 {
		t.Errorf("%d Deployments, want 2", len(list.Items))
	}
	if created := after.ChildrenCreated("Deployment") - synced.ChildrenCreated("Deployment"); created != 1 {
		t.Errorf("%v Deployments created for one deleted, want 1", created)
	}
	waitForReadyService(t, ns)
}

func TestJointInferenceServiceSpecEditUpdatesOnlyTheEditedWorker(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	ji := applyJointInferenceExample(t, ns)
	services := framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns)
	before, err := deployments(t.Context(), t, ns, ji)
	if err != nil {
		t.Fatal(err)
	}

	// A status-only write changes no Deployment.
	synced := framework.ReadController(t, gm, jointinference.Name)
	ji.Status.Metrics = []sednav1.Metric{{Key: "probe", Value: "1"}}
	if _, err := services.UpdateStatus(t.Context(), ji, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitForSyncAfter(t, synced)
	now, err := deployments(t.Context(), t, ns, ji)
	if err != nil {
		t.Fatal(err)
	}
	for role, d := range before {
		if now[role] == nil || now[role].UID != d.UID || now[role].Generation != d.Generation {
			t.Errorf("the %s Deployment changed after a status write", role)
		}
	}

	// The GlobalManager may be writing the service's status: the edit is
	// retried on a conflict, as kubectl's.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ji, err := services.Get(t.Context(), jiName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ji.Spec.EdgeWorker.HardExampleMining.Parameters = append(ji.Spec.EdgeWorker.HardExampleMining.Parameters, sednav1.ParaSpec{Key: "threshold_rate", Value: "0.5"})
		_, err = services.Update(t.Context(), ji, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the edge worker to get the new parameter", func(ctx context.Context) (bool, error) {
		now, err := deployments(ctx, t, ns, ji)
		if err != nil {
			return false, err
		}
		return strings.Contains(envValue(now["edge"], "HEM_PARAMETERS"), `"threshold_rate":"0.5"`), nil
	})
	after, err := deployments(t.Context(), t, ns, ji)
	if err != nil {
		t.Fatal(err)
	}
	if after["cloud"].Generation != before["cloud"].Generation {
		t.Errorf("the cloud Deployment changed though its spec did not")
	}
	if after["edge"].UID != before["edge"].UID {
		t.Errorf("the edge Deployment was replaced instead of updated")
	}
	edited := waitForReadyService(t, ns)
	if edited.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d, want 2", edited.Status.ObservedGeneration)
	}
}

// TestJointInferenceServiceStatusFollowsDeployments takes the edge worker's
// pods away with a quota that refuses them: the service must stop saying Ready.
func TestJointInferenceServiceStatusFollowsDeployments(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyJointInferenceExample(t, ns)
	kube := framework.KubeClient(t)
	// A quota of one pod: the cloud pod fills it, so a new edge pod is refused.
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(t.Context(), &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "one-pod", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: *resourceQuantity("1")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the quota to be enforced", func(ctx context.Context) (bool, error) {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "one-pod", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, err
	})
	pods, err := kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: common.LabelWorkerRole + "=edge"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("edge pods: %v, %d", err, len(pods.Items))
	}
	if err := kube.CoreV1().Pods(ns).Delete(t.Context(), pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "status to show one active worker and not Ready", func(ctx context.Context) (bool, error) {
		got, err := framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns).Get(ctx, jiName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := common.FindJobCondition(got.Status.Conditions, "Ready")
		return got.Status.Active == 1 && c != nil && c.Status == corev1.ConditionFalse, nil
	})
	if err := kube.CoreV1().ResourceQuotas(ns).Delete(t.Context(), "one-pod", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForReadyService(t, ns)
}

// TestJointInferenceServiceKeepsTheTemplatesOwnEnvironment applies Sedna's
// answer_generation_inference example, whose cloud worker sets MODEL_NAME
// to the model of the API it calls. Sedna sets no MODEL_NAME for a joint
// inference worker, so the worker keeps the template's; what Sedna does set
// is there, under the objects' Sedna names.
func TestJointInferenceServiceKeepsTheTemplatesOwnEnvironment(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	const name = "answer-generation-inference-example"
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", "testdata/sedna-answer-generation-inference.yaml"); err != nil {
		t.Fatalf("applying Sedna's answer generation example: %v\n%s", err, out)
	}
	kube := framework.KubeClient(t)
	var cloud corev1.Pod
	framework.Eventually(t, 90*time.Second, "the cloud worker's pod of Deployment "+name+"-deployment-cloud", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.LabelWorkerRole + "=cloud"})
		if err != nil || len(pods.Items) != 1 {
			return false, err
		}
		cloud = pods.Items[0]
		return true, nil
	})
	d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), name+"-deployment-cloud", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the cloud worker's Deployment by Sedna's name: %v", err)
	}
	env := map[string]string{}
	for _, e := range cloud.Spec.Containers[0].Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("the cloud pod sets %s twice", e.Name)
		}
		env[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = "from " + e.ValueFrom.FieldRef.FieldPath
		}
	}
	want := map[string]string{
		// The template's own, MODEL_NAME among them.
		"MODEL_NAME": "deepseek-chat", "BACKEND_TYPE": "TORCH", "MODEL_LOAD_MODE": "https", "API_KEY": "sk-not-a-real-key",
		// What Sedna sets for a cloud worker.
		"NAMESPACE": ns, "SERVICE_NAME": name, "WORKER_NAME": "from metadata.name", "BIG_MODEL_BIND_PORT": "5000",
		"MODEL_URL": "/home/data/api.deepseek.com/v1", "DATA_PATH_PREFIX": "/home/data",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("cloud pod %s=%q, want %q", k, env[k], v)
		}
	}
	if got := envValue(d, "MODEL_NAME"); got != "deepseek-chat" {
		t.Errorf("Deployment %s's MODEL_NAME %q, want the template's deepseek-chat", d.Name, got)
	}
	if _, err := kube.CoreV1().Services(ns).Get(t.Context(), name+"-cloud", metav1.GetOptions{}); err != nil {
		t.Errorf("the cloud worker's Service by Sedna's name: %v", err)
	}
	if _, err := kube.AppsV1().Deployments(ns).Get(t.Context(), name+"-deployment-edge", metav1.GetOptions{}); err != nil {
		t.Errorf("the edge worker's Deployment by Sedna's name: %v", err)
	}
}
