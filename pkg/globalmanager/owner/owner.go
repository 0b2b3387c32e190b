// Package owner is what owns the objects the GlobalManager makes in its own
// namespace (the edge Leases, the hub's Secret and CA ConfigMap, the leader
// election Lease, the DIJob servers' Secrets and Services): its Deployment as
// it is now, followed with a watch of that one object, so that helm uninstall
// takes them with it. A package of its own so that what needs the owner (the
// hub, the DIJob servers, leader election) need not import each other.
package owner

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/internal/cached"
)

// Owner is the owner reference the GlobalManager puts on what it creates in
// its namespace (the edge Leases, the hub's Secret and CA ConfigMap, the
// leader election Lease), nil for none: its Deployment as it is now, so that
// deleting the Deployment (helm uninstall) has the garbage collector delete
// them too.
type Owner func() *metav1.OwnerReference

// Follow follows the GlobalManager's Deployment in namespace with a
// watch of that one object, so that the owner is the Deployment as it is
// when an object is made, not when the GlobalManager started: a Deployment
// made again (a new UID) owns what is made after, and one not there yet at
// the start owns what is made once it is. A Deployment not there (going,
// or orphaned) is no owner, rather than one the garbage collector would
// take away at once. An empty name is no owner. It returns once the watch
// has listed, and follows until ctx ends.
func Follow(ctx context.Context, client kubernetes.Interface, namespace, deployment string) (Owner, error) {
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

// Ref is the owner now; nil for a nil Owner.
func (o Owner) Ref() *metav1.OwnerReference {
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
