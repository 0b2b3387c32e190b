package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nereid-ml/nereid/test/framework"
)

// probePod is a pod of the probe image on node, serving on port 8080.
func probePod(name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"serve", ":8080"},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)},
				}, PeriodSeconds: 1},
			}},
		},
	}
}

// waitReady waits until the pods are Ready and returns them as they are then.
func waitReady(t *testing.T, ns string, names ...string) map[string]*corev1.Pod {
	t.Helper()
	kube := framework.KubeClient(t)
	got := map[string]*corev1.Pod{}
	for _, name := range names {
		framework.Eventually(t, 60*time.Second, "pod "+name+" Ready", func(ctx context.Context) (bool, error) {
			p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil // not made yet
			} else if err != nil {
				return false, err
			}
			got[name] = p
			return podReady(p), nil
		})
	}
	return got
}

// TestRealPodsReachEachOtherByServiceNameFromTheirOwnAddresses: a pod on one
// real node reaches a pod on the other by its Service's cluster DNS name,
// through kube-proxy, and the server sees the client's own pod address (what
// the LocalController's and the v1 replicas server's checks rest on); the
// kubelet probes, and kubectl logs and exec reach the containers.
func TestRealPodsReachEachOtherByServiceNameFromTheirOwnAddresses(t *testing.T) {
	t.Parallel()
	nodes := framework.RealNodes(t).Edge
	ensureProbeImage(t)
	ns := framework.Namespace(t)
	kube := framework.KubeClient(t)
	ctx := t.Context()

	for _, p := range []*corev1.Pod{
		probePod("server", nodes[1], map[string]string{"app": "server"}),
		probePod("client", nodes[0], nil),
	} {
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "server"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := waitReady(t, ns, "server", "client")
	client := pods["client"]

	out, err := framework.Kubectl(t, "exec", "-n", ns, "client", "--", "/probe", "lookup", "server."+ns+".svc.cluster.local")
	if err != nil || strings.TrimSpace(out) != svc.Spec.ClusterIP {
		t.Errorf("cluster DNS of the Service: %q, %v; want its ClusterIP %s", out, err, svc.Spec.ClusterIP)
	}
	// The Service's short name, through the pod's search path; kube-proxy's
	// rules may lag the endpoints a moment.
	framework.Eventually(t, 30*time.Second, "client reaching http://server/", func(context.Context) (bool, error) {
		out, err = framework.Kubectl(t, "exec", "-n", ns, "client", "--", "/probe", "get", "http://server/")
		return err == nil, nil
	})
	host, from, _ := strings.Cut(strings.TrimSpace(out), " ")
	if host != "server" || !strings.HasPrefix(from, client.Status.PodIP+":") {
		t.Errorf("the server answered %q: want it to be server, seeing the client's own address %s", out, client.Status.PodIP)
	}
	logs, err := framework.Kubectl(t, "logs", "-n", ns, "server")
	if err != nil || !strings.Contains(logs, "serving on :8080") {
		t.Errorf("kubectl logs server: %q, %v", logs, err)
	}
}
