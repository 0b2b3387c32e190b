package common

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Switching from Sedna in place. Sedna's GlobalManager labels every child it
// makes for an owner with <kind>.sedna.io/name, <kind>.sedna.io/uid and
// <kind>.sedna.io/worker-type, and gives it a controller reference to the
// owner; its pods have generated names (<owner>-<worker type>-<random>), its
// Services and Deployments fixed ones (<owner>-aggregation, <owner>-cloud,
// <owner>-deployment-edge, …). None carries Nereid's owner-uid label, so
// Nereid's caches, which hold only children with that label, would not see
// them, and the controllers would make a second set of workers beside them.
//
// So before the controllers start, AdoptSednaChildren labels those children as
// the owner's (LabelOwnerUID, …, and LabelAdoptedFrom) without changing
// anything else. The controllers then see them and replace them by the spec
// rule (Children.RemoveAdopted): they are deleted — Deployments in the
// foreground, so that their pods go first — and the owner's own workers are
// created only once every adopted child is gone. An owner never has Sedna's
// workers and Nereid's at once.
//
// They are replaced rather than kept because they cannot work under Nereid:
// a Sedna worker reports under WORKER_NAME "<type>worker-<random>", not its
// pod's name, which Nereid's LocalController refuses; its environment and
// mounts are Sedna's (storage initializer), so it matches no template hash; and
// its Services select Sedna's labels, which Nereid's workers do not carry.

// LabelAdoptedFrom marks a child that Nereid took over from another
// controller; its value names that controller.
const LabelAdoptedFrom = "nereid.io/adopted-from"

// AdoptedFromSedna is LabelAdoptedFrom's value for children of Sedna's GlobalManager.
const AdoptedFromSedna = "sedna"

// whyAdopted is the reason given when an adopted child is deleted.
const whyAdopted = "left by Sedna's GlobalManager; replaced by workers of the current spec"

// SednaLabel is the label key Sedna's GlobalManager puts on an owner's
// children: <lower-case kind>.<group>/<suffix>, suffix name, uid or worker-type.
func SednaLabel(ownerKind schema.GroupVersionKind, suffix string) string {
	return strings.ToLower(ownerKind.Kind) + "." + ownerKind.Group + "/" + suffix
}

// IsAdopted says whether obj is a child Nereid took over from another controller.
func IsAdopted(obj metav1.Object) bool {
	return obj.GetLabels()[LabelAdoptedFrom] != ""
}

// SplitAdopted separates adopted children from the controller's own.
func SplitAdopted[T metav1.Object](objs []T) (own, adopted []T) {
	return partition(objs, func(o T) bool { return !IsAdopted(o) })
}

// partition separates the objects that in accepts from the others, in order.
func partition[T any](objs []T, in func(T) bool) (yes, no []T) {
	for _, o := range objs {
		if in(o) {
			yes = append(yes, o)
		} else {
			no = append(no, o)
		}
	}
	return yes, no
}

// Adopted are an owner's adopted children, by kind.
type Adopted struct {
	Pods        []*corev1.Pod
	Services    []*corev1.Service
	Deployments []*appsv1.Deployment
	HPAs        []*autoscalingv2.HorizontalPodAutoscaler
}

// Len is how many adopted children there are, terminating ones included.
func (a Adopted) Len() int {
	return len(a.Pods) + len(a.Services) + len(a.Deployments) + len(a.HPAs)
}

// RemoveAdopted deletes owner's adopted children that are not already on their
// way out: pods (with expectations, so only call it when they are
// satisfied), Services, autoscalers, and Deployments in the foreground, so a
// Deployment is gone only once its ReplicaSets and pods are. The caller
// creates none of the owner's workers while a.Len() > 0: the deleted
// children's events sync the owner again, and once the cache holds none of
// them the workers of the spec come.
func (c *Children) RemoveAdopted(ctx context.Context, key string, owner Owner, a Adopted) error {
	return c.removeChildren(ctx, key, owner, a, whyAdopted)
}

