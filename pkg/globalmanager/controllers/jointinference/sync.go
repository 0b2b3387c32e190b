package jointinference

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// children are a service's claimed children in the cache, by name, and
// apart those that Sedna's GlobalManager left.
type children struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	adopted     common.Adopted
}

// sync reconciles one service: lister read, deep copy, claim, act, one status
// write when it changed.
func (c *Controller) sync(ctx context.Context, key string) error {
	ctx, s, err := c.syncer.Begin(ctx, key)
	if s == nil || err != nil {
		return err
	}
	ji := s.Owner
	kids := children{
		deployments: common.ByName(s.Deployments), services: common.ByName(s.Services), hpas: common.ByName(s.HPAs),
		adopted: s.Adopted,
	}

	now := metav1.NewTime(c.now())
	status := &ji.Status
	if status.StartTime == nil {
		status.StartTime = &now
	}
	var events []common.Event
	var actErr error
	refs, missing, err := c.resolve(ji)
	if err != nil {
		return fmt.Errorf("resolving references of %s: %w", key, err)
	}
	var missingEvents []common.Event
	status.Conditions, missingEvents = common.SetReferencesResolved(ji, status.Conditions, missing, now)
	events = append(events, missingEvents...)
	// Nothing is created or changed without its Models; workers that run
	// already (a Model deleted later) keep running on what they have, and
	// a service that asks no more holds no place in its namespace's queue.
	if len(missing) > 0 {
		c.config.Admission.Forget(serviceKind, key)
	}
	if len(missing) == 0 {
		edge, cloud, err := c.desiredWorkers(ji, refs)
		if err != nil {
			return fmt.Errorf("building workers of %s: %w", key, err)
		}
		if kids.adopted.Len() > 0 {
			// Sedna's workers go before ours come: never two sets.
			actErr = c.children.RemoveAdopted(ctx, key, ji, kids.adopted)
			status.Conditions = common.SetJobCondition(status.Conditions, replacingAdopted(ji, kids.adopted, actErr), now)
		} else {
			var decision *admission.Decision
			decision, actErr = c.manageChildren(ctx, key, ji, []workerSpec{
				{worker: cloud, hpa: ji.Spec.CloudWorker.HPA},
				{worker: edge, hpa: ji.Spec.EdgeWorker.HPA},
			}, kids)
			status.Conditions = common.SetJobCondition(status.Conditions, workersCreated(ji, actErr), now)
			if decision != nil {
				var admitEvents []common.Event
				status.Conditions, admitEvents = admission.SetJobCondition(ji, status.Conditions, *decision, now)
				events = append(events, admitEvents...)
			}
		}
	}
	events = append(events, c.setStatusFromDeployments(ji, status, kids.deployments, now)...)
	status.ObservedGeneration = ji.Generation
	return s.End(ctx, actErr, events, "active", status.Active, "failed", status.Failed)
}

// workerSpec is a worker and the autoscaler its spec asks for, if any.
type workerSpec struct {
	worker common.Worker
	hpa    *sednav1.HPA
}

