package common

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Owner is a sedna.io object that owns children.
type Owner interface {
	metav1.Object
	runtime.Object
}

// Children creates and deletes an owner's children the way the upstream Job
// controller does: expectations are raised before a request and lowered when
// it fails, pods are created in slow-start batches so a refusing API server
// sees one failure rather than hundreds, and events follow successful writes.
// Expectations are needed for pods only; Deployments, Services and
// autoscalers have deterministic names and are created without them. It is a
// struct field of each controller, so unit tests can use a fake client.
type Children struct {
	Client       kubernetes.Interface
	Recorder     record.EventRecorder
	Expectations *Expectations
	Metrics      *Metrics
	// Controller names the controller in metrics.
	Controller string
}

// CreatePods creates pods for owner (whose queue key is key). It returns the
// pods it made, as the API server returned them, and the first error; pods
// not attempted after it are released from the expectations.
func (c *Children) CreatePods(ctx context.Context, key string, owner Owner, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	if len(pods) == 0 {
		return nil, nil
	}
	c.Expectations.ExpectCreations(key, len(pods))
	var mu sync.Mutex
	var made []*corev1.Pod
	done, err := slowStart(len(pods), func(i int) error {
		pod, err := c.createPod(ctx, owner, pods[i])
		if pod != nil {
			mu.Lock()
			made = append(made, pod)
			mu.Unlock()
		} else {
			// No add event will come for a create that failed, or for a pod
			// that existed already; waiting for one would stall the owner.
			c.Expectations.CreationObserved(key)
		}
		return err
	})
	for range len(pods) - done {
		c.Expectations.CreationObserved(key)
	}
	// One event per sync, not per pod: events are API writes too, and a large
	// job's hundred "Created pod" lines would tell the user less than one.
	if len(made) > 0 {
		names := make([]string, len(made))
		for i, p := range made {
			names[i] = p.Name
		}
		if !notePods(ctx, "pod", names, made) {
			c.Recorder.Eventf(owner, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created %s", nameList("pod", names))
		}
	}
	return made, err
}

// createPod creates one pod and returns it when a new pod was made. A pod of
// that name that is already owner's (after a restart, or still terminating
// after a delete) is not an error: its events requeue the owner.
func (c *Children) createPod(ctx context.Context, owner Owner, pod *corev1.Pod) (*corev1.Pod, error) {
	made, ok, err := createNamed(ctx, c, owner, "Pod", c.Client.CoreV1().Pods(pod.Namespace), pod)
	if ok {
		klog.FromContext(ctx).V(2).Info("Created pod", "owner", klog.KObj(owner), "pod", pod.Name)
	}
	return made, err
}

// createNamed creates obj, owner's child of a deterministic name, and returns
// it with ok when it was made. A name owner's child holds already is neither
// made nor an error; a name whose holder went between the create and the
// read (a pod deleted just before its replacement) is created once more. A
// create that fails is an event on owner and the error.
func createNamed[T metav1.Object](ctx context.Context, c *Children, owner Owner, kind string, client TypedClient[T], obj T) (made T, ok bool, err error) {
	var none T
	made, err = client.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		freed, cerr := c.confirmOurs(ctx, owner, kind, obj.GetName(), func(ctx context.Context) (metav1.Object, error) {
			return client.Get(ctx, obj.GetName(), metav1.GetOptions{})
		})
		if !freed {
			return none, false, cerr
		}
		made, err = client.Create(ctx, obj, metav1.CreateOptions{})
	}
	if err != nil {
		noun := strings.ToLower(kind)
		c.Recorder.Eventf(owner, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating %s %s: %v", noun, obj.GetName(), err)
		return none, false, fmt.Errorf("creating %s %s: %w", noun, obj.GetName(), err)
	}
	c.Metrics.ChildCreated(c.Controller, kind)
	return made, true, nil
}

// confirmOurs handles AlreadyExists on a deterministic name: after a restart or
// with a stale cache the child may be ours already (fine), or the name may be
// taken by someone else's object (an error the user must see). freed says
// that the object holding the name went between the create and the read (a
// pod deleted just before its replacement): the caller creates once more.
func (c *Children) confirmOurs(ctx context.Context, owner Owner, kind, name string, get func(context.Context) (metav1.Object, error)) (freed bool, err error) {
	existing, err := get(ctx)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading existing %s %s: %w", kind, name, err)
	}
	if IsControlledBy(existing, owner) {
		return false, nil
	}
	err = fmt.Errorf("%s %s already exists and is not controlled by %s", kind, name, owner.GetName())
	c.Recorder.Eventf(owner, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating %s %s: the name is taken by another object", kind, name)
	return false, err
}

// DeletePods deletes pods of owner, each only if it is still the pod with that UID.
func (c *Children) DeletePods(ctx context.Context, key string, owner Owner, pods []*corev1.Pod, why string) error {
	if len(pods) == 0 {
		return nil
	}
	for _, p := range pods {
		c.Expectations.ExpectDeletions(key, p.UID)
	}
	errs := make([]error, len(pods))
	deleted := make([]bool, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			err := c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &p.UID},
			})
			if err != nil {
				c.Expectations.DeletionObserved(key, p.UID)
				if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
					return // gone already, or a different pod by now
				}
				c.Recorder.Eventf(owner, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting pod %s: %v", p.Name, err)
				errs[i] = fmt.Errorf("deleting pod %s: %w", p.Name, err)
				return
			}
			c.Metrics.ChildDeleted(c.Controller, "Pod")
			deleted[i] = true
		})
	}
	wg.Wait()
	var names []string
	for i, p := range pods {
		if deleted[i] {
			names = append(names, p.Name)
		}
	}
	if len(names) > 0 {
		c.Recorder.Eventf(owner, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted %s: %s", nameList("pod", names), why)
	}
	return errors.Join(errs...)
}