// removeChildren deletes the children in a that are not already on their
// way out, as RemoveAdopted says, each event saying why.
func (c *Children) removeChildren(ctx context.Context, key string, owner Owner, a Adopted, why string) error {
	var errs []error
	var pods []*corev1.Pod
	for _, p := range a.Pods {
		if !PodTerminating(p) {
			pods = append(pods, p)
		}
	}
	errs = append(errs, c.DeletePods(ctx, key, owner, pods, why))
	for _, s := range a.Services {
		if s.DeletionTimestamp == nil {
			errs = append(errs, DeleteChild(ctx, c, owner, "Service", c.Client.CoreV1().Services(s.Namespace), s, why, nil))
		}
	}
	for _, h := range a.HPAs {
		if h.DeletionTimestamp == nil {
			errs = append(errs, DeleteChild(ctx, c, owner, "HorizontalPodAutoscaler", c.Client.AutoscalingV2().HorizontalPodAutoscalers(h.Namespace), h, why, nil))
		}
	}
	foreground := metav1.DeletePropagationForeground
	for _, d := range a.Deployments {
		if d.DeletionTimestamp == nil {
			errs = append(errs, DeleteChild(ctx, c, owner, "Deployment", c.Client.AppsV1().Deployments(d.Namespace), d, why, &foreground))
		}
	}
	return errors.Join(errs...)
}

// Keep separates the adopted children that keep accepts — those a controller
// keeps and updates to its spec, rather than replaces, because they are
// already what it would make under the same name — from the rest.
func (a Adopted) Keep(keep func(kind string, obj metav1.Object) bool) (kept, rest Adopted) {
	kept.Pods, rest.Pods = partition(a.Pods, func(o *corev1.Pod) bool { return keep("Pod", o) })
	kept.Services, rest.Services = partition(a.Services, func(o *corev1.Service) bool { return keep("Service", o) })
	kept.Deployments, rest.Deployments = partition(a.Deployments, func(o *appsv1.Deployment) bool { return keep("Deployment", o) })
	kept.HPAs, rest.HPAs = partition(a.HPAs, func(o *autoscalingv2.HorizontalPodAutoscaler) bool { return keep("HorizontalPodAutoscaler", o) })
	return kept, rest
}

// UpdatedLabels are the labels of a child a controller updates: its own with
// desired set, and without LabelAdoptedFrom, so an adopted child the
// controller keeps is its own from then on. The labels Sedna gave it stay,
// for what selects by them.
func UpdatedLabels(existing, desired map[string]string) map[string]string {
	l := MergeLabels(existing, desired)
	delete(l, LabelAdoptedFrom)
	return l
}

// adoptable is one kind of child that Sedna's GlobalManager makes: how to
// list candidates and how to patch one.
type adoptable struct {
	kind  string
	list  func(ctx context.Context, namespace string, opts metav1.ListOptions) ([]metav1.Object, error)
	patch func(ctx context.Context, namespace, name string, data []byte) error
}

