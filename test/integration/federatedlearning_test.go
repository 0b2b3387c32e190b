package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	"github.com/nereid-ml/nereid/test/framework"
)

const flJob = "surface-defect-detection"

// applyFederatedExample applies examples/federatedlearningjob in ns and waits
// until the job is Running with its three workers.
func applyFederatedExample(t *testing.T, ns string) *sednav1.FederatedLearningJob {
	t.Helper()
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example("federatedlearningjob")); err != nil {
		t.Fatalf("applying the example: %v\n%s", err, out)
	}
	return waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
}

func waitForPhase(t *testing.T, ns, name string, phase sednav1.FLJobPhase) *sednav1.FederatedLearningJob {
	t.Helper()
	var job *sednav1.FederatedLearningJob
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("job %s to be %s", name, phase), func(ctx context.Context) (bool, error) {
		var err error
		job, err = framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return job.Status.Phase == phase && job.Status.ObservedGeneration == job.Generation, nil
	})
	return job
}

// livePods are the job's pods that are not terminating, by name.
func livePods(ctx context.Context, t *testing.T, ns string, job metav1.Object) (map[string]*corev1.Pod, error) {
	t.Helper()
	list, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
	if err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out, nil
}

func podUIDs(pods map[string]*corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for n, p := range pods {
		out[n] = p.UID
	}
	return out
}

func sameUIDs(a, b map[string]types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestFederatedLearningJobDeleteRemovesEverythingItOwns(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	job := applyFederatedExample(t, ns)
	kube := framework.KubeClient(t)
	svcs, err := kube.CoreV1().Services(ns).List(t.Context(), metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
	if err != nil || len(svcs.Items) != 1 {
		t.Fatalf("the job's services: %v, %d, want 1", err, len(svcs.Items))
	}
	if out, err := framework.Kubectl(t, "delete", "-n", ns, "fl", flJob, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete: %v\n%s", err, out)
	}
	framework.Eventually(t, 60*time.Second, "the garbage collector to remove every pod and service", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
		if err != nil {
			return false, err
		}
		svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
		return len(pods.Items) == 0 && len(svcs.Items) == 0, err
	})
}

func TestFederatedLearningJobRecreatesDeletedWorkerOnce(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	job := applyFederatedExample(t, ns)
	before, err := livePods(t.Context(), t, ns, job)
	if err != nil || len(before) != 3 {
		t.Fatalf("pods before: %v, %d, want 3", err, len(before))
	}
	var victim *corev1.Pod
	for _, p := range before {
		if p.Labels[common.LabelWorkerRole] == "training" {
			victim = p
			break
		}
	}
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	// kwok finalizes a deleted pod by deleting its name again, which can
	// take the new pod of that name too: each pod of the name that goes
	// is one to make again.
	w, err := framework.KubeClient(t).CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + victim.Name, ResourceVersion: victim.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	framework.DeletePodByHand(t, ns, victim.Name)
	framework.Eventually(t, 30*time.Second, "the deleted worker to come back", func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, job)
		p, ok := pods[victim.Name]
		return ok && p.UID != victim.UID, err
	})
	// Exactly once: with the deletion and the new pod's events handled, the
	// same three names, one pod each.
	after := framework.WaitForSyncAfter(t, synced)
	pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if _, ok := before[p.Name]; !ok {
			t.Errorf("unexpected pod %s", p.Name)
		}
	}
	if len(pods.Items) != 3 {
		t.Errorf("%d pods, want 3", len(pods.Items))
	}
	gone := 0
	for drained := false; !drained; {
		select {
		case e := <-w.ResultChan():
			if e.Type == watch.Deleted {
				gone++
			}
		case <-time.After(time.Second):
			drained = true
		}
	}
	if created := after.ChildrenCreated("Pod") - synced.ChildrenCreated("Pod"); created != float64(gone) || gone == 0 {
		t.Errorf("%v pods created for %d pods of the deleted worker's name gone, want one each", created, gone)
	}
}

