package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nereid-ml/nereid/test/framework"
)

// workerRoleLabel is the label the GlobalManager gives a job's pods: their
// worker role.
const workerRoleLabel = "nereid.io/worker-role"

// podLogs is the logs of namespace's pods of a worker role ("" for all),
// each headed by its pod's name.
func podLogs(t *testing.T, ns, role string) string {
	t.Helper()
	return collectLogs(context.WithoutCancel(t.Context()), ns, role)
}

func collectLogs(ctx context.Context, ns, role string) string {
	kube, err := kubeClient()
	if err != nil {
		return err.Error()
	}
	opts := metav1.ListOptions{}
	if role != "" {
		opts.LabelSelector = workerRoleLabel + "=" + role
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			b.WriteString("=== " + p.Name + " (" + c.Name + ", on " + p.Spec.NodeName + ")\n")
			rc, err := kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).Stream(ctx)
			if err != nil {
				b.WriteString(err.Error() + "\n")
				continue
			}
			data, _ := io.ReadAll(io.LimitReader(rc, 4<<20))
			rc.Close()
			b.Write(data)
		}
	}
	return b.String()
}

// keepLogsOnFailure writes, when the test fails, every pod's logs of ns and
// the LocalControllers' under _output/e2e-logs/<test>/, and says where.
func keepLogsOnFailure(t *testing.T, ns string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dir := filepath.Join(framework.RepoRoot(), "_output", "e2e-logs", strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Log(err)
			return
		}
		ctx := context.Background()
		for file, logs := range map[string]string{
			"pods.log":             collectLogs(ctx, ns, ""),
			"localcontrollers.log": collectLogs(ctx, "nereid-local", ""),
		} {
			_ = os.WriteFile(filepath.Join(dir, file), []byte(logs), 0o644)
		}
		t.Logf("the pods' logs are kept in %s", dir)
	})
}

func kubeClient() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(framework.RESTConfig())
}