func adoptables(client kubernetes.Interface) []adoptable {
	return []adoptable{
		{"Pod", func(ctx context.Context, ns string, opts metav1.ListOptions) ([]metav1.Object, error) {
			l, err := client.CoreV1().Pods(ns).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return objects(l.Items), nil
		}, func(ctx context.Context, ns, name string, data []byte) error {
			_, err := client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
			return err
		}},
		{"Service", func(ctx context.Context, ns string, opts metav1.ListOptions) ([]metav1.Object, error) {
			l, err := client.CoreV1().Services(ns).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return objects(l.Items), nil
		}, func(ctx context.Context, ns, name string, data []byte) error {
			_, err := client.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
			return err
		}},
		{"Deployment", func(ctx context.Context, ns string, opts metav1.ListOptions) ([]metav1.Object, error) {
			l, err := client.AppsV1().Deployments(ns).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return objects(l.Items), nil
		}, func(ctx context.Context, ns, name string, data []byte) error {
			_, err := client.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
			return err
		}},
		{"HorizontalPodAutoscaler", func(ctx context.Context, ns string, opts metav1.ListOptions) ([]metav1.Object, error) {
			l, err := client.AutoscalingV2().HorizontalPodAutoscalers(ns).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return objects(l.Items), nil
		}, func(ctx context.Context, ns, name string, data []byte) error {
			_, err := client.AutoscalingV2().HorizontalPodAutoscalers(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
			return err
		}},
	}
}

// objects turns a list's items into their metadata.
func objects[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

// AdoptSednaChildren labels, in namespace (all when empty), the Pods,
// Services, Deployments and autoscalers that Sedna's GlobalManager made for
// owners of ownerKinds, so that the controllers see and replace them (see
// RemoveAdopted). A child is adopted when its controller reference has the
// UID of its <kind>.sedna.io/uid label; a Sedna release that wrote the
// controller's name as the kind (JointInference) gets the owner's kind in
// its reference too, so the garbage collector and the controllers find the
// owner. The patch is conditional on the resourceVersion listed. A child
// that cannot be adopted (it keeps changing, an admission policy refuses the
// patch) is logged and counted in failed and the others are adopted: one
// object, which its namespace's users may own, never stops the GlobalManager.
// A list error is returned for the caller to retry.
func AdoptSednaChildren(ctx context.Context, client kubernetes.Interface, namespace string, ownerKinds []schema.GroupVersionKind) (adopted, failed int, err error) {
	logger := klog.FromContext(ctx)
	for _, ownerKind := range ownerKinds {
		uidLabel := SednaLabel(ownerKind, "uid")
		opts := metav1.ListOptions{LabelSelector: uidLabel + ",!" + LabelOwnerUID}
		for _, res := range adoptables(client) {
			objs, err := res.list(ctx, namespace, opts)
			if err != nil {
				return adopted, failed, fmt.Errorf("listing %ss of %ss made by Sedna: %w", strings.ToLower(res.kind), ownerKind.Kind, err)
			}
			for _, obj := range objs {
				patch, ok, err := adoptionPatch(obj, ownerKind, uidLabel)
				if err == nil && ok {
					err = res.patch(ctx, obj.GetNamespace(), obj.GetName(), patch)
				}
				if apierrors.IsNotFound(err) || (err == nil && !ok) {
					continue // gone meanwhile, or not one to adopt
				}
				if err != nil {
					failed++
					logger.Error(err, "Cannot adopt a child of Sedna's GlobalManager; it stays as it is", "kind", res.kind, "object", klog.KObj(obj))
					continue
				}
				adopted++
				logger.Info("Adopted a child of Sedna's GlobalManager", "kind", res.kind, "object", klog.KObj(obj),
					"owner", klog.KRef(obj.GetNamespace(), metav1.GetControllerOfNoCopy(obj).Name), "ownerKind", ownerKind.Kind)
			}
		}
	}
	return adopted, failed, nil
}

// adoptionPatch is the merge patch that makes obj a child Nereid's
// controllers see; ok is false when obj is not one to adopt.
func adoptionPatch(obj metav1.Object, ownerKind schema.GroupVersionKind, uidLabel string) (patch []byte, ok bool, err error) {
	ref := metav1.GetControllerOfNoCopy(obj)
	uid := obj.GetLabels()[uidLabel]
	if ref == nil || uid == "" || string(ref.UID) != uid {
		// Not the owner's own child: the pods of a Sedna Deployment carry the
		// label too, but their controller is a ReplicaSet.
		return nil, false, nil
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != ownerKind.Group {
		return nil, false, nil
	}
	owner := &metav1.ObjectMeta{Name: ref.Name, UID: ref.UID}
	labels := OwnerLabels(owner, LowerKind(ownerKind))
	labels[LabelAdoptedFrom] = AdoptedFromSedna
	meta := map[string]any{
		"resourceVersion": obj.GetResourceVersion(),
		"labels":          labels,
	}
	if ref.Kind != ownerKind.Kind || ref.APIVersion != ownerKind.GroupVersion().String() {
		refs := make([]metav1.OwnerReference, 0, len(obj.GetOwnerReferences()))
		for _, r := range obj.GetOwnerReferences() {
			if r.UID == ref.UID {
				r.Kind, r.APIVersion = ownerKind.Kind, ownerKind.GroupVersion().String()
			}
			refs = append(refs, r)
		}
		meta["ownerReferences"] = refs
	}
	patch, err = json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return nil, false, fmt.Errorf("encoding the adoption of %s: %w", obj.GetName(), err)
	}
	return patch, true, nil
}
