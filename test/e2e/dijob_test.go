package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nereid-ml/nereid/hack/realnode"
	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/test/framework"
)

// diMockFile decodes one of DI-orchestrator's di-mock files (the test skips
// without them) into into.
func diMockFile(t *testing.T, file string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(framework.DIv1alpha1Compat(t), "di-mock", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("decoding DI-orchestrator's %s: %v", file, err)
	}
}

// TestDIOrchestratorsMockRunsItsDIJobToSucceededOnRealNodes: DI-orchestrator
// v0.2.2's mock of DI-engine, its di-mock-dijob.yaml and
// di-mock-agconfig.yaml as realnode.DIMockJob runs them here (pull policy,
// real nodes, the mock's own aggregator beside its coordinator, which v0.2.2
// never made), in real pods: the mock coordinator asks the v1 replicas
// server at http://di-server.di-system:8080 for 3 collectors and 3 learners,
// connects to them at <pod>.default, deletes a collector through the server,
// runs its tasks until its agent "converged" and exits 0, and the job is
// Succeeded. Its coordinator deleted by hand mid-run comes back
// (self-healing); the job deleted takes its pods with it (cascade).
func TestDIOrchestratorsMockRunsItsDIJobToSucceededOnRealNodes(t *testing.T) {
	t.Parallel()
	framework.RealNodes(t)
	ensureWorkerImage(t, "di-mock")
	var ag div1.AggregatorConfig
	diMockFile(t, "di-mock-agconfig.yaml", &ag)
	var job div1.DIJob
	diMockFile(t, "di-mock-dijob.yaml", &job)
	if err := realnode.DIMockJob(&job); err != nil {
		t.Fatal(err)
	}
	// The mock's commands name namespace default ($HOSTNAME.default).
	const ns = "default"
	dc := framework.SednaClient(t).DiengineV1alpha1()
	ctx := t.Context()
	if _, err := dc.AggregatorConfigs(ag.Namespace).Create(ctx, &ag, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	created, err := dc.DIJobs(ns).Create(ctx, &job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dc.DIJobs(ns).Delete(context.Background(), job.Name, metav1.DeleteOptions{})
	})
	keepLogsOnFailure(t, ns)

	// Self-healing: the coordinator, deleted by hand once the v1 replicas
	// server has made its collectors and learners, is made again by Nereid,
	// the replicas it had asked for are deleted (they serve the gone one),
	// and the new one asks for its own and runs the job to its end.
	name := coordinated.CoordinatorName(job.Name)
	first := waitCoordinatorSays(t, ns, name, "Recevied replicas response from server")
	replicas := coordinated.LabelJobName + "=" + job.Name + "," + coordinated.LabelReplicaType + "!=" + coordinated.Coordinator
	firsts, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: replicas})
	if err != nil || len(firsts.Items) == 0 {
		t.Fatalf("the first coordinator's replicas: %d, %v", len(firsts.Items), err)
	}
	deletePod(t, ns, name)
	waitRemade(t, ns, name, first.UID)
	waitGone(t, ns, firsts.Items)

	var got *div1.DIJob
	framework.Eventually(t, 3*time.Minute, "the DIJob Succeeded", func(ctx context.Context) (bool, error) {
		got, err = dc.DIJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.Phase == div1.JobFailed {
			return false, fmt.Errorf("the DIJob failed: %+v", got.Status.Conditions)
		}
		return got.Status.Phase == div1.JobSucceeded, nil
	})
	coordinator := coordinatorLog(t, ns, name)
	for _, want := range []string{
		"have connected to aggregator",
		"Recevied replicas response from server",
		// It starts once its limits (a collector, a learner) are met: how
		// many collectors it reached by then depends on the machine's load.
		"match limit requests",
		"send delete and received",
		"coordinator will be closed",
		"Your RL agent is converged",
	} {
		if !strings.Contains(coordinator, want) {
			t.Errorf("the mock coordinator's log lacks %q:\n%s", want, coordinator)
		}
	}
	if m := regexp.MustCompile(`Recevied replicas response from server .*'collectors': \[([^\]]*)\], 'learners': \[([^\]]*)\]`).FindStringSubmatch(coordinator); m == nil ||
		strings.Count(m[1], ".default:80") != 3 || strings.Count(m[2], ".default:80") != 3 {
		t.Errorf("the v1 replicas server did not give the coordinator the 3 collectors and 3 learners it asked for: %q", m)
	}
	if n := framework.CountEvents(t, ns, created.UID, "DIJobSucceeded", ""); n != 1 {
		t.Errorf("%d DIJobSucceeded events, want 1", n)
	}
	if s := got.Status.ReplicaStatus[div1.ReplicaTypeCoordinator]; s == nil || s.Succeeded != 1 {
		t.Errorf("the coordinator's count is %+v, want succeeded 1", s)
	}

	// Its cleanPodPolicy (Running, the default) ends every replica still
	// running.
	waitPodsGone(t, ns, replicas)

	if err := dc.DIJobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsGone(t, ns, coordinated.LabelJobName+"="+job.Name)
}

// waitCoordinatorSays waits until the log of coordinator pod ns/name says
// what, and returns the pod.
func waitCoordinatorSays(t *testing.T, ns, name, what string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.Eventually(t, 2*time.Minute, "the coordinator's log says "+what, func(ctx context.Context) (bool, error) {
		p, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		pod = p
		log, err := diContainerLog(ctx, ns, name)
		return err == nil && strings.Contains(log, what), nil
	})
	return pod
}

// coordinatorLog is the log of the coordinator pod's di-container.
func coordinatorLog(t *testing.T, ns, pod string) string {
	t.Helper()
	log, err := diContainerLog(t.Context(), ns, pod)
	if err != nil {
		t.Fatal(err)
	}
	return log
}

// diContainerLog is the log of pod ns/name's di-container.
func diContainerLog(ctx context.Context, ns, name string) (string, error) {
	kube, err := kubeClient()
	if err != nil {
		return "", err
	}
	rc, err := kube.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: "di-container"}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 8<<20))
	return string(data), err
}
