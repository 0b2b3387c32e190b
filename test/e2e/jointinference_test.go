package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/hack/realnode/netns"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
	"github.com/nereid-ml/nereid/test/framework"
)

// edgeWorker waits for the one running, not deleted, edge worker pod of ns
// other than not, and returns it.
func edgeWorker(t *testing.T, ns, not string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, 90*time.Second, "a running edge worker", func(ctx context.Context) (bool, error) {
		pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: workerRoleLabel + "=edge"})
		if err != nil {
			return false, err
		}
		var live []*corev1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Name != not {
				live = append(live, p)
			}
		}
		if len(live) != 1 {
			return false, nil
		}
		pod = live[0]
		return pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "", nil
	})
	return pod
}

// postFromNode posts a worker's report, Sedna's LCClient's body, to the
// LocalController of the node at nodeIP, from the node's own network
// namespace (not from the worker's pod), and returns the HTTP status, or
// "closed" when the LocalController closed the connection without an answer
// (what it does as it accepts a connection from an address no worker has).
func postFromNode(t *testing.T, nodeNetns, nodeIP, worker string) string {
	t.Helper()
	body := fmt.Sprintf(`{"name":%q,"ownerName":"x","ownerKind":"jointinferenceservice","kind":"inference","status":"running","ownerInfo":{}}`, worker)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+nodeIP+":9100/sedna/workers/"+worker+"/info", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := netns.HTTPClient(nodeNetns, 30*time.Second).Do(req)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return "closed"
		}
		t.Fatalf("posting from the node: %v", err)
	}
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// refusedConnections reads the LocalController's count of connections it
// closed as it accepted them (its /metrics, on the node's loopback).
func refusedConnections(t *testing.T, nodeNetns string) float64 {
	t.Helper()
	const metric = "nereid_localcontroller_worker_connections_refused_total"
	resp, err := netns.HTTPClient(nodeNetns, 10*time.Second).Get("http://127.0.0.1:9101/metrics")
	if err != nil {
		t.Fatalf("reading the LocalController's metrics: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, metric+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in the LocalController's metrics", metric)
	return 0
}

// postFromPod posts the same report from inside the worker's own pod (its
// LC_SERVER, its address), with the image's python3, and returns the status.
func postFromPod(t *testing.T, ns string, pod *corev1.Pod) string {
	t.Helper()
	script := `import json, os, urllib.request
name = os.environ["WORKER_NAME"]
body = json.dumps({"name": name, "ownerName": os.environ["SERVICE_NAME"], "ownerKind": "jointinferenceservice",
                   "kind": "inference", "status": "running", "ownerInfo": {}}).encode()
req = urllib.request.Request(os.environ["LC_SERVER"] + "/sedna/workers/" + name + "/info", data=body,
                             headers={"Content-Type": "application/json"}, method="POST")
try:
    print(urllib.request.urlopen(req, timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
`
	out, err := framework.Kubectl(t, "exec", "-n", ns, pod.Name, "-c", pod.Spec.Containers[0].Name, "--", "python3", "-c", script)
	if err != nil {
		t.Fatalf("posting from pod %s: %v", pod.Name, err)
	}
	return strings.TrimSpace(out)
}

// TestSednasJointInferenceOnRealNodesHealsRollsAndGoesWithItsService:
// Sedna's sample service, its edge worker (Sedna's JointInference, posting
// its counters through its node's LocalController) on a real edge node and
// its cloud worker (Sedna's BigModelService) on the real cloud node.
//   - the counters reach the service's status;
//   - the trust model, for real: a process on the edge node but outside the
//     worker's pod, posting the worker's name to the LocalController, is
//     refused (403); the worker's own pod is not;
//   - self-healing: the worker's pod deleted by hand comes back, once;
//   - respec: an edit of the edge worker's template rolls a new real pod;
//   - cascade: the deleted service takes its real pods with it.
func TestSednasJointInferenceOnRealNodesHealsRollsAndGoesWithItsService(t *testing.T) {
	t.Parallel()
	real := framework.RealNodes(t)
	ensureWorkerImage(t, "worker")
	var svc sednav1.JointInferenceService
	framework.SednaSample(t, "jointinferenceservice_v1alpha1.yaml", &svc, map[string]string{"edge-node": real.Edge[0]})
	svc.Namespace = "" // the sample's is default; the test's is its own
	svc.Spec.CloudWorker.Template.Spec.NodeName = real.Cloud()[0]
	runAs(&svc.Spec.EdgeWorker.Template.Spec, "ji-edge")
	runAs(&svc.Spec.CloudWorker.Template.Spec, "ji-cloud")
	edge := &svc.Spec.EdgeWorker.Template.Spec
	// The user's own settings of the worker: how many inferences it makes,
	// and a report every second instead of every 30 (LC_PERIOD).
	edge.Containers[0].Env = append(edge.Containers[0].Env, corev1.EnvVar{Name: "NEREID_INFERENCES", Value: "7"}, corev1.EnvVar{Name: "LC_PERIOD", Value: "1"})
	hostPathsUnderData(t, edge, real.Edge[0])
	framework.WriteRealNodeFile(t, real.Edge[0], "/models/little.pb", "[[0, 0, 0, 0]]")
	framework.WriteRealNodeFile(t, real.Cloud()[0], "/models/big.pb", "[[0, 0, 0, 0]]")
	ns := framework.Namespace(t)
	keepLogsOnFailure(t, ns)
	sc := framework.SednaClient(t).SednaV1alpha1()
	ctx := t.Context()
	for name, url := range map[string]string{svc.Spec.EdgeWorker.Model.Name: "/models/little.pb", svc.Spec.CloudWorker.Model.Name: "/models/big.pb"} {
		m := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sednav1.ModelSpec{URL: url, Format: "pb"}}
		if _, err := sc.Models(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sc.JointInferenceServices(ns).Create(ctx, &svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := edgeWorker(t, ns, "")
	// Inputs 0…6: the little model is unsure of the odd ones, which Sedna's
	// IBT judges hard and JointInference sends to the cloud worker. Sedna's
	// LCReporter counts a hard example as an inference twice (once at the
	// edge, once with the cloud): 7 + 3.
	framework.Eventually(t, 90*time.Second, "the edge worker's 10 inferences and 3 hard examples in the service's status", func(ctx context.Context) (bool, error) {
		ji, err := sc.JointInferenceServices(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _ := edgestatus.MetricValue(ji.Status.Metrics, "inferenceNumber")
		hard, _ := edgestatus.MetricValue(ji.Status.Metrics, "hardExampleNumber")
		return n == 10 && hard == 3, nil
	})
	if logs := podLogs(t, ns, "cloud"); strings.Count(logs, "big model inferring") != 3 {
		t.Errorf("the cloud worker did not infer the 3 hard examples:\n%s", logs)
	}
	if logs := podLogs(t, ns, "edge"); strings.Count(logs, "hard example True, cloud result [{") != 3 {
		t.Errorf("the edge worker did not get the cloud's results of its 3 hard examples:\n%s", logs)
	}

	worker := envOf(first, "WORKER_NAME")
	if worker == "" { // from the pod's name (the downward API)
		worker = first.Name
	}
	netns := real.NetnsOf(real.Edge[0])
	// Refused either way the LocalController has: the connection closed as
	// it is accepted (counted), or, while a worker of the node has no address
	// yet (another test's pod starting or going), served and answered 403.
	before := refusedConnections(t, netns)
	switch code := postFromNode(t, netns, first.Status.HostIP, worker); code {
	case "closed":
		if after := refusedConnections(t, netns); after != before+1 {
			t.Errorf("the LocalController counted %v refused connections, then %v: want the node's post among them", before, after)
		}
	case "403":
	default:
		t.Errorf("a process on %s outside the worker's pod, posting as %s: HTTP %s, want it refused", real.Edge[0], worker, code)
	}
	if code := postFromPod(t, ns, first); code != "200" {
		t.Errorf("the worker's own pod posting its report: HTTP %s, want 200", code)
	}

	// Self-healing: the pod deleted by hand comes back, once.
	deletePod(t, ns, first.Name)
	healed := edgeWorker(t, ns, first.Name)

	// Respec: a new value of the edge worker's template rolls a new pod.
	framework.Edit(t, sc.JointInferenceServices(ns).Get, sc.JointInferenceServices(ns).Update, svc.Name, func(ji *sednav1.JointInferenceService) {
		c := &ji.Spec.EdgeWorker.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "NEREID_RESPEC", Value: "1"})
	})
	rolled := edgeWorker(t, ns, healed.Name)
	if envOf(rolled, "NEREID_RESPEC") != "1" {
		t.Errorf("the rolled pod %s lacks the edited environment", rolled.Name)
	}

	// Cascade: the service's real pods go with it.
	if err := sc.JointInferenceServices(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsGone(t, ns, workerRoleLabel)
	if _, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, rolled.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s after the service's deletion: %v", rolled.Name, err)
	}
}

// envOf is the value pod's first container sets for name.
func envOf(pod *corev1.Pod, name string) string {
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
