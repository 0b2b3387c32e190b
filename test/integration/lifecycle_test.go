package integration

// The lifecycle every kind has through the job framework
// (pkg/globalmanager/controllers/common: suspend.go, deadline.go, ttl.go,
// managedby.go), on the real control plane: a job suspended and resumed, one
// created suspended, one past its deadline, one deleted after its TTL, one
// another controller runs.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/test/framework"
)

// exampleWith is a copy of the example folder dir whose file (the one
// object with a top-level spec) has fields (YAML lines, indented as spec's
// children) added to its spec.
func exampleWith(t *testing.T, dir, file string, fields ...string) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(example(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(example(dir), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == file {
			text := string(raw)
			if strings.Count(text, "\nspec:\n") != 1 {
				t.Fatalf("%s/%s has not exactly one top-level spec", dir, file)
			}
			text = strings.Replace(text, "\nspec:\n", "\nspec:\n  "+strings.Join(fields, "\n  ")+"\n", 1)
			raw = []byte(text)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// applyFederatedExampleWith applies examples/federatedlearningjob in ns,
// the job's spec with fields (YAML lines) added.
func applyFederatedExampleWith(t *testing.T, ns string, fields ...string) {
	t.Helper()
	if out, err := framework.Kubectl(t, "apply", "-n", ns, "-f", exampleWith(t, "federatedlearningjob", "10-federatedlearningjob.yaml", fields...)); err != nil {
		t.Fatalf("applying the example: %v\n%s", err, out)
	}
}

// patchSpec merge-patches a kind's object's spec with kubectl.
func patchSpec(t *testing.T, ns, resource, name, spec string) {
	t.Helper()
	if out, err := framework.Kubectl(t, "patch", resource, "-n", ns, name, "--type=merge", "-p", `{"spec":`+spec+`}`); err != nil {
		t.Fatalf("kubectl patch %s %s %s: %v\n%s", resource, name, spec, err, out)
	}
}

// suspendedIs says whether a Sedna condition list says suspended (True) or
// resumed (False).
func suspendedIs(conds []sednav1.JobCondition, status corev1.ConditionStatus) bool {
	c := common.FindJobCondition(conds, common.ConditionSuspended)
	return c != nil && c.Status == status
}

func TestFederatedLearningJobSuspendedStopsItsPodsAndResumesWhereItWas(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	job := applyFederatedExample(t, ns)
	before, err := livePods(t.Context(), t, ns, job)
	if err != nil || len(before) != 3 {
		t.Fatalf("pods before: %v, %d, want 3", err, len(before))
	}
	// What the edge reported stays through a suspension: a round, as a
	// report writes it.
	sedna := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	job.Status.Round, job.Status.FastestNode = 4, "edge-node-1"
	if _, err := sedna.UpdateStatus(t.Context(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	patchSpec(t, ns, "fl", flJob, `{"suspend":true}`)
	var suspended *sednav1.FederatedLearningJob
	framework.Eventually(t, 60*time.Second, "the suspended job's pods to go", func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, job)
		if err != nil {
			return false, err
		}
		suspended, err = sedna.Get(ctx, flJob, metav1.GetOptions{})
		return err == nil && len(pods) == 0 && suspended.Status.ObservedGeneration == suspended.Generation &&
			suspendedIs(suspended.Status.Conditions, corev1.ConditionTrue), err
	})
	if st := suspended.Status; st.Phase != sednav1.FLJobPending || st.Round != 4 || st.FastestNode != "edge-node-1" || !st.StartTime.Equal(job.Status.StartTime) {
		t.Errorf("suspended: phase %q round %d fastest %q start %v; want Pending, and round 4, edge-node-1 and start %v kept",
			st.Phase, st.Round, st.FastestNode, st.StartTime, job.Status.StartTime)
	}
	svcs, err := framework.KubeClient(t).CoreV1().Services(ns).List(t.Context(), metav1.ListOptions{LabelSelector: common.OwnerSelector(job).String()})
	if err != nil || len(svcs.Items) != 1 {
		t.Errorf("the suspended job's Services: %v (%v); want its one kept", svcs, err)
	}
	out, err := framework.Kubectl(t, "get", "fl", "-n", ns, flJob)
	if err != nil || !strings.Contains(out, "SUSPENDED") || !strings.Contains(out, "true") {
		t.Errorf("kubectl get fl: %v\n%s\nwant a SUSPENDED column saying true", err, out)
	}

	patchSpec(t, ns, "fl", flJob, `{"suspend":false}`)
	resumed := waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
	if !suspendedIs(resumed.Status.Conditions, corev1.ConditionFalse) || resumed.Status.Round != 4 {
		t.Errorf("resumed: conditions %+v, round %d; want Suspended False and round 4", resumed.Status.Conditions, resumed.Status.Round)
	}
	after, err := livePods(t.Context(), t, ns, job)
	if err != nil || len(after) != 3 {
		t.Fatalf("pods after resuming: %v, %d, want 3", err, len(after))
	}
	for name, p := range after {
		if b := before[name]; b == nil || b.UID == p.UID {
			t.Errorf("pod %s after resuming: want a new pod of a name it had", name)
		}
	}
	waitForEvents(t, ns, job.UID, "", common.ReasonSuspended, common.ReasonResumed)
}

func TestFederatedLearningJobCreatedSuspendedMakesNothingUntilResumed(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	applyFederatedExampleWith(t, ns, "suspend: true")
	sedna := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	var job *sednav1.FederatedLearningJob
	framework.Eventually(t, 60*time.Second, "the job to say it is suspended", func(ctx context.Context) (bool, error) {
		var err error
		job, err = sedna.Get(ctx, flJob, metav1.GetOptions{})
		return err == nil && suspendedIs(job.Status.Conditions, corev1.ConditionTrue), err
	})
	after := framework.WaitForSyncAfter(t, synced)
	if made := after.ChildrenCreated("Pod") + after.ChildrenCreated("Service") - synced.ChildrenCreated("Pod") - synced.ChildrenCreated("Service"); made != 0 {
		t.Errorf("a job created suspended made %v children, want none", made)
	}
	if c := common.FindJobCondition(job.Status.Conditions, "Admitted"); c != nil {
		t.Errorf("a job created suspended asked for quota: %+v", c)
	}
	patchSpec(t, ns, "fl", flJob, `{"suspend":false}`)
	waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
}

func TestFederatedLearningJobActivePastItsDeadlineFails(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyFederatedExampleWith(t, ns, "activeDeadlineSeconds: 4")
	job := waitForPhase(t, ns, flJob, sednav1.FLJobFailed)
	failed := common.FindJobCondition(job.Status.Conditions, "Failed")
	if failed == nil || failed.Reason != common.ReasonDeadlineExceeded || job.Status.CompletionTime == nil {
		t.Fatalf("Failed condition %+v, completionTime %v; want reason %s and a completion time", failed, job.Status.CompletionTime, common.ReasonDeadlineExceeded)
	}
	if active := job.Status.CompletionTime.Sub(job.Status.StartTime.Time); active < 4*time.Second {
		t.Errorf("failed %v after it started, before its 4 s deadline", active)
	}
	// Its running pods go as for any failure (cleanPodPolicy Running).
	framework.Eventually(t, 60*time.Second, "the failed job's running pods to go", func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, job)
		return len(pods) == 0, err
	})
	waitForEvents(t, ns, job.UID, "activeDeadlineSeconds", common.ReasonDeadlineExceeded)
}

func TestFinishedFederatedLearningJobIsDeletedAfterItsTTL(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyFederatedExampleWith(t, ns, "ttlSecondsAfterFinished: 3")
	job := waitForPhase(t, ns, flJob, sednav1.FLJobRunning)
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Labels[common.LabelWorkerRole] == "aggregation" {
			framework.EndPod(t, ns, p.Name, corev1.PodSucceeded)
		}
	}
	done := waitForPhase(t, ns, flJob, sednav1.FLJobSucceeded)
	kube := framework.KubeClient(t)
	var goneAt time.Time
	framework.Eventually(t, 60*time.Second, "the finished job, its pods and its Service to be deleted", func(ctx context.Context) (bool, error) {
		_, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(ctx, flJob, metav1.GetOptions{})
		if err == nil || !apierrors.IsNotFound(err) {
			return false, nil
		}
		if goneAt.IsZero() {
			goneAt = time.Now()
		}
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(done).String()})
		if err != nil {
			return false, err
		}
		svcs, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(done).String()})
		return len(pods.Items) == 0 && len(svcs.Items) == 0, err
	})
	if kept := goneAt.Sub(done.Status.CompletionTime.Time); kept < 3*time.Second-time.Second { // completionTime is to the second
		t.Errorf("deleted %v after it finished, before its 3 s TTL", kept)
	}
}