// MarkPod writes annotation name=value on pod, a child of the owner whose
// queue key is key, and expects to see it in the cache: until it is seen the
// owner's expectations are not satisfied, so a sync that reads the pod
// without the mark does not decide again what the mark records.
func (c *Children) MarkPod(ctx context.Context, key string, pod *corev1.Pod, name, value string) error {
	c.Expectations.ExpectMark(key, pod.UID, name, value)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{name: value}}})
	if err == nil {
		_, err = c.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		c.Expectations.MarkFailed(key, pod.UID)
		return fmt.Errorf("marking pod %s/%s with %s=%s: %w", pod.Namespace, pod.Name, name, value, err)
	}
	return nil
}

// CreateService creates a Service of owner; one that exists and is owner's is fine.
func (c *Children) CreateService(ctx context.Context, owner Owner, svc *corev1.Service) error {
	return CreateChild(ctx, c, owner, "Service", c.Client.CoreV1().Services(svc.Namespace), svc)
}

// UpdateService writes svc, a changed deep copy of a Service of owner read
// from the cache; a stale copy fails with a conflict, for the caller to retry.
func (c *Children) UpdateService(ctx context.Context, owner Owner, svc *corev1.Service, why string) error {
	return UpdateChild(ctx, c, owner, "Service", c.Client.CoreV1().Services(svc.Namespace), svc, why)
}

// DeleteService deletes a Service of owner, only if it is still the one
// with that UID.
func (c *Children) DeleteService(ctx context.Context, owner Owner, svc *corev1.Service, why string) error {
	return DeleteChild(ctx, c, owner, "Service", c.Client.CoreV1().Services(svc.Namespace), svc, why, nil)
}

// CreateDeployment creates a Deployment of owner; one that exists and is owner's is fine.
func (c *Children) CreateDeployment(ctx context.Context, owner Owner, d *appsv1.Deployment) error {
	return CreateChild(ctx, c, owner, "Deployment", c.Client.AppsV1().Deployments(d.Namespace), d)
}

// UpdateDeployment writes d, a changed deep copy of a Deployment of owner read
// from the cache; a stale copy fails with a conflict, for the caller to retry.
func (c *Children) UpdateDeployment(ctx context.Context, owner Owner, d *appsv1.Deployment, why string) error {
	return UpdateChild(ctx, c, owner, "Deployment", c.Client.AppsV1().Deployments(d.Namespace), d, why)
}

// DeleteDeployment deletes a Deployment of owner, only if it is still the one
// with that UID; the garbage collector then deletes its ReplicaSets and pods.
func (c *Children) DeleteDeployment(ctx context.Context, owner Owner, d *appsv1.Deployment, why string) error {
	return DeleteChild(ctx, c, owner, "Deployment", c.Client.AppsV1().Deployments(d.Namespace), d, why, nil)
}

// CreateHPA creates a HorizontalPodAutoscaler of owner; one that exists and is owner's is fine.
func (c *Children) CreateHPA(ctx context.Context, owner Owner, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	return CreateChild(ctx, c, owner, "HorizontalPodAutoscaler", c.Client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace), hpa)
}

