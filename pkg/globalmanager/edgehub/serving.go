package edgehub

import (
	"context"
	"fmt"
	"time"

	"github.com/nereid-ml/nereid/internal/cached"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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

// Owner is the owner reference the GlobalManager puts on what it creates in
// its namespace (the edge Leases, the hub's Secret and CA ConfigMap, the
// leader election Lease), nil for none: its Deployment as it is now, so that
// deleting the Deployment (helm uninstall) has the garbage collector delete
// them too.
type Owner func() *metav1.OwnerReference

// FollowOwner follows the GlobalManager's Deployment in namespace with a
// watch of that one object, so that the owner is the Deployment as it is
// when an object is made, not when the GlobalManager started: a Deployment
// made again (a new UID) owns what is made after, and one not there yet at
// the start owns what is made once it is. A Deployment not there (going,
// or orphaned) is no owner, rather than one the garbage collector would
// take away at once. An empty name is no owner. It returns once the watch
// has listed, and follows until ctx ends.
func FollowOwner(ctx context.Context, client kubernetes.Interface, namespace, deployment string) (Owner, error) {
	if deployment == "" {
		return func() *metav1.OwnerReference { return nil }, nil
	}
	inf := appsinformers.NewFilteredDeploymentInformer(client, namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", deployment).String()
	})
	if err := inf.SetTransform(func(obj any) (any, error) {
		if d, ok := obj.(*appsv1.Deployment); ok {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, UID: d.UID}}, nil
		}
		return obj, nil
	}); err != nil {
		return nil, fmt.Errorf("following the GlobalManager's Deployment: %w", err)
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("following the GlobalManager's Deployment %s/%s: %w", namespace, deployment, ctx.Err())
	}
	logger := klog.FromContext(ctx)
	return func() *metav1.OwnerReference {
		d, ok := cached.Get[*appsv1.Deployment](inf.GetStore(), namespace+"/"+deployment)
		if !ok {
			logger.V(2).Info("The GlobalManager's Deployment is not there; what it creates now gets no owner", "deployment", klog.KRef(namespace, deployment))
			return nil
		}
		return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}
	}, nil
}

// ref is the owner now; nil for a nil Owner.
func (o Owner) ref() *metav1.OwnerReference {
	if o == nil {
		return nil
	}
	return o()
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