func TestFinishedFederatedLearningJobDoesNotResurrectPods(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	job := applyFederatedExample(t, ns)
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	kube := framework.KubeClient(t)
	var aggregator *corev1.Pod
	for _, p := range pods {
		if p.Labels[common.LabelWorkerRole] == "aggregation" {
			aggregator = p.DeepCopy()
		}
	}
	// The aggregation worker finishes.
	framework.EndPod(t, ns, aggregator.Name, corev1.PodSucceeded)
	done := waitForPhase(t, ns, flJob, sednav1.FLJobSucceeded)
	if done.Status.CompletionTime == nil {
		t.Errorf("a succeeded job has no completionTime")
	}
	// Clean-pod policy Running (the default): the training workers go, the finished aggregator stays.
	framework.Eventually(t, 30*time.Second, "running workers cleaned up", func(ctx context.Context) (bool, error) {
		left, err := livePods(ctx, t, ns, job)
		_, kept := left[aggregator.Name]
		return len(left) == 1 && kept, err
	})
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	if err := kube.CoreV1().Pods(ns).Delete(t.Context(), aggregator.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	after := framework.WaitForSyncAfter(t, synced)
	if left, err := livePods(t.Context(), t, ns, job); err != nil || len(left) != 0 {
		t.Errorf("pods of the finished job after its last pod was deleted: %v (%v), want none", podUIDs(left), err)
	}
	// Not even one that was cleaned up again.
	if created := after.ChildrenCreated("Pod") - synced.ChildrenCreated("Pod"); created != 0 {
		t.Errorf("%v pods created for the finished job, want none", created)
	}
}

func TestFederatedLearningJobSpecEditReplacesOldWorkers(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	job := applyFederatedExample(t, ns)
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	before, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}

	// A status-only write creates and deletes nothing.
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	job.Status.Conditions = append(job.Status.Conditions, sednav1.JobCondition{Type: "Probe", Status: corev1.ConditionTrue})
	if _, err := jobs.UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.WaitForSyncAfter(t, synced)
	if now, err := livePods(t.Context(), t, ns, job); err != nil || !sameUIDs(podUIDs(before), podUIDs(now)) {
		t.Fatalf("pods after a status write: %v (%v), want the same as before it: %v", podUIDs(now), err, podUIDs(before))
	}

	// A spec edit of training worker 0 replaces that worker, and only it.
	job = framework.Edit(t, jobs.Get, jobs.Update, flJob, func(job *sednav1.FederatedLearningJob) {
		job.Spec.TrainingWorkers[0].Template.Spec.Containers[0].Env[0].Value = "64"
	})
	edited := waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
	if edited.Status.ObservedGeneration != 2 {
		t.Errorf("observedGeneration %d, want 2", edited.Status.ObservedGeneration)
	}
	var after map[string]*corev1.Pod
	framework.Eventually(t, 30*time.Second, "one new-spec worker in place of the old one", func(ctx context.Context) (bool, error) {
		after, err = livePods(ctx, t, ns, job)
		return len(after) == 3 && len(after) == len(before), err
	})
	var replaced []string
	for name, p := range after {
		if old, ok := before[name]; !ok {
			replaced = append(replaced, name)
			if got := p.Spec.Containers[0].Env[0].Value; got != "64" {
				t.Errorf("new worker %s has batch_size %q, want 64", name, got)
			}
		} else if old.UID != p.UID {
			t.Errorf("worker %s was recreated though its spec did not change", name)
		}
	}
	if len(replaced) != 1 || !strings.Contains(replaced[0], "-training-0-") {
		t.Errorf("replaced workers %v, want training worker 0 only", replaced)
	}
}

func TestFederatedLearningJobWaitsVisiblyForMissingModel(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "10-federatedlearningjob.yaml")
	framework.Eventually(t, 30*time.Second, "a condition naming the missing model", func(ctx context.Context) (bool, error) {
		job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := common.FindJobCondition(job.Status.Conditions, "ReferencesResolved")
		return c != nil && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "surface-defect-detection-model") &&
			job.Status.Phase == sednav1.FLJobPending, nil
	})
	out, err := framework.Kubectl(t, "describe", "fl", flJob, "-n", ns)
	if err != nil || !strings.Contains(out, "MissingReference") {
		t.Errorf("kubectl describe shows no MissingReference event (%v):\n%s", err, out)
	}
	// Blocked, not waiting, in kubectl get: the REFERENCES column says so
	// for the federated job and for an incremental one, whose STATE column
	// (Sedna's Waiting) alone could not tell.
	applyExampleFiles(t, ns, "incrementallearningjob", "00-dataset.yaml", "10-incrementallearningjob.yaml")
	framework.Eventually(t, 30*time.Second, "kubectl get to show both jobs blocked", func(context.Context) (bool, error) {
		fl, err1 := framework.Kubectl(t, "get", "fl", flJob, "-n", ns)
		il, err2 := framework.Kubectl(t, "get", "il", "-n", ns)
		return strings.Contains(fl, "MissingReference") && strings.Contains(il, "MissingReference"), errors.Join(err1, err2)
	})
	// Blocked, it names no inference worker: there is no such pod.
	ils, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(ils.Items) != 1 {
		t.Fatalf("incremental jobs: %v (%v)", ils, err)
	}
	if w := ils.Items[0].Status.InferenceWorker; w != "" {
		t.Errorf("the blocked incremental job names inference worker %q, a pod that does not exist", w)
	}
	applyExampleFiles(t, ns, "federatedlearningjob", "01-model.yaml")
	waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
	if out, err := framework.Kubectl(t, "get", "fl", flJob, "-n", ns); err != nil || !strings.Contains(out, "Resolved") {
		t.Errorf("kubectl get fl once its Model exists (%v):\n%s\nwant REFERENCES Resolved", err, out)
	}
}

