package localrun

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub"
)

// EdgeNodeLabel is the label of the local control plane's edge nodes (and the
// GlobalManager's default --edge-node-selector).
const EdgeNodeLabel = "node-role.kubernetes.io/edge"

// KwokNodeLabel is the label hack/local-up.sh gives the nodes kwok plays,
// with the value KwokNodeLabelValue.
const (
	KwokNodeLabel      = "type"
	KwokNodeLabelValue = "kwok"
)

// EdgeDaemonSet is the LocalControllers' DaemonSet, which gives each
// LocalController the identity a real one has: its node's Pod of the
// DaemonSet, which runs as ServiceAccount. The controller-manager makes its
// Pods, the scheduler binds them, kwok runs them (without their image). The
// edge hub accepts a token only from such a Pod (--edge-daemonset,
// --edge-service-accounts) and reads the node from it.
type EdgeDaemonSet struct {
	Namespace, Name, ServiceAccount string
	// Image is its Pods' image, which kwok never pulls; it tells the
	// stand-ins apart from a real DaemonSet.
	Image string
	// NodeSelector picks the nodes that get a Pod; nil puts one on every
	// node.
	NodeSelector map[string]string
	// Template, when set, is the DaemonSet itself (the chart's, for real
	// nodes, which run its Pods): Image and NodeSelector are then not used.
	Template *appsv1.DaemonSet
}

// EdgeIdentity is what proves one LocalController's node: its node's Pod of
// the DaemonSet and a token bound to that Pod with the edge hub's audience.
type EdgeIdentity struct {
	Pod   *corev1.Pod
	Token string
}

// podLabels are the labels of the DaemonSet's Pods: its selector.
func (d EdgeDaemonSet) podLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "nereid-localcontroller", "nereid.io/daemonset": d.Name}
}

func (d EdgeDaemonSet) object() *appsv1.DaemonSet {
	if d.Template != nil {
		ds := d.Template.DeepCopy()
		ds.Namespace, ds.Name = d.Namespace, d.Name
		return ds
	}
	labels := d.podLabels()
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: d.ServiceAccount, NodeSelector: d.NodeSelector,
					// As the chart's Pods do: an unready node does not
					// evict them and void their tokens.
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: "localcontroller", Image: d.Image}},
				},
			},
		},
	}
}

// Ensure makes the ServiceAccount and the DaemonSet unless they are there as
// d describes them, and returns the DaemonSet. One made otherwise (on other
// nodes, say, by a run with other settings) is replaced, so that none of its
// Pods, and no token bound to one, outlives the change.
func (d EdgeDaemonSet) Ensure(ctx context.Context, kube kubernetes.Interface) (*appsv1.DaemonSet, error) {
	if err := EnsureServiceAccount(ctx, kube, d.Namespace, d.ServiceAccount); err != nil {
		return nil, err
	}
	want := d.object()
	client := kube.AppsV1().DaemonSets(d.Namespace)
	var ds *appsv1.DaemonSet
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		ds, err = client.Create(ctx, want, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return err == nil, err
		}
		ds, err = client.Get(ctx, d.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil // deleted meanwhile: create it
		} else if err != nil {
			return false, err
		}
		if d.describes(ds) {
			return true, nil
		}
		err = client.Delete(ctx, d.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ds.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("making DaemonSet %s/%s: %w", d.Namespace, d.Name, err)
	}
	return ds, nil
}

// describes says whether ds is the DaemonSet d describes, as far as the
// identities of its Pods go.
func (d EdgeDaemonSet) describes(ds *appsv1.DaemonSet) bool {
	if t := d.Template; t != nil {
		return ds.DeletionTimestamp == nil && equality.Semantic.DeepEqual(ds.Spec.Selector, t.Spec.Selector) &&
			equality.Semantic.DeepDerivative(t.Spec.Template, ds.Spec.Template)
	}
	pod := ds.Spec.Template.Spec
	return ds.DeletionTimestamp == nil && ds.Spec.Selector != nil && maps.Equal(ds.Spec.Selector.MatchLabels, d.podLabels()) &&
		pod.ServiceAccountName == d.ServiceAccount && maps.Equal(pod.NodeSelector, d.NodeSelector) &&
		len(pod.Containers) == 1 && pod.Containers[0].Image == d.Image
}

// Identities makes the DaemonSet if needed (Ensure), waits up to timeout for
// its Pod on each of nodes, and returns, by node, that Pod and a token bound
// to it with the edge hub's audience, valid for lifetime.
func (d EdgeDaemonSet) Identities(ctx context.Context, kube kubernetes.Interface, nodes []string, timeout, lifetime time.Duration) (map[string]EdgeIdentity, error) {
	ds, err := d.Ensure(ctx, kube)
	if err != nil {
		return nil, err
	}
	pods, err := DaemonSetPods(ctx, kube, ds, nodes, timeout)
	if err != nil {
		return nil, err
	}
	ids := make(map[string]EdgeIdentity, len(nodes))
	for node, pod := range pods {
		token, err := BoundToken(ctx, kube, pod, edgehub.DefaultTokenAudience, lifetime)
		if err != nil {
			return nil, err
		}
		ids[node] = EdgeIdentity{Pod: pod, Token: token}
	}
	return ids, nil
}

// DaemonSetPods waits up to timeout until ds has a Pod bound to each of
// nodes, not being deleted, and returns them by node. A token bound to a Pod
// names its node only once the Pod is bound.
func DaemonSetPods(ctx context.Context, kube kubernetes.Interface, ds *appsv1.DaemonSet, nodes []string, timeout time.Duration) (map[string]*corev1.Pod, error) {
	selector, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	want := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		want[n] = true
	}
	found := make(map[string]*corev1.Pod, len(nodes))
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		// From the API server's cache: a fleet's thousands of Pods are
		// listed every poll.
		list, err := kube.CoreV1().Pods(ds.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String(), ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			p := &list.Items[i]
			ref := metav1.GetControllerOfNoCopy(p)
			if want[p.Spec.NodeName] && ref != nil && ref.UID == ds.UID && p.DeletionTimestamp == nil {
				found[p.Spec.NodeName] = p
			}
		}
		return len(found) == len(want), nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the Pods of DaemonSet %s/%s on %d nodes (%d bound; the controller-manager makes them, the scheduler binds them): %w",
			ds.Namespace, ds.Name, len(want), len(found), err)
	}
	return found, nil
}

// BoundToken returns a token of pod's ServiceAccount bound to pod, as the
// kubelet would project into it, with audience ("" for the API server's
// own), valid for lifetime.
func BoundToken(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod, audience string, lifetime time.Duration) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(lifetime / time.Second)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating a token bound to %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return tr.Status.Token, nil
}

// EnsureServiceAccount creates the ServiceAccount namespace/name unless it
// exists.
func EnsureServiceAccount(ctx context.Context, kube kubernetes.Interface, namespace, name string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s/%s: %w", namespace, name, err)
	}
	return nil
}

// EnsureNamespace makes namespace exist, waiting first for one being deleted
// to go.
func EnsureNamespace(ctx context.Context, kube kubernetes.Interface, namespace string) error {
	client := kube.CoreV1().Namespaces()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ns, err := client.Get(ctx, namespace, metav1.GetOptions{})
		switch {
		case err == nil:
			return ns.DeletionTimestamp == nil, nil
		case !apierrors.IsNotFound(err):
			return false, err
		}
		_, err = client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	if err != nil {
		return fmt.Errorf("making namespace %s (waiting for one being deleted to go): %w", namespace, err)
	}
	return nil
}