// UpdateHPA writes hpa, a changed deep copy of an autoscaler of owner read
// from the cache; a stale copy fails with a conflict, for the caller to retry.
func (c *Children) UpdateHPA(ctx context.Context, owner Owner, hpa *autoscalingv2.HorizontalPodAutoscaler, why string) error {
	return UpdateChild(ctx, c, owner, "HorizontalPodAutoscaler", c.Client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace), hpa, why)
}

// DeleteHPA deletes an autoscaler of owner, only if it is still the one with that UID.
func (c *Children) DeleteHPA(ctx context.Context, owner Owner, hpa *autoscalingv2.HorizontalPodAutoscaler, why string) error {
	return DeleteChild(ctx, c, owner, "HorizontalPodAutoscaler", c.Client.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace), hpa, why, nil)
}

// TypedClient is the part of a generated typed client (ServiceInterface,
// DeploymentInterface, …) that the child helpers use.
type TypedClient[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// CreateChild creates one child of a kind other than Pod. It needs no
// expectations: the name is deterministic, so a repeated create fails with
// AlreadyExists, which confirmOurs then accepts.
func CreateChild[T metav1.Object](ctx context.Context, c *Children, owner Owner, kind string, client TypedClient[T], obj T) error {
	if _, ok, err := createNamed(ctx, c, owner, kind, client, obj); !ok {
		return err
	}
	noun := strings.ToLower(kind)
	klog.FromContext(ctx).V(2).Info("Created child", "owner", klog.KObj(owner), "kind", kind, "name", obj.GetName())
	if !noteCreated(ctx, noun, obj.GetName()) {
		c.Recorder.Eventf(owner, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created %s: %s", noun, obj.GetName())
	}
	return nil
}

// UpdateChild writes one changed child. A conflict (the cache was stale) or
// NotFound (deleted meanwhile) is returned without an event: the retry reads
// the newer state and settles it.
func UpdateChild[T metav1.Object](ctx context.Context, c *Children, owner Owner, kind string, client TypedClient[T], obj T, why string) error {
	_, err := client.Update(ctx, obj, metav1.UpdateOptions{})
	noun := strings.ToLower(kind)
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			c.Recorder.Eventf(owner, corev1.EventTypeWarning, ReasonFailedUpdate, "Error updating %s %s: %v", noun, obj.GetName(), err)
		}
		return fmt.Errorf("updating %s %s: %w", noun, obj.GetName(), err)
	}
	c.Metrics.ChildUpdated(c.Controller, kind)
	klog.FromContext(ctx).V(2).Info("Updated child", "owner", klog.KObj(owner), "kind", kind, "name", obj.GetName(), "why", why)
	c.Recorder.Eventf(owner, corev1.EventTypeNormal, ReasonSuccessfulUpdate, "Updated %s %s: %s", noun, obj.GetName(), why)
	return nil
}

// DeleteChild deletes one child, only if it is still the object with obj's
// UID, with the resource's default propagation unless one is given.
func DeleteChild[T metav1.Object](ctx context.Context, c *Children, owner Owner, kind string, client TypedClient[T], obj T, why string, propagation *metav1.DeletionPropagation) error {
	uid := obj.GetUID()
	err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: propagation})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or a different object by now
	}
	noun := strings.ToLower(kind)
	if err != nil {
		c.Recorder.Eventf(owner, corev1.EventTypeWarning, ReasonFailedDelete, "Error deleting %s %s: %v", noun, obj.GetName(), err)
		return fmt.Errorf("deleting %s %s: %w", noun, obj.GetName(), err)
	}
	c.Metrics.ChildDeleted(c.Controller, kind)
	klog.FromContext(ctx).V(2).Info("Deleted child", "owner", klog.KObj(owner), "kind", kind, "name", obj.GetName(), "why", why)
	c.Recorder.Eventf(owner, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted %s %s: %s", noun, obj.GetName(), why)
	return nil
}

// slowStartInitialBatch is the first batch of slowStart: a small job's pods go
// in one round trip, a large one's first failure costs a few requests, not hundreds.
const slowStartInitialBatch = 4

// slowStart calls fn(0..n-1) in batches of 4, 8, 16, … run in parallel, and
// stops after the first batch with an error. It returns how many calls were
// made and the first error.
func slowStart(n int, fn func(i int) error) (int, error) {
	done := 0
	for batch := slowStartInitialBatch; done < n; batch *= 2 {
		size := min(batch, n-done)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for j := range size {
			wg.Go(func() { errs[j] = fn(done + j) })
		}
		wg.Wait()
		done += size
		if err := errors.Join(errs...); err != nil {
			return done, err
		}
	}
	return done, nil
}