// TestFederatedLearningJobLargerThanItsQuotaWaitsWholeAndRecovers: a quota
// of 2 pods cannot hold the example's 3: the job makes none of them, says
// why in a condition and an event, is never Running, and is made whole
// once the quota allows.
func TestFederatedLearningJobLargerThanItsQuotaWaitsWholeAndRecovers(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	kube := framework.KubeClient(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("2")}},
	}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(t.Context(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the quota to be counted", func(ctx context.Context) (bool, error) {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
		return err == nil && q.Status.Used != nil, err
	})
	framework.StartGlobalManager(t, ns)
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example("federatedlearningjob")); err != nil {
		t.Fatalf("applying the example: %v\n%s", err, out)
	}
	flAdmitted(t, ns, flJob, corev1.ConditionFalse, admission.ReasonQuotaTooSmall, "needs pods=3, more than the 2 quota pods allows in all")
	framework.Eventually(t, 30*time.Second, "a QuotaTooSmall event", func(ctx context.Context) (bool, error) {
		out, err := framework.Kubectl(t, "describe", "fl", flJob, "-n", ns)
		return err == nil && strings.Contains(out, admission.ReasonQuotaTooSmall), nil
	})
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(t.Context(), flJob, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pods, err := livePods(t.Context(), t, ns, job); err != nil || len(pods) != 0 || job.Status.Phase != sednav1.FLJobPending {
		t.Fatalf("phase %s and pods %v (%v) while waiting, want Pending and none", job.Status.Phase, podUIDs(pods), err)
	}
	framework.Edit(t, kube.CoreV1().ResourceQuotas(ns).Get, kube.CoreV1().ResourceQuotas(ns).Update, "pods", func(q *corev1.ResourceQuota) {
		q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("10")
	})
	job = waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
	if !common.IsJobConditionTrue(job.Status.Conditions, "WorkersCreated") || !common.IsJobConditionTrue(job.Status.Conditions, admission.ConditionAdmitted) {
		t.Errorf("Running without WorkersCreated=True and Admitted=True: %+v", job.Status.Conditions)
	}
}

// bigJob is a federated job with n training workers spread over the edge nodes.
func bigJob(name string, n int) *sednav1.FederatedLearningJob {
	tmpl := func(node, image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "worker", Image: image}}}}
	}
	job := &sednav1.FederatedLearningJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: sednav1.FederatedLearningJobSpec{
			AggregationWorker: sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: "surface-defect-detection-model"}, Template: tmpl("cloud-0", "agg:v1")},
		},
	}
	for i := range n {
		job.Spec.TrainingWorkers = append(job.Spec.TrainingWorkers, sednav1.TrainingWorker{
			Dataset:  sednav1.DatasetRef{Name: fmt.Sprintf("edge%d-surface-defect-detection-dataset", i%2)},
			Template: tmpl(fmt.Sprintf("edge-%d", i%2), "train:v1"),
		})
	}
	return job
}

