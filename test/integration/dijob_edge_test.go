package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/test/framework"
)

// TestDIJobHoldsAnEdgeCollectorWhileItsLinkIsDown: a collector on an edge
// node whose link is down, seen failed meanwhile (as the node controller may
// report it), neither restarts the job nor counts as lost until the grace
// ends; then it is a failure like any other. Meanwhile the job's EdgeLinked
// condition and EDGE column say the link is down, and back once it is.
func TestDIJobHoldsAnEdgeCollectorWhileItsLinkIsDown(t *testing.T) {
	ns := framework.Namespace(t)
	const grace = 20 * time.Second
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns, "--edge-link-grace", grace.String())
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))
	kube := framework.KubeClient(t)
	link := func(want string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			l, err := kube.CoordinationV1().Leases(ns).Get(ctx, links.LeaseName("edge-0"), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return l.Annotations[links.AnnotationLink] == want, nil
		}
	}
	framework.Eventually(t, 30*time.Second, "edge-0's link up", link(links.LinkConnected))

	if _, err := sednaClient(t).DiengineV2alpha1().DIJobs(ns).Create(t.Context(), edgeCollectors(t, ns), metav1.CreateOptions{}); err != nil {
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
		if strings.HasPrefix(p.Spec.NodeName, "edge-") {
			var seconds int64
			for _, tol := range p.Spec.Tolerations {
				if tol.Key == corev1.TaintNodeUnreachable && tol.TolerationSeconds != nil {
					seconds = *tol.TolerationSeconds
				}
			}
			if seconds != int64(grace/time.Second) {
				t.Errorf("pod %s on %s tolerates the unreachable taint %d s, want the grace %v", p.Name, p.Spec.NodeName, seconds, grace)
			}
		}
	}
	if onEdge0 == nil {
		t.Fatalf("no collector on edge-0: allocation %v", job.Status.Allocation)
	}

	lc.Stop(t)
	framework.Eventually(t, 30*time.Second, "edge-0's link down", link(links.LinkDisconnected))
	down := time.Now()
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
	if held := time.Since(down); held < grace-2*time.Second {
		t.Errorf("the job restarted %v after the link went down, before the grace %v", held, grace)
	}
	// Back, the job says so.
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	waitForDIJob(t, ns, diExample, "EdgeLinked to say the links are back", linkSays(corev1.ConditionTrue, links.ReasonLinked, ""))
}
