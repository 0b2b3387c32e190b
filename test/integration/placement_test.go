package integration

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/federatedlearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/incrementallearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/lifelonglearning"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
	"github.com/nereid-ml/nereid/test/framework"
)

// ungangedFLJob is pinnedFLJob without a gang (the job's annotation), its
// templates pinned by a kubernetes.io/hostname node selector when
// bySelector, else by spec.nodeName. (A pod bound by spec.nodeName to a
// node that does not exist is said the same way, but the controller
// manager's pod garbage collector fails it within a minute.)
func ungangedFLJob(name, cpu string, tolerations []corev1.Toleration, bySelector bool, node string) *sednav1.FederatedLearningJob {
	job := pinnedFLJob(name, cpu, tolerations, node, node)
	job.Annotations = map[string]string{gang.AnnotationScheduler: string(gang.None)}
	if bySelector {
		for _, spec := range []*corev1.PodSpec{&job.Spec.AggregationWorker.Template.Spec, &job.Spec.TrainingWorkers[0].Template.Spec} {
			spec.NodeName = ""
			spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		}
	}
	return job
}

// says is a check that a message holds every one of want.
func says(want ...string) func(string) bool {
	return func(msg string) bool {
		for _, w := range want {
			if !strings.Contains(msg, w) {
				return false
			}
		}
		return true
	}
}

// unschedulableWarnings counts the Unschedulable warnings recorded on a job.
func unschedulableWarnings(t *testing.T, ns string, uid types.UID) int {
	t.Helper()
	n := 0
	for _, e := range framework.Events(t, ns, uid) {
		if e.Type == corev1.EventTypeWarning && e.Reason == placement.ReasonUnschedulable {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// barriers numbers the jobs waitForEventsRecordedSoFar makes.
var barriers atomic.Int32

// waitForEventsRecordedSoFar waits until the GlobalManager of ns has
// written every event it recorded before the call. Its controllers record
// through one broadcaster, which writes events one at a time in the order
// they were recorded: once the MissingReference warning of an incremental
// learning job made now (naming a Dataset ns does not have) is written,
// every event recorded before it is.
func waitForEventsRecordedSoFar(t *testing.T, ns string) {
	t.Helper()
	job := incrementalJob(fmt.Sprintf("events-barrier-%d", barriers.Add(1)), 5, nil)
	job.Spec.Dataset.Name = "no-such-dataset"
	made, err := framework.SednaClient(t).SednaV1alpha1().IncrementalLearningJobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the GlobalManager to write the warning of "+job.Name,
		warned(t, ns, made.UID, "MissingReference", "no-such-dataset"))
}

// templated is an object with worker templates (Sedna's kinds).
type templated interface {
	PodTemplates() []*corev1.PodTemplateSpec
}

// pinnedExample reads the one object of kind in examples/dir into job, its
// worker templates pinned by a kubernetes.io/hostname node selector to node
// (instead of the example's spec.nodeName) and tolerating tolerations.
func pinnedExample(t *testing.T, dir, kind, node string, tolerations []corev1.Toleration, job templated) {
	t.Helper()
	obj := framework.ReadManifest(t, example(dir), kind)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, job); err != nil {
		t.Fatal(err)
	}
	for _, tmpl := range job.PodTemplates() {
		tmpl.Spec.NodeName = ""
		tmpl.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		tmpl.Spec.Tolerations = tolerations
	}
}

// diJobCondition is a check that the DIJob's condition of condType has
// status and reason and a message that says holds of.
func diJobCondition(condType div2.ConditionType, status corev1.ConditionStatus, reason string, says func(string) bool) func(*div2.DIJob) bool {
	return func(j *div2.DIJob) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == condType {
				return c.Status == status && c.Reason == reason && says(c.Message)
			}
		}
		return false
	}
}

// pinnedJob is a job, by UID, whose pod waits for node.
type pinnedJob struct {
	uid  types.UID
	node string
}

// checkWarnedOnceWhileWaiting checks that each of jobs (by kubectl's
// resource/name), however often it syncs while its pod waits, has warned
// once that the pod cannot be placed, naming the node: an edit has each
// synced again, then once their controllers (since readings) have synced
// and the events recorded so far are written, each has one Unschedulable
// warning, and it names the node.
func checkWarnedOnceWhileWaiting(t *testing.T, ns string, readings []framework.ControllerReading, jobs map[string]pinnedJob) {
	t.Helper()
	args := []string{"annotate", "-n", ns}
	for resource := range jobs {
		args = append(args, resource)
	}
	if out, err := framework.Kubectl(t, append(args, "test.nereid.io/poke=while-waiting")...); err != nil {
		t.Fatalf("kubectl annotate: %v\n%s", err, out)
	}
	for _, r := range readings {
		framework.WaitForSyncAfter(t, r)
	}
	waitForEventsRecordedSoFar(t, ns)
	for resource, j := range jobs {
		n := unschedulableWarnings(t, ns, j.uid)
		if named := framework.CountEvents(t, ns, j.uid, placement.ReasonUnschedulable, "node "+j.node+","); n != 1 || named != 1 {
			t.Errorf("%s has %d Unschedulable warnings, %d naming node %s; want 1", resource, n, named, j.node)
		}
	}
}

