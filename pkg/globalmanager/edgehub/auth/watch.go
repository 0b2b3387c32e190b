package auth

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// What admits a connection is watched, so that the Authenticator's caches
// answer for it and the hub ends a connection as soon as what admitted it
// goes (Hooks): the LocalControllers' Pods (one informer per accepted
// ServiceAccount, their metadata only), the accepted ServiceAccounts, the
// edge nodes (their labels only) and the LocalControllers' DaemonSet (its
// identity only). Each cache keeps only what identifies an object, so that
// ten thousand LocalControllers cost the hub little memory.

// Hooks are told what the watches see go, once the Authenticator has
// dropped what it cached of it: the hub ends the connections it admitted.
type Hooks struct {
	// PodGone: a LocalController Pod was deleted.
	PodGone func(uid types.UID)
	// PodControllerChanged: pod's controller changed (the DaemonSet
	// released it).
	PodControllerChanged func(pod *corev1.Pod)
	// ServiceAccountChanged: the accepted ServiceAccount sa
	// (namespace/name) was made, deleted or made again; current is it now,
	// nil when deleted.
	ServiceAccountChanged func(sa string, current *corev1.ServiceAccount)
	// NodeLeft: node is no longer an edge node (deleted, or its labels no
	// longer match).
	NodeLeft func(node string)
	// NodeJoined, if set: node is an edge node now (made, or its labels
	// match now).
	NodeJoined func(node string)
	// DaemonSetChanged: the LocalControllers' DaemonSet was made, deleted or
	// made again; current is it now, nil when deleted.
	DaemonSetChanged func(current *appsv1.DaemonSet)
}

// Watch makes the informers of what admits a connection, and the issuer's
// keys, telling hooks what goes; it starts nothing (Start does). Every hook
// must be set.
func (a *Authenticator) Watch(hooks Hooks) error {
	if err := a.watchLocalControllerPods(hooks); err != nil {
		return err
	}
	if err := a.watchEdgeNodes(hooks); err != nil {
		return err
	}
	return a.watchDaemonSet(hooks)
}

// Start starts the informers Watch made, and the reads of the issuer's
// keys, until ctx ends, and returns the informers to wait for before
// connections are taken: not the accepted ServiceAccounts', which only the
// hub's own verification of tokens needs: until they are read (or if they
// cannot be), tokens are reviewed.
func (a *Authenticator) Start(ctx context.Context) []cache.InformerSynced {
	var synced []cache.InformerSynced
	for _, inf := range append([]cache.SharedIndexInformer{a.edgeNodes, a.lcDaemonSet}, a.lcPods...) {
		if inf == nil {
			continue
		}
		go inf.Run(ctx.Done())
		synced = append(synced, inf.HasSynced)
	}
	for _, inf := range a.lcAccounts {
		go inf.Run(ctx.Done())
	}
	if a.keys != nil {
		go a.keys.Run(ctx)
	}
	return synced
}

// Caches are the Authenticator's caches, as Watch made them.
type Caches struct {
	// Pods are the LocalController Pods, one store per accepted
	// ServiceAccount, their metadata and controller only.
	Pods []cache.Store
	// EdgeNodes are the nodes the node selector picks, their labels only.
	EdgeNodes cache.Store
}

// Caches returns the Authenticator's caches; nil stores before Watch.
func (a *Authenticator) Caches() Caches { return Caches{Pods: a.podCache, EdgeNodes: a.nodes} }

// serviceAccountChanged forgets the cached identities of sa, and tells
// hooks.
func (a *Authenticator) serviceAccountChanged(hooks Hooks, sa string, current *corev1.ServiceAccount) {
	a.ForgetServiceAccount(sa)
	hooks.ServiceAccountChanged(sa, current)
}

// nodeLeft forgets the cached identities on node, and tells hooks.
func (a *Authenticator) nodeLeft(hooks Hooks, node string) {
	a.ForgetNode(node)
	hooks.NodeLeft(node)
}

// daemonSetChanged forgets every cached outcome, and tells hooks.
func (a *Authenticator) daemonSetChanged(hooks Hooks, current *appsv1.DaemonSet) {
	a.ForgetDaemonSet()
	hooks.DaemonSetChanged(current)
}

// RegisterKeysGauge registers with reg, when both are set, the gauge of the
// token issuer's keys the hub holds.
func (a *Authenticator) RegisterKeysGauge(reg prometheus.Registerer) error {
	if reg == nil || a.keys == nil {
		return nil
	}
	keys := a.keys
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "nereid", Subsystem: "edgehub", Name: "token_issuer_keys",
		Help: "ServiceAccount token signing keys the hub holds, read from the API server's /openid/v1/jwks; 0 when it cannot read them, and every token then goes to a TokenReview."},
		func() float64 { return float64(keys.Count()) })); err != nil {
		return fmt.Errorf("registering edge hub metrics: %w", err)
	}
	return nil
}

