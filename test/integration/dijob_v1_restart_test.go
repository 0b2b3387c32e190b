package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/test/framework"
)

// testDIJobV1LosesNothingWhenTheGlobalManagerRestarts: a v1 job whose
// coordinator got its collectors and learner keeps every pod and Service
// through a GlobalManager crash; the next GlobalManager's server lists the
// same replicas, makes nothing again, and still ends the job with its
// coordinator.
func testDIJobV1LosesNothingWhenTheGlobalManagerRestarts(t *testing.T) {
	ns := framework.Namespace(t)
	args := []string{"--edge-namespace", ns, framework.DIJobConversion, "--di-v1-server-address", "127.0.0.1:0", "--di-v1-server-url", "127.0.0.1:8080"}
	gm := framework.StartGlobalManager(t, ns, args...)
	waitForTheConversionWebhook(t, ns)
	s := v1Server{t: t, base: v1ServerAddress(t, gm), ns: ns}
	coordinator := startV1JobsCoordinator(t, ns, "restart", nil)
	from := coordinator.Status.PodIP
	s.waitForReplicas(from, coordinator.Name, nil, nil)
	created := s.change(from, http.MethodPost, "/v1alpha1/replicas", fmt.Sprintf(
		`{"namespace": %q, "coordinator": %q, "collectors": {"replicas": 2}, "learners": {"replicas": 1}}`, ns, coordinator.Name))
	before := waitForChildren(t, ns, 4, 4)
	waitForV1Job(t, ns, "restart", "Running with 2 collectors and a learner active", func(j *div1.DIJob) bool {
		return j.Status.Phase == div1.JobRunning && activeOf(j, div1.ReplicaTypeCollector) == 2 && activeOf(j, div1.ReplicaTypeLearner) == 1
	})
	cc, err := dijobConversionClientConfig(t.Context(), t)
	if err != nil {
		t.Fatal(err)
	}

	gm.Kill(t)
	gm = framework.StartGlobalManager(t, ns, args...)
	framework.Eventually(t, 60*time.Second, "the DIJob CRD pointing at the new GlobalManager's webhook", func(ctx context.Context) (bool, error) {
		now, err := dijobConversionClientConfig(ctx, t)
		return err == nil && now.URL != cc.URL, err
	})
	s.base = v1ServerAddress(t, gm)
	s.waitForReplicas(from, coordinator.Name, created.Collectors, created.Learners)
	if after := waitForChildren(t, ns, 4, 4); !slices.Equal(before, after) {
		t.Errorf("pods and Services after the restart %v, want those before it %v", after, before)
	}

	framework.EndPod(t, ns, coordinator.Name, corev1.PodSucceeded)
	waitForV1Job(t, ns, "restart", "Succeeded", func(j *div1.DIJob) bool { return j.Status.Phase == div1.JobSucceeded })
}

// waitForChildren waits until the namespace holds exactly pods pods and
// services Services, and returns their UIDs, sorted.
func waitForChildren(t *testing.T, ns string, pods, services int) []types.UID {
	t.Helper()
	var uids []types.UID
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("%d pods and %d Services", pods, services), func(ctx context.Context) (bool, error) {
		kube := framework.KubeClient(t).CoreV1()
		p, err := kube.Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		svc, err := kube.Services(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		uids = uids[:0]
		for _, o := range p.Items {
			uids = append(uids, o.UID)
		}
		for _, o := range svc.Items {
			uids = append(uids, o.UID)
		}
		slices.Sort(uids)
		return len(p.Items) == pods && len(svc.Items) == services, nil
	})
	return slices.Clone(uids)
}
