package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
	"github.com/nereid-ml/nereid/test/framework"
)

// runningPodWithIP creates pod and waits until kwok runs it with an address.
func runningPodWithIP(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	kube := framework.KubeClient(t)
	if _, err := kube.CoreV1().Pods(pod.Namespace).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	framework.Eventually(t, 30*time.Second, "pod "+pod.Name+" to run with an address", func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		got = p
		return err == nil && p.Status.PodIP != "", err
	})
	return got
}

// Anything that reaches a node's worker API may call it, and a worker's name
// is easy to guess: a report for a worker is taken only from the worker's
// pod's address. Forged reports, from the node's own address and from
// another pod on the node, are refused before they are buffered (the
// connection is closed as it comes) and change nothing; the worker's own
// report, from its address, is applied.
func TestAWorkersReportIsTakenOnlyFromItsPodsAddress(t *testing.T) {
	t.Parallel()
	ns, _, lc, worker := reportingWorker(t)
	// Another pod on edge-0, of nobody Nereid knows.
	neighbour := runningPodWithIP(t, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "neighbour", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "edge-0", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	})
	failed, _ := json.Marshal(map[string]any{
		"name": worker, "namespace": ns, "ownerName": flJob, "ownerKind": "federatedlearningjob",
		"kind": "train", "status": "failed", "ownerInfo": map[string]any{"currentRound": 99},
	})
	url := lc.WorkerURL + "/sedna/workers/" + worker + "/info"
	refusedBefore := lc.Metrics(t)["nereid_localcontroller_worker_connections_refused_total"]
	for _, from := range []string{"127.0.0.1", neighbour.Status.PodIP} {
		if code, msg := framework.PostFrom(from, url, failed); code != 0 && code != http.StatusForbidden {
			t.Errorf("worker %s's report from %s: %d %s, want the connection closed or 403", worker, from, code, msg)
		}
	}
	m := lc.Metrics(t)
	if refused := m["nereid_localcontroller_worker_connections_refused_total"] - refusedBefore; refused < 2 {
		t.Errorf("%v connections closed as they came, want the 2 forged ones", refused)
	}
	if n := m["nereid_cloudlink_outbox_reports"]; n != 0 {
		t.Errorf("the outbox holds %v reports after the forged ones, want 0: nothing of them is on the node's disk", n)
	}
	// The worker's own report, from its address, is applied after them.
	if code, msg := postReport(t, lc, ns, worker, 2); code != http.StatusOK {
		t.Fatalf("the worker's own report: %d %s", code, msg)
	}
	waitForReports(t, ns, "edge-0", 2)
	got, err := edgeNode(t.Context(), t, ns, "edge-0")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "running" || got.ReportsApplied != 2 {
		t.Errorf("edge-0 in status: %+v; want the worker's own 2 reports, running, and nothing of the forged ones", got)
	}
}