func TestJobAnotherControllerRunsIsLeftWhollyAlone(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns)
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	applyFederatedExampleWith(t, ns, "managedBy: kueue.x-k8s.io/multikueue")
	// Once the controller has synced all it was given, the job is as it
	// was created: no status, no pods.
	after := framework.WaitForSyncAfter(t, synced)
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get(t.Context(), flJob, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Syncs() == synced.Syncs() {
		t.Fatalf("the controller never synced the job")
	}
	if job.Status.Phase != "" || len(job.Status.Conditions) != 0 || job.Status.StartTime != nil {
		t.Errorf("the status of a job another controller runs was written: %+v", job.Status)
	}
	if pods, err := livePods(t.Context(), t, ns, job); err != nil || len(pods) != 0 {
		t.Errorf("pods of a job another controller runs: %v (%v)", podUIDs(pods), err)
	}
	// managedBy cannot change, nor go.
	for _, patch := range []string{`{"managedBy":"nereid.io/globalmanager"}`, `{"managedBy":null}`} {
		out, err := framework.Kubectl(t, "patch", "fl", "-n", ns, flJob, "--type=merge", "-p", `{"spec":`+patch+`}`)
		if said := fmt.Sprint(err) + out; err == nil || !strings.Contains(said, "spec.managedBy") || !strings.Contains(said, "cannot be changed") {
			t.Errorf("patching spec %s: %v\n%s\nwant a refusal naming spec.managedBy", patch, err, out)
		}
	}
}