func TestGlobalManagerRestartedMidCreationMakesEveryPodOnce(t *testing.T) {
	t.Parallel()
	const workers = 120
	ns := framework.Namespace(t)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	// A slow client, so the kill lands in the middle of the creates.
	gm := framework.StartGlobalManager(t, ns, "--kube-api-qps=20", "--kube-api-burst=1")
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Create(t.Context(), bigJob("large", workers), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "some pods to exist", func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, job)
		return len(pods) >= 15, err
	})
	// Taken before the kill: everything the restarted process does is after it.
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	gm.Kill(t)
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) >= workers+1 {
		t.Fatalf("the GlobalManager created all %d pods before the kill; the test proves nothing", len(pods))
	}
	t.Logf("killed the GlobalManager with %d of %d pods created", len(pods), workers+1)
	if err := gm.Start(); err != nil {
		t.Fatal(err)
	}
	waitForPhase(t, ns, "large", sednav1.FLJobRunning)
	framework.WaitForSyncAfter(t, synced)
	list, err := framework.KubeClient(t).CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
	if err != nil {
		t.Fatal(err)
	}
	perWorker := map[string]int{}
	for _, p := range list.Items {
		// One pod per role and index, whatever the hash.
		perWorker[strings.Join(strings.Split(p.Name, "-")[:len(strings.Split(p.Name, "-"))-1], "-")]++
	}
	var dup []string
	for w, n := range perWorker {
		if n > 1 {
			dup = append(dup, w)
		}
	}
	sort.Strings(dup)
	if len(dup) > 0 {
		t.Errorf("workers with more than one pod: %v", dup)
	}
	if len(list.Items) != workers+1 {
		t.Errorf("%d pods, want %d", len(list.Items), workers+1)
	}
}

func TestEditingOneFederatedJobLeavesAnotherAlone(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	a, err := jobs.Create(t.Context(), bigJob("a", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := jobs.Create(t.Context(), bigJob("b", 2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForPhase(t, ns, "a", sednav1.FLJobRunning)
	waitForPhase(t, ns, "b", sednav1.FLJobRunning)
	bPods, err := livePods(t.Context(), t, ns, b)
	if err != nil {
		t.Fatal(err)
	}
	a = framework.Edit(t, jobs.Get, jobs.Update, "a", func(a *sednav1.FederatedLearningJob) {
		a.Spec.AggregationWorker.Template.Spec.Containers[0].Image = "agg:v2"
		a.Spec.TrainingWorkers[1].Template.Spec.Containers[0].Image = "train:v2"
	})
	framework.Eventually(t, 30*time.Second, "job a's edited workers", func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, a)
		images := 0
		for _, p := range pods {
			if strings.HasSuffix(p.Spec.Containers[0].Image, ":v2") {
				images++
			}
		}
		return len(pods) == 3 && images == 2, err
	})
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	if err := jobs.Delete(t.Context(), "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the garbage collector to remove job a's pods", func(ctx context.Context) (bool, error) {
		list, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(a).String()})
		return err == nil && len(list.Items) == 0, err
	})
	framework.WaitForSyncAfter(t, synced)
	if now, err := livePods(t.Context(), t, ns, b); err != nil || !sameUIDs(podUIDs(bPods), podUIDs(now)) {
		t.Errorf("job b's pods after job a's deletion: %v (%v), want them untouched: %v", podUIDs(now), err, podUIDs(bPods))
	}
}

// TestSpecEditWithSlowTerminationNeverBringsOldPodsBack edits a job whose pods
// take seconds to go away (a kwok stage delays their deletion): while the old
// pods terminate, every live pod is of the new spec.
func TestFederatedLearningJobSpecEditWithSlowTerminationNeverBringsOldPodsBack(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	job := bigJob("slow", 2)
	for _, tmpl := range []*corev1.PodTemplateSpec{&job.Spec.AggregationWorker.Template, &job.Spec.TrainingWorkers[0].Template, &job.Spec.TrainingWorkers[1].Template} {
		tmpl.Annotations = map[string]string{"nereid.io/kwok-delete-delay": "4s"}
	}
	job, err := jobs.Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job = waitForPhase(t, ns, "slow", sednav1.FLJobRunning)
	before, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	framework.Edit(t, jobs.Get, jobs.Update, "slow", func(job *sednav1.FederatedLearningJob) {
		for i := range job.Spec.TrainingWorkers {
			job.Spec.TrainingWorkers[i].Template.Spec.Containers[0].Image = "train:v2"
		}
	})
	sawTerminating := false
	framework.Eventually(t, 30*time.Second, "only new-spec training pods, the old ones gone", func(ctx context.Context) (bool, error) {
		list, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range list.Items {
			if p.Labels[common.LabelWorkerRole] != "training" {
				continue
			}
			if p.DeletionTimestamp != nil {
				sawTerminating = true
			} else if p.Spec.Containers[0].Image != "train:v2" {
				// A live old-spec pod may only be one of the originals, not yet deleted.
				if old, ok := before[p.Name]; !ok || old.UID != p.UID {
					return false, fmt.Errorf("old-spec pod %s (%s) was created after the edit", p.Name, p.UID)
				}
			}
			if p.Spec.Containers[0].Image != "train:v2" {
				return false, nil
			}
			n++
		}
		return n == 2, nil
	})
	if !sawTerminating {
		t.Errorf("never saw an old pod terminating: the kwok delay did not apply, so the test proves nothing")
	}
	// An old-spec pod created and deleted again between two looks is in the
	// count: the edit replaced two workers, so exactly two pods were made.
	after := framework.WaitForSyncAfter(t, synced)
	if created := after.ChildrenCreated("Pod") - synced.ChildrenCreated("Pod"); created != 2 {
		t.Errorf("%v pods created after the edit of two workers, want 2", created)
	}
}

func resourceQuantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// TestFederatedLearningJobBeingDeletedDoesNotFightTheGarbageCollector deletes
// a job in the foreground: the garbage collector removes the pods while the job
// still exists, and the GlobalManager must not bring them back.
func TestFederatedLearningJobBeingDeletedDoesNotFightTheGarbageCollector(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	job := applyFederatedExample(t, ns)
	foreground := metav1.DeletePropagationForeground
	if err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Delete(t.Context(), flJob, metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the job and its pods to be gone", func(ctx context.Context) (bool, error) {
		pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.CreationTimestamp.After(job.CreationTimestamp.Add(30 * time.Second)) {
				return false, fmt.Errorf("pod %s was created while the job was being deleted", p.Name)
			}
		}
		_, err = framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
		return len(pods.Items) == 0 && err != nil, nil
	})
}

// applyExampleFiles applies some files of an example folder, in order.
func applyExampleFiles(t *testing.T, ns, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", example(dir)+"/"+f); err != nil {
			t.Fatalf("applying examples/%s/%s: %v\n%s", dir, f, err, out)
		}
	}
}

// TestFederatedTrainerRunsOnItsDatasetsNode: a training worker whose
// template names no node runs on its Dataset's node (not wherever the
// scheduler likes: it mounts that node's path and reports to that node's
// LocalController), and kubectl describe says so; one whose template names
// another node keeps it, and describe warns that it differs.
func TestFederatedTrainerRunsOnItsDatasetsNode(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	job := bigJob(flJob, 2)
	job.Spec.TrainingWorkers[0].Template.Spec.NodeName = "edge-1" // its Dataset is on edge-0
	job.Spec.TrainingWorkers[1].Template.Spec.NodeName = ""       // its Dataset is on edge-1
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job = waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{}
	for _, p := range pods {
		if p.Labels[common.LabelWorkerRole] == "training" {
			nodes[strings.Split(strings.TrimPrefix(p.Name, flJob+"-training-"), "-")[0]] = p.Spec.NodeName
		}
	}
	if want := map[string]string{"0": "edge-1", "1": "edge-1"}; !maps.Equal(nodes, want) {
		t.Errorf("training workers run on nodes %v, want %v", nodes, want)
	}
	c := common.FindJobCondition(job.Status.Conditions, "OnDatasetNodes")
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != "NodeDiffersFromDataset" {
		t.Errorf("OnDatasetNodes condition %+v, want False NodeDiffersFromDataset", c)
	}
	framework.Eventually(t, 30*time.Second, "kubectl describe to say where the trainers run", func(context.Context) (bool, error) {
		out, err := framework.Kubectl(t, "describe", "fl", flJob, "-n", ns)
		return strings.Contains(out, "NodeDiffersFromDataset") &&
			strings.Contains(out, "trainingWorkers[0]'s template names node edge-1, but its Dataset edge0-surface-defect-detection-dataset is on node edge-0") &&
			strings.Contains(out, "PlacedOnDatasetNode") &&
			strings.Contains(out, "trainingWorkers[1] runs on node edge-1, its Dataset edge1-surface-defect-detection-dataset's"), err
	})
	events, err := framework.KubeClient(t).CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + flJob})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, e := range events.Items {
		types[e.Reason] = e.Type
	}
	if types["NodeDiffersFromDataset"] != corev1.EventTypeWarning || types["PlacedOnDatasetNode"] != corev1.EventTypeNormal {
		t.Errorf("event types by reason %v: want NodeDiffersFromDataset a Warning, PlacedOnDatasetNode Normal", types)
	}
}
