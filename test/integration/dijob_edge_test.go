package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/test/framework"
)

// edgeLinkIs is a check that the link Lease of node, in the edge hub's
// namespace ns, says want (links.LinkConnected, links.LinkDisconnected).
func edgeLinkIs(t *testing.T, ns, node, want string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		l, err := framework.KubeClient(t).CoordinationV1().Leases(ns).Get(ctx, links.LeaseName(node), metav1.GetOptions{})
		if err != nil {
			return false, nil // not made yet
		}
		return l.Annotations[links.AnnotationLink] == want, nil
	}
}

// TestDIJobHoldsAnEdgeCollectorWhileItsLinkIsDown: a collector on an edge
// node whose link is down, seen failed meanwhile (as the node controller may
// report it), neither restarts the job nor counts as lost until the grace
// ends; then it is a failure like any other. Meanwhile the job's EdgeLinked
// condition and EDGE column say the link is down, and back once it is.
func TestDIJobHoldsAnEdgeCollectorWhileItsLinkIsDown(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	const grace = 20 * time.Second
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns, "--edge-link-grace", grace.String())
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	link := func(want string) func(ctx context.Context) (bool, error) { return edgeLinkIs(t, ns, "edge-0", want) }
	framework.Eventually(t, 30*time.Second, "edge-0's link up", link(links.LinkConnected))

	if _, err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Create(t.Context(), edgeCollectors(t, ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := waitForDIJob(t, ns, diExample, "Running", diPhaseIs(div2.JobRunning))
	pods, err := diPods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	var onEdge0 *corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == "edge-0" {
			onEdge0 = p
		}
		if got := linkGraceOf(p); strings.HasPrefix(p.Spec.NodeName, "edge-") && got != grace {
			t.Errorf("pod %s on %s tolerates the unreachable taint %v, want the grace %v", p.Name, p.Spec.NodeName, got, grace)
		}
	}
	if onEdge0 == nil {
		t.Fatalf("no collector on edge-0: allocation %v", job.Status.Allocation)
	}

	lc.Stop(t)
	framework.Eventually(t, 30*time.Second, "edge-0's link down", link(links.LinkDisconnected))
	down := time.Now()
	// The grace runs from when the node was last heard from: the Lease's
	// last renewal, up to a renewal period before the link went.
	lease, err := framework.KubeClient(t).CoordinationV1().Leases(ns).Get(t.Context(), links.LeaseName("edge-0"), metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil {
		t.Fatalf("edge-0's Lease: %v (renewTime %v)", err, lease.Spec.RenewTime)
	}
	lastHeard := lease.Spec.RenewTime.Time
	// The job says so at once, in its EdgeLinked condition and kubectl
	// get's EDGE column, with nothing else changed (the Lease is watched).
	linkSays := func(status corev1.ConditionStatus, reason, message string) func(j *div2.DIJob) bool {
		return func(j *div2.DIJob) bool {
			for _, c := range j.Status.Conditions {
				if c.Type == div2.ConditionEdgeLinked {
					return c.Status == status && c.Reason == reason && strings.Contains(c.Message, message)
				}
			}
			return false
		}
	}
	waitForDIJob(t, ns, diExample, "EdgeLinked to say edge-0's link is down",
		linkSays(corev1.ConditionFalse, links.ReasonLinkDown, "the link of edge node edge-0 is down since"))
	if took := time.Since(down); took > 10*time.Second {
		t.Errorf("the job said edge-0's link is down %s after its Lease did, want within 10 s", took)
	}
	if out, err := framework.Kubectl(t, "get", "dijob", "-n", ns, diExample); err != nil || !strings.Contains(out, "EDGE") || !strings.Contains(out, links.ReasonLinkDown) {
		t.Errorf("kubectl get dijob: %v\n%s\nwant an EDGE column saying %s", err, out, links.ReasonLinkDown)
	}
	setPodPhase(t, ns, onEdge0.Name, corev1.PodFailed, "node edge-0 lost")
	job = waitForDIJob(t, ns, diExample, "the collector held", func(j *div2.DIJob) bool {
		return strings.Contains(conditionOf(j, div2.JobRunning), onEdge0.Name+" on edge-0 (held until")
	})
	if job.Status.Phase != div2.JobRunning || job.Status.Restarts != 0 {
		t.Fatalf("with edge-0's link down: phase %s restarts %d, want Running 0", job.Status.Phase, job.Status.Restarts)
	}
	// Past the grace the failure counts: the job restarts.
	job = waitForDIJob(t, ns, diExample, "restarted once the grace ended", func(j *div2.DIJob) bool { return j.Status.Restarts == 1 })
	if held := time.Since(lastHeard); held < grace {
		t.Errorf("the job restarted %v after edge-0 was last heard from, before the grace %v", held, grace)
	}
	// Back, the job says so.
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	waitForDIJob(t, ns, diExample, "EdgeLinked to say the links are back", linkSays(corev1.ConditionTrue, links.ReasonLinked, ""))
}

// linkGraceOf is how long pod tolerates its node's unreachable taint, 0
// when it does not.
func linkGraceOf(pod *corev1.Pod) time.Duration {
	for _, tol := range pod.Spec.Tolerations {
		if tol.Key == corev1.TaintNodeUnreachable && tol.TolerationSeconds != nil {
			return time.Duration(*tol.TolerationSeconds) * time.Second
		}
	}
	return 0
}

// v1LinkSays is a check that a v1alpha1 job's EdgeLinked condition has
// status and reason and a message containing message.
func v1LinkSays(status corev1.ConditionStatus, reason, message string) func(j *div1.DIJob) bool {
	return func(j *div1.DIJob) bool {
		c := v1Condition(j, div1.ConditionEdgeLinked)
		return c != nil && c.Status == status && c.Reason == reason && strings.Contains(c.Message, message)
	}
}

// testDIJobV1CollectorOnAnEdgeNodeSaysWhenItsLinkIsDown: the coordinator
// of a v1alpha1 job asks the v1 replicas server for a collector whose
// template selects edge nodes, and edge-0 by name; it runs there,
// tolerating the link's loss for the grace (coordinated.Place). While
// edge-0's LocalController is stopped the job, read in v1alpha1, says
// EdgeLinked False LinkDown naming edge-0, and kubectl get's EDGE column
// says LinkDown; once it is back, Linked.
func testDIJobV1CollectorOnAnEdgeNodeSaysWhenItsLinkIsDown(t *testing.T) {
	ns := framework.Namespace(t)
	const grace = 5 * time.Minute
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns, framework.DIJobConversion, "--edge-link-grace", grace.String(),
		"--di-v1-server-address", "127.0.0.1:0", "--di-v1-server-url", "127.0.0.1:8080")
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	waitForTheConversionWebhook(t, ns)
	s := v1Server{t: t, base: v1ServerAddress(t, hub.Process), ns: ns}
	collector := map[string]any{"spec": map[string]any{
		"nodeSelector": map[string]any{framework.EdgeNodeLabel: "", corev1.LabelHostname: "edge-0"},
		"containers":   []any{map[string]any{"name": coordinated.ContainerName, "image": "busybox"}},
	}}
	const job = "edge"
	coordinator := startV1JobsCoordinator(t, ns, job, map[string]map[string]any{coordinated.Collector: collector})
	from := coordinator.Status.PodIP
	s.waitForReplicas(from, coordinator.Name, nil, nil)
	created := s.change(from, http.MethodPost, "/v1alpha1/replicas", fmt.Sprintf(
		`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 1}, "learners": {"replicas": 0}}`, ns, coordinator.Name))
	if len(created.Collectors) != 1 {
		t.Fatalf("POST answered %+v, want 1 collector", created)
	}
	name := strings.SplitN(created.Collectors[0], ".", 2)[0]
	var pod *corev1.Pod
	framework.Eventually(t, 60*time.Second, "collector "+name+" running on edge-0", func(ctx context.Context) (bool, error) {
		var err error
		pod, err = framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName == "edge-0" && pod.Status.Phase == corev1.PodRunning, ignoreNotFound(err)
	})
	if got := linkGraceOf(pod); got != grace {
		t.Errorf("collector %s tolerates the unreachable taint %v, want the grace %v", name, got, grace)
	}
	framework.Eventually(t, 30*time.Second, "edge-0's link up", edgeLinkIs(t, ns, "edge-0", links.LinkConnected))

	lc.Stop(t)
	framework.Eventually(t, 30*time.Second, "edge-0's link down", edgeLinkIs(t, ns, "edge-0", links.LinkDisconnected))
	down := time.Now()
	waitForV1Job(t, ns, job, "EdgeLinked to say edge-0's link is down",
		v1LinkSays(corev1.ConditionFalse, links.ReasonLinkDown, "the link of edge node edge-0 is down since"))
	if took := time.Since(down); took > 10*time.Second {
		t.Errorf("the job said edge-0's link is down %s after its Lease did, want within 10 s", took)
	}
	// kubectl reads v1alpha1 through the conversion webhook too, which may
	// move for a moment to another test's GlobalManager.
	framework.Eventually(t, 30*time.Second, "kubectl get's EDGE column to say "+links.ReasonLinkDown, func(context.Context) (bool, error) {
		out, err := framework.Kubectl(t, "get", "dijobs.v1alpha1.diengine.opendilab.org", "-n", ns, job)
		if err != nil {
			t.Logf("kubectl get: %v\n%s", err, out)
			return false, nil
		}
		if !strings.Contains(out, "EDGE") || !strings.Contains(out, links.ReasonLinkDown) {
			return false, fmt.Errorf("kubectl get dijobs.v1alpha1:\n%s\nwant an EDGE column saying %s", out, links.ReasonLinkDown)
		}
		return true, nil
	})

	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	waitForV1Job(t, ns, job, "EdgeLinked to say the link is back", v1LinkSays(corev1.ConditionTrue, links.ReasonLinked, ""))
}