// manageChildren makes the children match the spec: the cloud Service first
// (so its name resolves when the edge worker starts), then each worker's
// Deployment and autoscaler. What is missing (Deployments, their pods as
// their replicas make them, the Service) is made only when the namespace's
// quotas admit all of it; the decision is returned when one was asked
// for. It tries every child and returns every error.
func (c *Controller) manageChildren(ctx context.Context, key string, ji *sednav1.JointInferenceService, workers []workerSpec, kids children) (*admission.Decision, error) {
	_, haveService := kids.services[workerName(ji, roleCloud)]
	var charge admission.Charge
	var class string
	for _, w := range workers {
		if kids.deployments[w.worker.Name] != nil {
			continue
		}
		d := common.NewWorkerDeployment(ji, serviceKind, w.worker, initialReplicas(w.hpa))
		class = cmp.Or(class, d.Spec.Template.Spec.PriorityClassName)
		for range *d.Spec.Replicas {
			charge.Pods = append(charge.Pods, &corev1.Pod{Spec: d.Spec.Template.Spec})
		}
		charge.Objects = append(charge.Objects, admission.Deployment)
	}
	decision := &admission.Made
	if len(charge.Objects) > 0 {
		if !haveService {
			charge.Objects = append(charge.Objects, admission.Service)
		}
		d, err := c.config.Admission.Admit(ctx, admission.Request{Kind: serviceKind, Key: key, Owner: ji,
			PriorityClassName: class, Charge: charge})
		if err != nil {
			return nil, err
		}
		decision = &d
		if d.Admitted {
			defer c.config.Admission.Done(serviceKind, key)
		}
	}
	waiting := !decision.Admitted
	var errs []error
	if !haveService && !waiting {
		errs = append(errs, c.children.CreateService(ctx, ji, c.cloudService(ji)))
	}
	for _, w := range workers {
		existing := kids.deployments[w.worker.Name]
		if existing == nil && waiting {
			continue
		}
		errs = append(errs, c.manageDeployment(ctx, ji, w, existing))
		errs = append(errs, c.manageHPA(ctx, ji, w, kids.hpas[w.worker.Name]))
	}
	return decision, errors.Join(errs...)
}

// manageDeployment creates a worker's Deployment, or updates it when its pod
// template was built from other inputs (the template-hash label differs) or,
// without an autoscaler, when it was scaled away from one replica. With an
// autoscaler the replica count is the autoscaler's.
func (c *Controller) manageDeployment(ctx context.Context, ji *sednav1.JointInferenceService, w workerSpec, existing *appsv1.Deployment) error {
	desired := common.NewWorkerDeployment(ji, serviceKind, w.worker, initialReplicas(w.hpa))
	if existing == nil {
		return c.children.CreateDeployment(ctx, ji, desired)
	}
	if existing.DeletionTimestamp != nil {
		// Deleted by hand and still going (foreground deletion): its delete
		// event requeues the service, and the next sync creates it anew.
		return nil
	}
	templateChanged := existing.Spec.Template.Labels[common.LabelTemplateHash] != w.worker.Hash
	rescale := w.hpa == nil && common.DeploymentReplicas(existing) != *desired.Spec.Replicas
	if !templateChanged && !rescale {
		return nil
	}
	d := existing.DeepCopy()
	d.Labels = common.MergeLabels(d.Labels, desired.Labels)
	why := fmt.Sprintf("scaled back to %d replica: the worker has no autoscaler", *desired.Spec.Replicas)
	if templateChanged {
		d.Spec.Template = desired.Spec.Template
		why = "the service's spec changed"
	}
	if w.hpa == nil {
		d.Spec.Replicas = desired.Spec.Replicas
	}
	return c.children.UpdateDeployment(ctx, ji, d, why)
}

// manageHPA creates, updates or deletes a worker's autoscaler as the spec says.
func (c *Controller) manageHPA(ctx context.Context, ji *sednav1.JointInferenceService, w workerSpec, existing *autoscalingv2.HorizontalPodAutoscaler) error {
	if w.hpa == nil {
		if existing == nil || existing.DeletionTimestamp != nil {
			return nil
		}
		return c.children.DeleteHPA(ctx, ji, existing, "the worker's hpa was removed from the spec")
	}
	desired, err := desiredHPA(ji, w.worker.Role, w.hpa)
	if err != nil {
		return err
	}
	if existing == nil {
		return c.children.CreateHPA(ctx, ji, desired)
	}
	if existing.DeletionTimestamp != nil || existing.Labels[common.LabelTemplateHash] == desired.Labels[common.LabelTemplateHash] {
		return nil
	}
	h := existing.DeepCopy()
	h.Labels = common.MergeLabels(h.Labels, desired.Labels)
	h.Spec = desired.Spec
	return c.children.UpdateHPA(ctx, ji, h, "the worker's hpa changed")
}
