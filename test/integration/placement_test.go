package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
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
	for _, e := range eventsOf(t, ns, uid) {
		if e.Type == corev1.EventTypeWarning && e.Reason == placement.ReasonUnschedulable {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// TestAJobWithoutAGangPinnedWhereItCannotGoSaysWhichNodeAndWhy: federated
// jobs without a gang, pinned by a kubernetes.io/hostname node selector to
// a node whose taint they do not tolerate, to a node that does not exist,
// and to a node with too little cpu, each
// say Scheduled=False Unschedulable naming the pod, the node and why, show
// it in kubectl get's SCHEDULED column, and warn once; the first two clear
// when the taint goes and the node comes.
func TestAJobWithoutAGangPinnedWhereItCannotGoSaysWhichNodeAndWhy(t *testing.T) {
	ns := framework.Namespace(t)
	pool := "place-" + ns[len(ns)-5:]
	tainted, small, late := pool+"-1", pool+"-2", pool+"-late"
	tolerations := gangPool(t, pool, false, tainted, small)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	framework.StartGlobalManager(t, ns)
	jobs := sednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
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
	// Warned once each, however often the jobs sync while they wait.
	time.Sleep(3 * time.Second)
	for name, uid := range uids {
		if n := unschedulableWarnings(t, ns, uid); n != 1 {
			t.Errorf("job %s has %d Unschedulable warnings, want 1", name, n)
		}
	}

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