func TestDIJobSuspendedAndResumedKeepsItsRestartsAndFailsPastItsDeadline(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	applyDIJobExample(t, ns)
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	patchSpec(t, ns, "dijob", diExample, `{"suspend":true}`)
	job = waitForDIJob(t, ns, diExample, "suspended", func(j *div2.DIJob) bool {
		pods, err := diPods(t.Context(), t, ns, j)
		return err == nil && len(pods) == 0 && j.Status.Phase == div2.JobPending && j.Status.Reason == common.ReasonSuspended &&
			diJobCondition(div2.ConditionSuspended, corev1.ConditionTrue, common.ReasonSuspended, anyMessage)(j)
	})
	if job.Status.Restarts != 0 {
		t.Errorf("restarts %d after suspending; a suspension is no restart", job.Status.Restarts)
	}
	patchSpec(t, ns, "dijob", diExample, `{"suspend":false}`)
	job = waitForDIJob(t, ns, diExample, "Running again", func(j *div2.DIJob) bool {
		return j.Status.Phase == div2.JobRunning && diJobCondition(div2.ConditionSuspended, corev1.ConditionFalse, common.ReasonResumed, anyMessage)(j)
	})
	if job.Status.Restarts != 0 || job.Status.ReadyReplicas != 4 {
		t.Errorf("resumed: restarts %d, ready %d; want 0 and 4", job.Status.Restarts, job.Status.ReadyReplicas)
	}
	// Its deadline counts from the resumption.
	patchSpec(t, ns, "dijob", diExample, `{"activeDeadlineSeconds":3}`)
	job = waitForDIJob(t, ns, diExample, "Failed past its deadline", diPhaseIs(div2.JobFailed))
	if job.Status.Reason != common.ReasonDeadlineExceeded || job.Status.CompletionTimestamp == nil {
		t.Errorf("failed with reason %q, completion %v; want %s and a completion time", job.Status.Reason, job.Status.CompletionTimestamp, common.ReasonDeadlineExceeded)
	}
	framework.Eventually(t, 60*time.Second, "the failed job's running pods to go", func(ctx context.Context) (bool, error) {
		pods, err := diPods(ctx, t, ns, job)
		return len(pods) == 0, err
	})
}

// anyMessage accepts a condition's message, whatever it says.
func anyMessage(string) bool { return true }

