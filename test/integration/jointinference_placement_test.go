package integration

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
	"github.com/nereid-ml/nereid/test/framework"
)

// pinnedService is the example's JointInferenceService, named name, its
// edge worker pinned by a kubernetes.io/hostname node selector to node. (Its
// template's spec.nodeName is cleared: a pod bound to a node that does not
// exist is failed by the pod garbage collector, and its Deployment makes
// another, while a pod that selects one waits for it.)
func pinnedService(t *testing.T, name, node string) *sednav1.JointInferenceService {
	t.Helper()
	obj := framework.ReadManifest(t, filepath.Join(example("jointinferenceservice"), "10-jointinferenceservice.yaml"), "JointInferenceService")
	ji := &sednav1.JointInferenceService{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, ji); err != nil {
		t.Fatal(err)
	}
	ji.Name = name
	edge := &ji.Spec.EdgeWorker.Template.Spec
	edge.NodeName = ""
	edge.NodeSelector = map[string]string{corev1.LabelHostname: node}
	return ji
}

// jiCondition waits for the service's condition of condType to have status
// and reason and a message that says holds of, and returns the message.
func jiCondition(t *testing.T, ns, name, condType string, status corev1.ConditionStatus, reason string, says func(msg string) bool) string {
	t.Helper()
	return waitCondition(t, framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns).Get, name, condType, status, reason, says)
}

// TestAJointInferenceWorkerPinnedWhereItCannotGoSaysWhichNodeAndWhy: two
// services, the edge worker of one pinned to a node that does not exist,
// of the other to a node whose taint it does not tolerate, each say
// Scheduled=False Unschedulable naming the pod, the node and why, show it in
// kubectl get's SCHEDULED column, and warn once, however often they sync
// (a spec edit adds a second refused pod); the second is placed when the
// taint goes.
//
// Not parallel: it untaints a pool node, where other tests' pods could
// then go.
func TestAJointInferenceWorkerPinnedWhereItCannotGoSaysWhichNodeAndWhy(t *testing.T) {
	ns := framework.Namespace(t)
	pool := "jiplace-" + ns[len(ns)-5:]
	tainted, missing := pool+"-1", pool+"-missing"
	gangPool(t, pool, false, tainted)
	applyExampleFiles(t, ns, "jointinferenceservice", "01-models.yaml")
	framework.StartGlobalManager(t, ns)
	services := framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns)
	uids := map[string]types.UID{}
	for name, node := range map[string]string{"missing": missing, "tainted": tainted} {
		made, err := services.Create(t.Context(), pinnedService(t, name, node), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = made.UID
	}
	for name, want := range map[string][]string{
		"missing": {"is pinned to node " + missing + ", which does not exist"},
		"tainted": {"is pinned to node " + tainted + ", whose taint nereid.io/test-pool=" + pool + ":NoSchedule it does not tolerate", "the scheduler says: "},
	} {
		msg := jiCondition(t, ns, name, gang.ConditionScheduled, corev1.ConditionFalse, placement.ReasonUnschedulable,
			says(append(want, "pod "+name+"-deployment-edge-")...))
		t.Logf("%s: %s", name, msg)
	}
	checkScheduledColumn(t, ns, map[string]string{"missing": placement.ReasonUnschedulable, "tainted": placement.ReasonUnschedulable})

	// A spec edit rolls the edge worker over: its new pod is refused too,
	// and the syncs that say so warn no more.
	framework.Edit(t, services.Get, services.Update, "missing", func(ji *sednav1.JointInferenceService) {
		c := &ji.Spec.EdgeWorker.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "EDITED", Value: "1"})
	})
	jiCondition(t, ns, "missing", gang.ConditionScheduled, corev1.ConditionFalse, placement.ReasonUnschedulable,
		says("which does not exist", "(and 1 more pods cannot be placed)"))

	// The taint goes: placed, and Ready.
	kube := framework.KubeClient(t)
	framework.Edit(t, kube.CoreV1().Nodes().Get, kube.CoreV1().Nodes().Update, tainted, func(n *corev1.Node) { n.Spec.Taints = nil })
	jiCondition(t, ns, "tainted", gang.ConditionScheduled, corev1.ConditionTrue, gang.ReasonPlaced, says())
	// The GlobalManager records events in order: once the Ready event it
	// records last is in, every warning of the syncs before it is too.
	framework.Eventually(t, 60*time.Second, "the tainted service's Ready event", func(ctx context.Context) (bool, error) {
		return framework.CountEvents(t, ns, uids["tainted"], "Ready", "") > 0, nil
	})
	for name, uid := range uids {
		if n, all := unschedulableWarnings(t, ns, uid), countEventsOfType(t, ns, uid, corev1.EventTypeWarning); n != 1 || all != 1 {
			t.Errorf("service %s has %d Unschedulable warnings of %d warnings, want 1 of 1: %+v", name, n, all, framework.Events(t, ns, uid))
		}
	}
	checkScheduledColumn(t, ns, map[string]string{"missing": placement.ReasonUnschedulable, "tainted": gang.ReasonPlaced})
}

// checkScheduledColumn checks the SCHEDULED column of kubectl get
// jointinferenceservice: the reason want says for each service.
func checkScheduledColumn(t *testing.T, ns string, want map[string]string) {
	t.Helper()
	out, err := framework.Kubectl(t, "get", "jointinferenceservice", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl get jointinferenceservice: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, row := range tableRows(out) {
		got[row["NAME"]] = row["SCHEDULED"]
	}
	for name, reason := range want {
		if got[name] != reason {
			t.Errorf("kubectl get jointinferenceservice: SCHEDULED of %s is %q, want %q:\n%s", name, got[name], reason, out)
		}
	}
}
