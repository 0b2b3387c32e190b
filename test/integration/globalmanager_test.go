package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
	"github.com/nereid-ml/nereid/test/framework"
)

// healthAddress is where a GlobalManager serves /healthz, /readyz and /metrics,
// read from its log (the tests give it port 0).
func healthAddress(t *testing.T, gm *framework.Process) string {
	t.Helper()
	var addr string
	framework.Eventually(t, 10*time.Second, "the GlobalManager to log its health address", func(context.Context) (bool, error) {
		addr = gm.HealthAddress()
		return addr != "", nil
	})
	return addr
}

func get(addr, path string) (int, string, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestOnlyTheLeaderActsAndAStandbyTakesOver runs two GlobalManagers with
// leader election: one acts, the other waits; when the leader is killed the
// standby takes the Lease and heals what happened meanwhile.
func TestOnlyTheLeaderActsAndAStandbyTakesOver(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	election := []string{"--leader-elect=true", "--leader-elect-namespace=" + ns,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	// Each runs an edge hub as if in a Pod of its own: the one that leads
	// labels its Pod for the hub's Service.
	inPod := func(pod string) []string {
		createPod(t, ns, pod)
		return append([]string{"--edge-address=127.0.0.1:" + strconv.Itoa(framework.FreePort(t)), "--edge-namespace=" + ns,
			"--pod-name=" + pod, "--pod-namespace=" + ns}, election...)
	}
	a := framework.StartGlobalManager(t, ns, inPod("gm-a")...)
	framework.Eventually(t, 20*time.Second, "the first GlobalManager to lead", func(context.Context) (bool, error) {
		return strings.Contains(a.Log(), "Successfully acquired lease"), nil
	})
	b := framework.StartGlobalManager(t, ns, inPod("gm-b")...)
	job := applyFederatedExample(t, ns)
	waitServing(t, ns, "gm-a", true)
	// A standby is ready (to take over), so that a PodDisruptionBudget can
	// let either go, but says it stands by; its Pod draws no edge node.
	framework.Eventually(t, 20*time.Second, "the standby to be ready as a standby", func(context.Context) (bool, error) {
		code, body, err := get(healthAddress(t, b), "/readyz")
		return err == nil && code == http.StatusOK && strings.HasPrefix(body, "ok: standby"), nil
	})
	waitServing(t, ns, "gm-b", false)

	lease, err := framework.KubeClient(t).CoordinationV1().Leases(ns).Get(t.Context(), "nereid-globalmanager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.Log(), "Starting workers") || strings.Contains(b.Log(), "Successfully acquired lease") {
		t.Fatalf("the standby acts while %s holds the lease", *lease.Spec.HolderIdentity)
	}
	for _, gm := range []*framework.Process{a, b} {
		code, _, err := get(healthAddress(t, gm), "/healthz")
		if err != nil || code != http.StatusOK {
			t.Errorf("/healthz of a GlobalManager: %d, %v", code, err)
		}
	}
	code, body, err := get(healthAddress(t, a), "/metrics")
	if err != nil || code != http.StatusOK || !strings.Contains(body, "nereid_controller_children_created_total") {
		t.Errorf("/metrics of the leader: %d, %v, no nereid_controller_children_created_total", code, err)
	}

	a.Kill(t)
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for name := range pods {
		victim = name
		break
	}
	if err := framework.KubeClient(t).CoreV1().Pods(ns).Delete(t.Context(), victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the standby to take over and recreate the pod", func(ctx context.Context) (bool, error) {
		now, err := livePods(ctx, t, ns, job)
		p, ok := now[victim]
		return ok && p.UID != pods[victim].UID, err
	})
	if !strings.Contains(b.Log(), "Successfully acquired lease") {
		t.Errorf("the pod came back but the standby never took the lease")
	}
	waitServing(t, ns, "gm-b", true)
	// Killed, a kept its label; started again (as its container would be),
	// it takes it off before it stands by.
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	waitServing(t, ns, "gm-a", false)
}

// createPod makes a Pod that kwok runs on cloud-0, standing for a
// GlobalManager's own Pod.
func createPod(t *testing.T, ns, name string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: "cloud-0", Containers: []corev1.Container{{Name: "globalmanager", Image: "nereid/globalmanager"}}},
	}
	if _, err := framework.KubeClient(t).CoreV1().Pods(ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitServing waits until the Pod name carries the edge hub's serving label
// (serving) or does not.
func waitServing(t *testing.T, ns, name string, serving bool) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("Pod %s serving=%t", name, serving), func(ctx context.Context) (bool, error) {
		pod, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return (pod.Labels[edgehub.LabelServing] == edgehub.ServingValue) == serving, nil
	})
}

// TestWhatTheGlobalManagerCreatesGoesWithItsDeployment runs a GlobalManager
// as its Deployment's (--owner-deployment): what it creates in its namespace
// (the leader election Lease, the hub's Secret and CA ConfigMap, an edge
// node's Lease) is owned by the Deployment, so that deleting it (as helm
// uninstall does) has the garbage collector delete them all.
func TestWhatTheGlobalManagerCreatesGoesWithItsDeployment(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	kube := framework.KubeClient(t)
	replicas := int32(0)
	labels := map[string]string{"app": "gm"}
	d, err := kube.AppsV1().Deployments(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "nereid-globalmanager", Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "globalmanager", Image: "nereid/globalmanager"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns, "--owner-deployment="+d.Name,
		"--leader-elect=true", "--leader-elect-namespace="+ns)
	framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"))

	owned := map[string]func(ctx context.Context) (metav1.Object, error){
		"leader election Lease": func(ctx context.Context) (metav1.Object, error) {
			return kube.CoordinationV1().Leases(ns).Get(ctx, "nereid-globalmanager", metav1.GetOptions{})
		},
		"edge-0's Lease": func(ctx context.Context) (metav1.Object, error) {
			return kube.CoordinationV1().Leases(ns).Get(ctx, links.LeaseName("edge-0"), metav1.GetOptions{})
		},
		"hub's Secret": func(ctx context.Context) (metav1.Object, error) {
			return kube.CoreV1().Secrets(ns).Get(ctx, edgehub.TLSSecretName, metav1.GetOptions{})
		},
		"hub's CA ConfigMap": func(ctx context.Context) (metav1.Object, error) {
			return kube.CoreV1().ConfigMaps(ns).Get(ctx, edgehub.CAConfigMapName, metav1.GetOptions{})
		},
	}
	for what, get := range owned {
		framework.Eventually(t, 30*time.Second, "the "+what+" owned by the Deployment", func(ctx context.Context) (bool, error) {
			obj, err := get(ctx)
			if apierrors.IsNotFound(err) {
				return false, nil
			} else if err != nil {
				return false, err
			}
			for _, r := range obj.GetOwnerReferences() {
				if r.UID == d.UID {
					return true, nil
				}
			}
			return false, nil
		})
	}

	hub.Process.Stop(t)
	if err := kube.AppsV1().Deployments(ns).Delete(t.Context(), d.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for what, get := range owned {
		framework.Eventually(t, 60*time.Second, "the garbage collector to delete the "+what, func(ctx context.Context) (bool, error) {
			_, err := get(ctx)
			return apierrors.IsNotFound(err), nil
		})
	}
}