// An incremental learning job suspended mid-stage keeps where its cycle
// stands, and resumed, runs the same try of the same stage again in a new
// pod of the same name: no try is lost to the suspension.
func TestIncrementalLearningJobSuspendedMidStageResumesTheSameTry(t *testing.T) {
	t.Parallel()
	c := startCycle(t, "incrementallearningjob", nil)
	c.createIncremental(5, nil)
	c.addSamples(6)
	first := c.stagePod("train", 1, 1)
	before := c.waitFor(1, sednav1.StageTrain, sednav1.StageStarting, sednav1.StageRunning)

	patchSpec(t, c.ns, "il", cycleJob, `{"suspend":true}`)
	var during sednav1.CycleStatus
	framework.Eventually(t, 60*time.Second, "the suspended job's pods to go", func(ctx context.Context) (bool, error) {
		pods, err := c.stagePods(ctx, "train")
		if err != nil {
			return false, err
		}
		during, err = c.status(ctx)
		return err == nil && len(pods) == 0 && suspendedIs(during.JobConditions, corev1.ConditionTrue), err
	})
	if during.Round != 1 || during.Stage != sednav1.StageTrain || during.Attempt != before.Attempt || len(during.History) != 0 {
		t.Errorf("suspended: %s; want round 1 train, its try and history kept (%s)", describe(during), describe(before))
	}

	patchSpec(t, c.ns, "il", cycleJob, `{"suspend":false}`)
	again := c.stagePod("train", 1, 1)
	if again.UID == first.UID {
		t.Errorf("the train pod after resuming is the one before")
	}
	// The pod is made before the status that says resumed is written.
	var after sednav1.CycleStatus
	framework.Eventually(t, 60*time.Second, "the job to say it resumed", func(ctx context.Context) (bool, error) {
		var err error
		after, err = c.status(ctx)
		return err == nil && suspendedIs(after.JobConditions, corev1.ConditionFalse), err
	})
	if after.Round != 1 || after.Stage != sednav1.StageTrain || after.Attempt != before.Attempt || len(after.History) != 0 {
		t.Errorf("resumed: %s; want round 1 train, the same try (%s)", describe(after), describe(before))
	}
}

// A JointInferenceService suspended has no Deployments, and resumed, has
// them back.
func TestJointInferenceServiceSuspendedHasNoWorkersUntilResumed(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartGlobalManager(t, ns)
	ji := applyJointInferenceExample(t, ns)
	kube := framework.KubeClient(t)
	deployments := func(ctx context.Context) (int, error) {
		list, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: common.OwnerSelector(ji).String()})
		if err != nil {
			return 0, err
		}
		n := 0
		for _, d := range list.Items {
			if d.DeletionTimestamp == nil {
				n++
			}
		}
		return n, nil
	}
	patchSpec(t, ns, "ji", ji.Name, `{"suspend":true}`)
	framework.Eventually(t, 60*time.Second, "the suspended service's Deployments to go", func(ctx context.Context) (bool, error) {
		n, err := deployments(ctx)
		got, gerr := framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns).Get(ctx, ji.Name, metav1.GetOptions{})
		return err == nil && gerr == nil && n == 0 && suspendedIs(got.Status.Conditions, corev1.ConditionTrue) && got.Status.EdgeReady == "0/0", errors.Join(err, gerr)
	})
	patchSpec(t, ns, "ji", ji.Name, `{"suspend":false}`)
	framework.Eventually(t, 60*time.Second, "the resumed service's Deployments to come back", func(ctx context.Context) (bool, error) {
		n, err := deployments(ctx)
		return n == 2, err
	})
}

// A suspended job holds no quota: the job waiting behind it is admitted,
// and the resumed one asks again, and waits its turn.
func TestSuspendingAJobReleasesItsQuotaAndResumingAsksAgain(t *testing.T) {
	t.Parallel()
	ns, tolerations, _ := quotaNamespace(t, "4")
	framework.StartGlobalManager(t, ns)
	first := createFL(t, ns, quotaJob("qa", "1", 2, "", tolerations))
	allBound(t, ns, first, 3)
	second := createFL(t, ns, quotaJob("qb", "1", 2, "", tolerations))
	flAdmitted(t, ns, second.Name, corev1.ConditionFalse, admission.ReasonWaitingForQuota, "")

	patchSpec(t, ns, "fl", first.Name, `{"suspend":true}`)
	allBound(t, ns, second, 3)
	flAdmitted(t, ns, second.Name, corev1.ConditionTrue, admission.ReasonQuotaAdmitted, "")

	patchSpec(t, ns, "fl", first.Name, `{"suspend":false}`)
	flAdmitted(t, ns, first.Name, corev1.ConditionFalse, admission.ReasonWaitingForQuota, "")
	if pods, err := livePods(t.Context(), t, ns, first); err != nil || len(pods) != 0 {
		t.Errorf("the resumed job made pods %v (%v) with no room in its quota", podUIDs(pods), err)
	}
}

