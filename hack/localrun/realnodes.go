package localrun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// DI-orchestrator v0.2's name of its replicas server, which DI-engine's v1
// coordinators dial (its samples' system_addr): with real nodes the local
// run makes this Service in front of the GlobalManager's v1 replicas server.
const (
	DIV1ServerNamespace   = "di-system"
	DIV1ServerService     = "di-server"
	DIV1ServerServicePort = 8080
)

// renderLocalControllers renders the chart's LocalControllers (their
// ServiceAccount and DaemonSet) with Helm, as release "nereid" in Namespace
// (so with the names the GlobalManager's --edge-daemonset names), with the
// values a cluster whose edge nodes reach the hub at an address of their
// network uses: localController.gmAddress, here the gateway address. The
// image is the chart's own, which `make images` builds and hack/realnode
// imports into the real nodes.
func (r *Run) renderLocalControllers(ctx context.Context) (*appsv1.DaemonSet, error) {
	home := filepath.Join(r.OutDir, "real", "helm")
	args := []string{"template", "nereid", r.Chart, "--namespace", Namespace,
		"--show-only", "templates/localcontroller.yaml",
		"--set", "localController.gmAddress=" + r.Real.GatewayIP + ":" + strconv.Itoa(r.FirstPort+1)}
	if r.Nodes.EveryNode() {
		args = append(args, "--set", "localController.everyNode=true")
	}
	cmd := exec.CommandContext(ctx, r.Helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("helm %v: %w: %s", args, err, stderr)
	}
	file := filepath.Join(r.OutDir, "real", "localcontroller.yaml")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return nil, err
	}
	objs, err := ReadManifests(file)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			return nil, fmt.Errorf("reading the chart's DaemonSet: %w", err)
		}
		return &ds, nil
	}
	return nil, fmt.Errorf("no DaemonSet in the chart's templates/localcontroller.yaml (%s)", file)
}

// ensureDIV1ServerService makes di-system/di-server, a Service without a
// selector whose one endpoint is the GlobalManager's v1 replicas server on
// the gateway address: DI-engine's coordinators in real pods dial it by
// name, and kube-proxy takes them there from their own addresses, which the
// server checks.
func (r *Run) ensureDIV1ServerService(ctx context.Context, kube kubernetes.Interface) error {
	if err := EnsureNamespace(ctx, kube, DIV1ServerNamespace); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: DIV1ServerService, Namespace: DIV1ServerNamespace},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: DIV1ServerServicePort,
			TargetPort: intstr.FromInt32(int32(r.DIV1ServerPort))}}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: DIV1ServerService + "-globalmanager", Namespace: DIV1ServerNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: DIV1ServerService, discoveryv1.LabelManagedBy: fieldManager}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{r.Real.GatewayIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(r.DIV1ServerPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := kube.CoreV1().Services(DIV1ServerNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("making Service %s/%s: %w", DIV1ServerNamespace, DIV1ServerService, err)
	}
	slices := kube.DiscoveryV1().EndpointSlices(DIV1ServerNamespace)
	if err := slices.Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("making EndpointSlice %s/%s: %w", DIV1ServerNamespace, slice.Name, err)
	}
	return nil
}

// waitForRealLocalControllers waits until the chart's LocalController Pod
// on every real edge node (every real node, as Sedna runs them, when
// LocalControllers run on every node) is Ready: it runs there, its store on the node's
// hostPath, connected to the hub.
func (r *Run) waitForRealLocalControllers(ctx context.Context, kube kubernetes.Interface) error {
	ds, err := kube.AppsV1().DaemonSets(Namespace).Get(ctx, LocalControllerDaemonSet, metav1.GetOptions{})
	if err != nil {
		return err
	}
	nodes := r.Real.Edge
	if r.Nodes.EveryNode() {
		nodes = r.Real.Nodes
	}
	pods, err := DaemonSetPods(ctx, kube, ds, nodes, r.ReadyTimeout)
	if err != nil {
		return err
	}
	for node, pod := range pods {
		name := pod.Name
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, r.ReadyTimeout, true, func(ctx context.Context) (bool, error) {
			p, err := kube.CoreV1().Pods(Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("the LocalController Pod %s/%s on real node %s is not Ready within %s (kubectl describe pod -n %s %s; its logs: kubectl logs -n %s %s)",
				Namespace, name, node, r.ReadyTimeout, Namespace, name, Namespace, name)
		}
		r.Logf("LocalController of real node %s ready (Pod %s/%s)", node, Namespace, name)
	}
	return nil
}
