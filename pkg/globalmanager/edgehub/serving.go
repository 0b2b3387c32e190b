package edgehub

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// LabelServing is on the GlobalManager's own Pod while its hub listens, with
// the value ServingValue: the hub's Service selects it, so that edge nodes
// reach the replica that leads, never a standby (which does not listen).
const (
	LabelServing = "nereid.io/edgehub"
	ServingValue = "serving"
)

// PodRef names the GlobalManager's own Pod (from the downward API); a zero
// PodRef (a GlobalManager that runs outside a Pod) labels nothing.
type PodRef struct {
	Namespace, Name string
}

// labelServingTimeout bounds how long the hub tries to label its Pod before
// it gives up: a hub that edge nodes cannot reach is of no use.
const labelServingTimeout = 30 * time.Second

// SetServing puts the serving label on the Pod (serving) or takes it off. A
// GlobalManager takes it off at start, before it leads: a container that
// restarts in a Pod that led must not draw edge connections as a standby.
func SetServing(ctx context.Context, client kubernetes.Interface, pod PodRef, serving bool) error {
	if pod.Name == "" {
		return nil
	}
	value := "null"
	if serving {
		value = `"` + ServingValue + `"`
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, LabelServing, value))
	ctx, cancel := context.WithTimeout(ctx, labelServingTimeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(last) || apierrors.IsForbidden(last) {
			return false, last // no retry mends these
		}
		if last != nil {
			klog.FromContext(ctx).V(2).Info("Cannot label the GlobalManager's Pod yet; retrying", "pod", pod, "err", last)
		}
		return last == nil, nil
	})
	if err != nil {
		if last != nil {
			err = last
		}
		return fmt.Errorf("setting label %s of the GlobalManager's Pod %s/%s (serving: %t): %w", LabelServing, pod.Namespace, pod.Name, serving, err)
	}
	return nil
}

// OwnerOf is the owner reference the GlobalManager puts on what it creates in
// its namespace (the edge Leases, the hub's Secret and CA ConfigMap, the
// leader election Lease): its Deployment, read from the API server, so that
// deleting the Deployment (helm uninstall) has the garbage collector delete
// them too. An empty name, or a Deployment that is not there, is no owner.
func OwnerOf(ctx context.Context, client kubernetes.Interface, namespace, deployment string) (*metav1.OwnerReference, error) {
	if deployment == "" {
		return nil, nil
	}
	d, err := client.AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Going (an uninstall) or orphaned: what is made now has no owner,
		// rather than one the garbage collector would take away at once.
		klog.FromContext(ctx).Error(err, "The GlobalManager's Deployment is not there; what it creates gets no owner", "deployment", klog.KRef(namespace, deployment))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the GlobalManager's Deployment %s/%s, the owner of what it creates there: %w", namespace, deployment, err)
	}
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}, nil
}

// OwnedBy adds owner (when not nil) to m's owner references unless it is
// there, saying whether it added it.
func OwnedBy(m *metav1.ObjectMeta, owner *metav1.OwnerReference) bool {
	if owner == nil {
		return false
	}
	for _, r := range m.OwnerReferences {
		if r.UID == owner.UID {
			return false
		}
	}
	m.OwnerReferences = append(m.OwnerReferences, *owner)
	return true
}