// TestEdgeHubLeavesAJobAnotherControllerRunsAlone: Sedna's lifelong sample
// pinned to a node that does not exist here (as a MultiKueue worker
// cluster's nodes do not exist in its management cluster) gets no EdgeLinked
// condition of the edge hub's, and goes to no LocalController, when another
// controller runs it; the same job of Nereid's says NoSuchNode.
func TestEdgeHubLeavesAJobAnotherControllerRunsAlone(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	own := lifelongSampleOn(t, ns, "own", "no-such-node", "edge-0")
	foreign := lifelongSampleOn(t, ns, "foreign", "no-such-node", "edge-0")
	foreign.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
	for _, j := range []*sednav1.LifelongLearningJob{own, foreign} {
		if _, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Create(t.Context(), j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, 30*time.Second, "Nereid's job to say its node does not exist",
		jobLinkSays(t, ns, own.Name, edgehub.ReasonNoSuchNode, "no node no-such-node exists"))
	// One more scan, begun after the one that judged both.
	scans := reachScans(t, hub.Process)
	framework.Eventually(t, 60*time.Second, "another reach scan of the edge hub", func(context.Context) (bool, error) {
		return reachScans(t, hub.Process) > scans, nil
	})
	got, err := framework.SednaClient(t).SednaV1alpha1().LifelongLearningJobs(ns).Get(t.Context(), foreign.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.JobConditions) != 0 || got.Status.Stage != "" {
		t.Errorf("the status of a job another controller runs was written: %+v", got.Status)
	}
	if n := len(framework.Events(t, ns, got.UID)); n != 0 {
		t.Errorf("%d events on a job another controller runs, want none", n)
	}
}

// reachScans is how many reach scans gm's edge hub has made.
func reachScans(t *testing.T, gm *framework.Process) float64 {
	t.Helper()
	var m framework.Metrics
	framework.Eventually(t, 30*time.Second, "the GlobalManager's metrics", func(ctx context.Context) (bool, error) {
		var err error
		m, err = framework.ScrapeMetrics(ctx, "http://"+gm.HealthAddress())
		return err == nil, nil
	})
	return m.Get("nereid_edgehub_reach_scans_total")
}

// A suspended job's gang objects (the Workload and PodGroup the
// scheduler's queue counts) go with its pods, and come back on resume.
func TestSuspendedJobsGangObjectsGoAndComeBack(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	pool := "sus-" + ns[len(ns)-5:]
	tolerations := gangPool(t, pool, false, pool+"-1")
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	framework.StartGlobalManager(t, ns)
	job := createFL(t, ns, pinnedFLJob("fl", "1", tolerations, pool+"-1", pool+"-1", pool+"-1"))
	waitForPhase(t, ns, job.Name, sednav1.FLJobRunning)
	sched := framework.KubeClient(t).SchedulingV1beta1()
	name := gang.GroupName(job, sednav1.FederatedLearningJobKind)
	groups := func(ctx context.Context) (podGroup, workload bool, err error) {
		_, err = sched.PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, false, err
		}
		podGroup = err == nil
		_, err = sched.Workloads(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, false, err
		}
		return podGroup, err == nil, nil
	}
	if pg, w, err := groups(t.Context()); err != nil || !pg || !w {
		t.Fatalf("a running job's PodGroup %v, Workload %v (%v); want both", pg, w, err)
	}
	patchSpec(t, ns, "fl", job.Name, `{"suspend":true}`)
	framework.Eventually(t, 60*time.Second, "the suspended job's PodGroup and Workload to go", func(ctx context.Context) (bool, error) {
		pg, w, err := groups(ctx)
		return !pg && !w, err
	})
	patchSpec(t, ns, "fl", job.Name, `{"suspend":false}`)
	waitForPhase(t, ns, job.Name, sednav1.FLJobRunning)
	if pg, w, err := groups(t.Context()); err != nil || !pg || !w {
		t.Errorf("the resumed job's PodGroup %v, Workload %v (%v); want both again", pg, w, err)
	}
}
