package common

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
// It is a struct field of each controller, so unit tests can use a fake client.
type Children struct {
	Client       kubernetes.Interface
	Recorder     record.EventRecorder
	Expectations *Expectations
	Metrics      *Metrics
	// Controller names the controller in metrics.
	Controller string
}

// CreatePods creates pods for owner (whose queue key is key). It returns the
// first error; pods not attempted after it are released from the expectations.
func (c *Children) CreatePods(ctx context.Context, key string, owner Owner, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	c.Expectations.ExpectCreations(key, len(pods))
	done, err := slowStart(len(pods), func(i int) error {
		if err := c.createPod(ctx, owner, pods[i]); err != nil {
			c.Expectations.CreationObserved(key)
			return err
		}
		return nil
	})
	for range len(pods) - done {
		c.Expectations.CreationObserved(key)
	}
	return err
}

func (c *Children) createPod(ctx context.Context, owner Owner, pod *corev1.Pod) error {
	_, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return c.confirmOurs(ctx, owner, "Pod", pod.Name, func(ctx context.Context) (metav1.Object, error) {
			return c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		})
	}
	if err != nil {
		c.Recorder.Eventf(owner, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating pod %s: %v", pod.Name, err)
		return fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	c.Metrics.ChildCreated(c.Controller, "Pod")
	klog.FromContext(ctx).V(2).Info("Created pod", "owner", klog.KObj(owner), "pod", pod.Name)
	c.Recorder.Eventf(owner, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created pod: %s", pod.Name)
	return nil
}

// confirmOurs handles AlreadyExists on a deterministic name: after a restart or
// with a stale cache the child may be ours already (fine), or the name may be
// taken by someone else's object (an error the user must see).
func (c *Children) confirmOurs(ctx context.Context, owner Owner, kind, name string, get func(context.Context) (metav1.Object, error)) error {
	existing, err := get(ctx)
	if err != nil {
		return fmt.Errorf("reading existing %s %s: %w", kind, name, err)
	}
	if IsControlledBy(existing, owner) {
		return nil
	}
	err = fmt.Errorf("%s %s already exists and is not controlled by %s", kind, name, owner.GetName())
	c.Recorder.Eventf(owner, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating %s %s: the name is taken by another object", kind, name)
	return err
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
			c.Recorder.Eventf(owner, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Deleted pod %s: %s", p.Name, why)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// CreateService creates a Service of owner; one that exists and is owner's is fine.
func (c *Children) CreateService(ctx context.Context, owner Owner, svc *corev1.Service) error {
	_, err := c.Client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return c.confirmOurs(ctx, owner, "Service", svc.Name, func(ctx context.Context) (metav1.Object, error) {
			return c.Client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		})
	}
	if err != nil {
		c.Recorder.Eventf(owner, corev1.EventTypeWarning, ReasonFailedCreate, "Error creating service %s: %v", svc.Name, err)
		return fmt.Errorf("creating service %s: %w", svc.Name, err)
	}
	c.Metrics.ChildCreated(c.Controller, "Service")
	c.Recorder.Eventf(owner, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Created service: %s", svc.Name)
	return nil
}

// slowStart calls fn(0..n-1) in batches of 1, 2, 4, … run in parallel, and
// stops after the first batch with an error. It returns how many calls were
// made and the first error.
func slowStart(n int, fn func(i int) error) (int, error) {
	done := 0
	for batch := 1; done < n; batch *= 2 {
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