// A pod is a service's worker only through the Deployment Nereid made for
// it: a ReplicaSet anyone may create, whose pods copy the service's labels,
// brings the service to no node, and its pod's reports are refused.
func TestAPodWithAServicesLabelsIsNoWorkerOfIt(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	lc := framework.StartLocalController(t, hub, "edge-1", framework.EdgeIdentity(t, ns, "edge-1"))
	ji := applyJointInferenceExample(t, ns) // its workers run on edge-0 and cloud-0
	replicas := int32(1)
	labels := map[string]string{common.LabelOwnerUID: string(ji.UID), common.LabelOwnerName: ji.Name, common.LabelWorkerRole: "edge"}
	// Made by a cluster administrator, whom the chart's admission policy
	// lets set the owner label (TestOnlyNereidAndItsControllersSetTheOwnerLabel
	// shows it refused to others): the chain of controllers is what refuses
	// the pod. The ReplicaSet's own labels leave out the worker role: with
	// all of the service's labels it would match its Deployment's selector
	// and be adopted (then scaled to zero). Its pods carry them all.
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "impostor", Namespace: ns, Labels: map[string]string{common.LabelOwnerUID: string(ji.UID)}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "impostor"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: common.MergeLabels(labels, map[string]string{"app": "impostor"})},
				Spec: corev1.PodSpec{NodeName: "edge-1", Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	kube := framework.KubeClient(t)
	if _, err := kube.AppsV1().ReplicaSets(ns).Create(t.Context(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var impostor corev1.Pod
	framework.Eventually(t, 60*time.Second, "the ReplicaSet's pod to run on edge-1 with an address", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=impostor"})
		if err != nil || len(pods.Items) != 1 {
			return false, err
		}
		impostor = pods.Items[0]
		return impostor.Status.PodIP != "", nil
	})
	// What edge-1 is sent after the pod runs: a Dataset placed there. Once
	// it holds that, it holds all it is sent with the pod running.
	ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: ns},
		Spec: sednav1.DatasetSpec{URL: "/data/after.txt", Format: "txt", NodeName: "edge-1"}}
	if _, err := framework.SednaClient(t).SednaV1alpha1().Datasets(ns).Create(t.Context(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var held map[string]string
	framework.Eventually(t, 30*time.Second, "edge-1 to hold the Dataset made after the pod", func(context.Context) (bool, error) {
		var err error
		held, err = lcObjects(lc)
		_, ok := held["Dataset "+ns+"/after"]
		return ok, err
	})
	for key := range held {
		if !strings.HasPrefix(key, "Dataset ") {
			t.Errorf("edge-1 holds %s; a pod with the service's labels brought it there", key)
		}
	}
	body, _ := json.Marshal(map[string]any{
		"name": impostor.Name, "namespace": ns, "ownerName": jiName, "ownerKind": "jointinferenceservice", "kind": "inference",
		"ownerInfo": map[string]any{"startTime": "2026-11-21 07:00:00", "updateTime": "2026-11-21 07:00:30", "inferenceNumber": 999999999},
	})
	if code, msg := framework.PostAsWorker(t, lc, ns, impostor.Name, body); code != 0 && code != http.StatusForbidden {
		t.Errorf("the impostor pod's report from its address: %d %s, want the connection closed or 403", code, msg)
	}
	got, err := framework.SednaClient(t).SednaV1alpha1().JointInferenceServices(ns).Get(t.Context(), jiName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(got.Status.EdgeNodes, func(n sednav1.EdgeNodeStatus) bool { return n.Name == "edge-1" }); i >= 0 {
		t.Errorf("the service's status has an entry for edge-1: %+v", got.Status.EdgeNodes[i])
	}
	if n, ok := edgestatus.MetricValue(got.Status.Metrics, "inferenceNumber"); ok {
		t.Errorf("inferenceNumber %v in the service's status, from a pod that is not its worker", n)
	}
}

// A hello that names the real LocalController's store (its identity is on
// the node's Lease) without its key is refused, so no other connection can
// record that store's report IDs.
func TestAConnectionCannotClaimAnotherStore(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	token := framework.EdgeIdentity(t, ns, "edge-0")
	framework.StartLocalController(t, hub, "edge-0", token)
	var realStore string
	framework.Eventually(t, 30*time.Second, "edge-0's Lease to name its store", func(ctx context.Context) (bool, error) {
		lease, err := framework.KubeClient(t).CoordinationV1().Leases(ns).Get(ctx, "nereid-edge-edge-0", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		realStore = lease.Annotations["nereid.io/report-store"]
		return realStore != "", nil
	})
	// The same token, as anyone who took it from the node would hold it.
	conn, err := rawEdgeConn(t, hub, token)
	if err != nil {
		t.Fatal(err)
	}
	// The attacker's own key, and the real store's identity.
	frame := fmt.Sprintf(`{"v":1,"type":"hello","payload":{"node":"edge-0","store":%q,"storeKey":%q}}`, realStore, testStoreKey)
	if err := conn.WriteMessage(1, []byte(frame)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = conn.ReadMessage()
	if err == nil || !strings.Contains(err.Error(), "not the identity of its storeKey") {
		t.Errorf("a hello claiming edge-0's store with another key: %v, want the connection closed saying why", err)
	}
}