// watchLocalControllerPods makes one informer per accepted ServiceAccount,
// over the Pods that run as it (a field selector, so no other Pod is
// cached), keeping only their metadata.
func (a *Authenticator) watchLocalControllerPods(hooks Hooks) error {
	for _, sa := range a.accounts {
		ns, name, _ := strings.Cut(sa, "/")
		inf := coreinformers.NewFilteredPodInformer(a.client, ns, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.serviceAccountName", name).String()
		})
		if err := inf.SetTransform(podMetadataOnly); err != nil {
			return fmt.Errorf("watching LocalController pods: %w", err)
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(oldObj, newObj any) {
				o, n := oldObj.(*corev1.Pod), newObj.(*corev1.Pod)
				if ControllerUID(o) != ControllerUID(n) {
					a.ForgetPodIdentities(n.UID)
					hooks.PodControllerChanged(n)
				}
			},
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				if pod, ok := obj.(*corev1.Pod); ok {
					a.ForgetPod(pod.UID)
					hooks.PodGone(pod.UID)
				}
			},
		}); err != nil {
			return fmt.Errorf("watching LocalController pods: %w", err)
		}
		a.lcPods = append(a.lcPods, inf)
		a.podCache = append(a.podCache, inf.GetStore())
	}
	// The keys refuse junk even when every token is reviewed.
	a.keys = tokenreview.NewIssuerKeys(a.client.CoreV1().RESTClient(), a.clock)
	for _, sa := range a.accounts {
		ns, name, _ := strings.Cut(sa, "/")
		inf := coreinformers.NewFilteredServiceAccountInformer(a.client, ns, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
		if err := inf.SetTransform(func(obj any) (any, error) {
			if a, ok := obj.(*corev1.ServiceAccount); ok {
				return &corev1.ServiceAccount{ObjectMeta: identifyingMeta(a.ObjectMeta)}, nil
			}
			return obj, nil
		}); err != nil {
			return fmt.Errorf("watching LocalController ServiceAccounts: %w", err)
		}
		// A ServiceAccount deleted (or made again, another UID) ends the
		// connections of its tokens, and takes the cached acceptances of
		// its tokens with it.
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { a.serviceAccountChanged(hooks, sa, obj.(*corev1.ServiceAccount)) },
			UpdateFunc: func(oldObj, newObj any) {
				if o, n := oldObj.(*corev1.ServiceAccount), newObj.(*corev1.ServiceAccount); o.UID != n.UID || n.DeletionTimestamp != nil {
					a.serviceAccountChanged(hooks, sa, n)
				}
			},
			DeleteFunc: func(any) { a.serviceAccountChanged(hooks, sa, nil) },
		}); err != nil {
			return fmt.Errorf("watching LocalController ServiceAccounts: %w", err)
		}
		a.lcAccounts = append(a.lcAccounts, inf)
		a.accountCache = append(a.accountCache, inf.GetStore())
	}
	return nil
}

// watchEdgeNodes caches the edge nodes' labels, for the authenticator.
func (a *Authenticator) watchEdgeNodes(hooks Hooks) error {
	a.edgeNodes = coreinformers.NewFilteredNodeInformer(a.client, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.LabelSelector = a.nodeSelector.String()
	})
	err := a.edgeNodes.SetTransform(func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		meta := identifyingMeta(n.ObjectMeta)
		meta.Labels = n.Labels
		return &corev1.Node{ObjectMeta: meta}, nil
	})
	if err != nil {
		return fmt.Errorf("watching edge nodes: %w", err)
	}
	// A node deleted, or whose labels no longer match (the watch of a
	// label selector then sends a deletion), is no longer an edge node.
	if _, err := a.edgeNodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok && hooks.NodeJoined != nil {
				hooks.NodeJoined(n.Name)
			}
		},
		UpdateFunc: func(_, newObj any) {
			if n := newObj.(*corev1.Node); !a.nodeSelector.Matches(labels.Set(n.Labels)) {
				a.nodeLeft(hooks, n.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				a.nodeLeft(hooks, n.Name)
			}
		},
	}); err != nil {
		return fmt.Errorf("watching edge nodes: %w", err)
	}
	a.nodes = a.edgeNodes.GetStore()
	return nil
}

// watchDaemonSet caches the LocalControllers' DaemonSet, its identity only.
// A DaemonSet made, deleted or made again takes the cached outcomes of
// tokens with it, and the connections of its old Pods.
func (a *Authenticator) watchDaemonSet(hooks Hooks) error {
	ds := a.daemonSetName
	a.lcDaemonSet = appsinformers.NewFilteredDaemonSetInformer(a.client, ds.Namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", ds.Name).String()
	})
	err := a.lcDaemonSet.SetTransform(func(obj any) (any, error) {
		if d, ok := obj.(*appsv1.DaemonSet); ok {
			return &appsv1.DaemonSet{ObjectMeta: identifyingMeta(d.ObjectMeta)}, nil
		}
		return obj, nil
	})
	if err != nil {
		return fmt.Errorf("watching the LocalControllers' DaemonSet: %w", err)
	}
	if _, err := a.lcDaemonSet.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { a.daemonSetChanged(hooks, obj.(*appsv1.DaemonSet)) },
		UpdateFunc: func(oldObj, newObj any) {
			if o, n := oldObj.(*appsv1.DaemonSet), newObj.(*appsv1.DaemonSet); o.UID != n.UID || (n.DeletionTimestamp != nil) != (o.DeletionTimestamp != nil) {
				a.daemonSetChanged(hooks, n)
			}
		},
		DeleteFunc: func(any) { a.daemonSetChanged(hooks, nil) },
	}); err != nil {
		return fmt.Errorf("watching the LocalControllers' DaemonSet: %w", err)
	}
	a.daemonSets = a.lcDaemonSet.GetStore()
	return nil
}

// podMetadataOnly keeps of a cached Pod only what identifies it, and its
// controller reference.
func podMetadataOnly(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	meta := identifyingMeta(pod.ObjectMeta)
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		meta.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	return &corev1.Pod{ObjectMeta: meta}, nil
}

// identifyingMeta is what of an object's metadata identifies it, for a
// cache that keeps no more.
func identifyingMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp}
}