// TestLearningJobsAndADIJobPinnedWhereTheyCannotGoSayWhichNodeAndWhy: the
// incremental learning example with its workers pinned (by a
// kubernetes.io/hostname node selector) to a node that does not exist, the
// lifelong learning example with its workers pinned to a node whose taint
// they do not tolerate, and a DIJob without a gang (the allocator off)
// whose learner is pinned to the missing node: within 30 s each says
// Scheduled=False Unschedulable naming its waiting pod, the node and why
// (kubectl get's SCHEDULED column shows it), and each warns once, however often it syncs; once
// the node comes and the taint goes, all are placed.
//
// Not parallel: it untaints a pool node, where other tests' pods could
// then go.
func TestLearningJobsAndADIJobPinnedWhereTheyCannotGoSayWhichNodeAndWhy(t *testing.T) {
	ns := framework.Namespace(t)
	pool := "lplace-" + ns[len(ns)-5:]
	late := pool + "-late"
	tainted := pool + "-1"
	gangPool(t, pool, false, tainted)
	applyExampleFiles(t, ns, "incrementallearningjob", "00-dataset.yaml", "01-models.yaml")
	applyExampleFiles(t, ns, "lifelonglearningjob", "00-dataset.yaml")
	gm := framework.StartGlobalManager(t, ns, "--allocator=none")
	var readings []framework.ControllerReading
	for _, c := range []string{incrementallearning.Name, lifelonglearning.Name, dijob.Name} {
		readings = append(readings, framework.ReadController(t, gm, c))
	}
	il, ll := &sednav1.IncrementalLearningJob{}, &sednav1.LifelongLearningJob{}
	pinnedExample(t, "incrementallearningjob", "IncrementalLearningJob", late, poolTolerations(pool), il)
	pinnedExample(t, "lifelonglearningjob", "LifelongLearningJob", tainted, nil, ll)
	di := &div2.DIJob{ObjectMeta: metav1.ObjectMeta{Name: "di", Annotations: map[string]string{gang.AnnotationScheduler: string(gang.None)}},
		Spec: div2.DIJobSpec{Tasks: []div2.Task{poolTask(div2.TaskTypeLearner, "", "100m", map[string]string{corev1.LabelHostname: late}, poolTolerations(pool))}}}
	created := time.Now()
	sedna := framework.SednaClient(t)
	ilMade, err := sedna.SednaV1alpha1().IncrementalLearningJobs(ns).Create(t.Context(), il, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	llMade, err := sedna.SednaV1alpha1().LifelongLearningJobs(ns).Create(t.Context(), ll, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	diMade, err := sedna.DiengineV2alpha1().DIJobs(ns).Create(t.Context(), di, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ilWhat, llWhat := "incremental learning job "+il.Name, "lifelong learning job "+ll.Name
	ilConds := conditionsOf(sedna.SednaV1alpha1().IncrementalLearningJobs(ns).Get, il.Name)
	llConds := conditionsOf(sedna.SednaV1alpha1().LifelongLearningJobs(ns).Get, ll.Name)
	msg := sednaCondition(t, 30*time.Second, ilWhat, ilConds, gang.ConditionScheduled, corev1.ConditionFalse, placement.ReasonUnschedulable,
		says("pod "+learningcycle.InferenceWorkerName(il.Name, 0)+" is pinned to node "+late+", which does not exist"))
	t.Logf("%s: %s", ilWhat, msg)
	msg = sednaCondition(t, 30*time.Second, llWhat, llConds, gang.ConditionScheduled, corev1.ConditionFalse, placement.ReasonUnschedulable,
		says("pod "+learningcycle.InferenceWorkerName(ll.Name, 0)+" is pinned to node "+tainted+", whose taint nereid.io/test-pool="+pool+":NoSchedule it does not tolerate"))
	t.Logf("%s: %s", llWhat, msg)
	waitForDIJob(t, ns, di.Name, "Scheduled=False Unschedulable naming its learner and "+late, diJobCondition(div2.ConditionScheduled,
		corev1.ConditionFalse, placement.ReasonUnschedulable, says("pod di-learner-0 is pinned to node "+late+", which does not exist")))
	if took := time.Since(created); took > 30*time.Second {
		t.Errorf("the jobs said why their pods cannot be placed %s after they were made, want within 30 s", took.Round(time.Second))
	}
	t.Logf("the jobs said why their pods cannot be placed %s after they were made", time.Since(created).Round(100*time.Millisecond))
	out, err := framework.Kubectl(t, "get", "-n", ns, "incrementallearningjobs,lifelonglearningjobs,dijobs.v2alpha1.diengine.opendilab.org")
	if err != nil || strings.Count(out, "SCHEDULED") != 3 || strings.Count(out, placement.ReasonUnschedulable) != 3 {
		t.Errorf("kubectl get incrementallearningjobs,lifelonglearningjobs,dijobs (%v):\n%s\nwant a SCHEDULED column saying Unschedulable for each job", err, out)
	}

	checkWarnedOnceWhileWaiting(t, ns, readings, map[string]pinnedJob{
		"incrementallearningjob/" + il.Name:                 {ilMade.UID, late},
		"lifelonglearningjob/" + ll.Name:                    {llMade.UID, tainted},
		"dijobs.v2alpha1.diengine.opendilab.org/" + di.Name: {diMade.UID, late},
	})

	// The node comes, the taint goes: placed.
	gangPool(t, pool, false, late)
	kube := framework.KubeClient(t)
	framework.Edit(t, kube.CoreV1().Nodes().Get, kube.CoreV1().Nodes().Update, tainted, func(n *corev1.Node) { n.Spec.Taints = nil })
	sednaCondition(t, 60*time.Second, ilWhat, ilConds, gang.ConditionScheduled, corev1.ConditionTrue, gang.ReasonPlaced, says())
	sednaCondition(t, 60*time.Second, llWhat, llConds, gang.ConditionScheduled, corev1.ConditionTrue, gang.ReasonPlaced, says())
	waitForDIJob(t, ns, di.Name, "Scheduled=True and Running", func(j *div2.DIJob) bool {
		return diJobCondition(div2.ConditionScheduled, corev1.ConditionTrue, gang.ReasonGangSchedulingOff, says())(j) && j.Status.Phase == div2.JobRunning
	})
}

// TestAJobWithoutAGangPinnedWhereItCannotGoSaysWhichNodeAndWhy: federated
// jobs without a gang, pinned by a kubernetes.io/hostname node selector to
// a node whose taint they do not tolerate, to a node that does not exist,
// and to a node with too little cpu, each
// say Scheduled=False Unschedulable naming the pod, the node and why, show
// it in kubectl get's SCHEDULED column, and warn once; the first two clear
// when the taint goes and the node comes.
//
// Not parallel: it untaints a pool node, where other tests' pods could
// then go.
func TestAJobWithoutAGangPinnedWhereItCannotGoSaysWhichNodeAndWhy(t *testing.T) {
	ns := framework.Namespace(t)
	pool := "place-" + ns[len(ns)-5:]
	tainted, small, late := pool+"-1", pool+"-2", pool+"-late"
	tolerations := gangPool(t, pool, false, tainted, small)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	gm := framework.StartGlobalManager(t, ns)
	synced := framework.ReadController(t, gm, federatedlearning.Name)
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	uids := map[string]types.UID{}
	for _, j := range []*sednav1.FederatedLearningJob{
		ungangedFLJob("tainted", "100m", nil, true, tainted),
		ungangedFLJob("missing", "100m", tolerations, true, late),
		ungangedFLJob("big", "5", tolerations, true, small),
	} {
		made, err := jobs.Create(t.Context(), j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[j.Name] = made.UID
	}
	for name, want := range map[string][]string{
		"tainted": {"is pinned to node " + tainted + ", whose taint nereid.io/test-pool=" + pool + ":NoSchedule it does not tolerate", "the scheduler says: "},
		"missing": {"is pinned to node " + late + ", which does not exist"},
		"big":     {"is pinned to node " + small + ", which has too little free: cpu: it asks for 5,", "Insufficient cpu"},
	} {
		msg := flCondition(t, ns, name, gang.ConditionScheduled, corev1.ConditionFalse, placement.ReasonUnschedulable, says(append(want, "pod "+name+"-")...))
		t.Logf("%s: %s", name, msg)
	}
	out, err := framework.Kubectl(t, "get", "fl", "-n", ns)
	if err != nil || !strings.Contains(out, "SCHEDULED") || strings.Count(out, placement.ReasonUnschedulable) != 3 {
		t.Errorf("kubectl get fl (%v):\n%s\nwant a SCHEDULED column saying Unschedulable for each job", err, out)
	}
	checkWarnedOnceWhileWaiting(t, ns, []framework.ControllerReading{synced}, map[string]pinnedJob{
		"federatedlearningjob/tainted": {uids["tainted"], tainted},
		"federatedlearningjob/missing": {uids["missing"], late},
		"federatedlearningjob/big":     {uids["big"], small},
	})

	// The taint goes, the node comes: placed.
	kube := framework.KubeClient(t)
	framework.Edit(t, kube.CoreV1().Nodes().Get, kube.CoreV1().Nodes().Update, tainted, func(n *corev1.Node) { n.Spec.Taints = nil })
	gangPool(t, pool, false, late)
	for _, name := range []string{"tainted", "missing"} {
		flCondition(t, ns, name, gang.ConditionScheduled, corev1.ConditionTrue, gang.ReasonGangSchedulingOff, says())
		waitForPhase(t, ns, name, sednav1.FLJobRunning)
	}
	flCondition(t, ns, "big", gang.ConditionScheduled, corev1.ConditionFalse, placement.ReasonUnschedulable, says("asks for 5"))
}
