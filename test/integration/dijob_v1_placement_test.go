package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
	"github.com/nereid-ml/nereid/test/framework"
)

// testDIJobV1SaysWhichPodCannotBePlaced: a v1 coordinator asks for a
// collector whose template pins it to a node that does not exist; the job,
// read in v1alpha1, says Scheduled=False Unschedulable naming the collector,
// the node and why, kubectl get's SCHEDULED column shows it, one Warning is
// recorded; once the coordinator removes it, Scheduled=True Placed.
func testDIJobV1SaysWhichPodCannotBePlaced(t *testing.T) {
	ns := framework.Namespace(t)
	s := startV1Server(t, ns)
	const job = "pinned"
	pinned := map[string]any{"spec": map[string]any{
		"nodeSelector": map[string]any{corev1.LabelHostname: "no-such-node"},
		"containers":   []any{map[string]any{"name": coordinated.ContainerName, "image": "busybox"}},
	}}
	coordinator := startV1JobsCoordinator(t, ns, job, map[string]map[string]any{coordinated.Collector: pinned})
	from := coordinator.Status.PodIP
	s.waitForReplicas(from, coordinator.Name, nil, nil)

	created := s.change(from, http.MethodPost, "/v1alpha1/replicas",
		fmt.Sprintf(`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 1, "cpus": "100m"}, "learners": {"replicas": 0}}`, ns, coordinator.Name))
	if len(created.Collectors) != 1 {
		t.Fatalf("POST answered %+v, want 1 collector", created)
	}
	collector := strings.SplitN(created.Collectors[0], ".", 2)[0]
	refused := waitForV1Job(t, ns, job, "Scheduled=False Unschedulable naming "+collector, func(j *div1.DIJob) bool {
		c := v1Condition(j, div1.ConditionScheduled)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == placement.ReasonUnschedulable &&
			strings.Contains(c.Message, "pod "+collector+" is pinned to node no-such-node, which does not exist")
	})
	t.Logf("Scheduled: %s", v1Condition(refused, div1.ConditionScheduled).Message)
	if refused.Status.Phase != div1.JobRunning {
		t.Errorf("phase %s while a collector cannot be placed, want Running (the coordinator runs)", refused.Status.Phase)
	}
	framework.Eventually(t, 30*time.Second, "kubectl get's SCHEDULED column to say Unschedulable", func(context.Context) (bool, error) {
		out, err := framework.Kubectl(t, "get", "dijobs.v1alpha1.diengine.opendilab.org", "-n", ns, job)
		if err != nil {
			t.Logf("kubectl get: %v\n%s", err, out) // the webhook may be moving
			return false, nil
		}
		return strings.Contains(out, "SCHEDULED") && strings.Contains(out, placement.ReasonUnschedulable), nil
	})
	framework.Eventually(t, 10*time.Second, "a Warning Unschedulable on the job", func(context.Context) (bool, error) {
		return unschedulableWarnings(t, ns, refused.UID) > 0, nil
	})

	s.change(from, http.MethodDelete, "/v1alpha1/replicas",
		fmt.Sprintf(`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 1}, "learners": {"replicas": 0}}`, ns, coordinator.Name))
	waitForV1Job(t, ns, job, "Scheduled=True Placed once the collector is gone", func(j *div1.DIJob) bool {
		c := v1Condition(j, div1.ConditionScheduled)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == gang.ReasonPlaced
	})
	if n := unschedulableWarnings(t, ns, refused.UID); n != 1 {
		t.Errorf("%d Unschedulable warnings, want 1", n)
	}
}

// testDIJobV1SaysWhyAReplicaWasNotMade: a collector template the CRD takes
// but the API server refuses as a pod (a container without an image); the
// coordinator's POST is answered 400 and the job, read in v1alpha1, says
// ReplicasCreated=False FailedCreate naming the template and the API
// server's words, with a Warning FailedCreate event.
func testDIJobV1SaysWhyAReplicaWasNotMade(t *testing.T) {
	ns := framework.Namespace(t)
	s := startV1Server(t, ns)
	const job = "imageless"
	imageless := map[string]any{"spec": map[string]any{
		"containers": []any{map[string]any{"name": coordinated.ContainerName}},
	}}
	coordinator := startV1JobsCoordinator(t, ns, job, map[string]map[string]any{coordinated.Collector: imageless})
	from := coordinator.Status.PodIP
	s.waitForReplicas(from, coordinator.Name, nil, nil)

	code, r := s.call(from, http.MethodPost, "/v1alpha1/replicas",
		fmt.Sprintf(`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 1}, "learners": {"replicas": 0}}`, ns, coordinator.Name))
	const says = "image: Required value"
	if code != http.StatusBadRequest || !strings.Contains(r.Message, says) {
		t.Fatalf("POST of an imageless collector: %d %q, want 400 saying %q", code, r.Message, says)
	}
	refused := waitForV1Job(t, ns, job, "ReplicasCreated=False FailedCreate naming the template", func(j *div1.DIJob) bool {
		c := v1Condition(j, div1.ConditionReplicasCreated)
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == common.ReasonFailedCreate &&
			strings.Contains(c.Message, "spec.collector.template") && strings.Contains(c.Message, says)
	})
	t.Logf("ReplicasCreated: %s", v1Condition(refused, div1.ConditionReplicasCreated).Message)
	framework.Eventually(t, 10*time.Second, "a Warning FailedCreate on the job", func(context.Context) (bool, error) {
		for _, e := range framework.Events(t, ns, refused.UID) {
			if e.Type == corev1.EventTypeWarning && e.Reason == common.ReasonFailedCreate && strings.Contains(e.Message, says) {
				return true, nil
			}
		}
		return false, nil
	})
}

// v1Condition is the job's condition of type typ, nil without one.
func v1Condition(j *div1.DIJob, typ div1.Phase) *div1.DIJobCondition {
	for i := range j.Status.Conditions {
		if j.Status.Conditions[i].Type == typ {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}
