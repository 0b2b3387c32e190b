package jointinference

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// children are a service's claimed children in the cache, by name, with
// those Sedna's GlobalManager left under the names Nereid gives them, and
// apart Sedna's others, to replace.
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
	// Sedna's children have the names Nereid gives them: they are kept and
	// updated to the spec like Nereid's own, so the switch keeps the
	// Deployments (their pods roll over to Nereid's template), the cloud
	// Service (its address) and the autoscalers.
	kept, replace := s.Adopted.Keep(func(kind string, obj metav1.Object) bool {
		return slices.Contains(childNames(ji)[kind], obj.GetName())
	})
	kids := children{
		deployments: common.ByName(append(s.Deployments, kept.Deployments...)),
		services:    common.ByName(append(s.Services, kept.Services...)),
		hpas:        common.ByName(append(s.HPAs, kept.HPAs...)),
		adopted:     replace,
	}

	now := metav1.NewTime(c.clock.Now())
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
		c.deps.Admission.Forget(serviceKind, key)
	}
	if len(missing) == 0 {
		edge, cloud, err := c.desiredWorkers(ji, refs)
		if err != nil {
			return fmt.Errorf("building workers of %s: %w", key, err)
		}
		if kids.adopted.Len() > 0 {
			// Sedna's workers that Nereid does not keep (a name cut
			// otherwise) go before ours come: never two sets.
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
	// A worker pod refused a place (its node, its taints, its size) is
	// named on the service, not only on the pod.
	pods, err := c.workers.of(ji)
	if err != nil {
		return fmt.Errorf("listing worker pods of %s: %w", key, err)
	}
	events = append(events, c.setScheduled(ji, pods, now)...)
	status.ObservedGeneration = ji.Generation
	return s.End(ctx, actErr, events, "active", status.Active, "failed", status.Failed)
}

// childNames are the names of the children a service has, by kind.
func childNames(ji *sednav1.JointInferenceService) map[string][]string {
	return map[string][]string{
		"Deployment":              {workerName(ji, roleCloud), workerName(ji, roleEdge)},
		"Service":                 {cloudServiceName(ji)},
		"HorizontalPodAutoscaler": {hpaName(ji, roleCloud), hpaName(ji, roleEdge)},
	}
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
// for. Deployments and autoscalers of other names (an earlier Nereid's
// <service>-edge, …) are deleted. It tries every child and returns every
// error.
func (c *Controller) manageChildren(ctx context.Context, key string, ji *sednav1.JointInferenceService, workers []workerSpec, kids children) (*admission.Decision, error) {
	service, err := c.cloudService(ji)
	if err != nil {
		return nil, err
	}
	existingService, haveService := kids.services[service.Name]
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
		d, err := c.deps.Admission.Admit(ctx, admission.Request{Kind: serviceKind, Key: key, Owner: ji,
			PriorityClassName: class, Charge: charge})
		if err != nil {
			return nil, err
		}
		decision = &d
		if d.Admitted {
			defer c.deps.Admission.Done(serviceKind, key)
		}
	}
	waiting := !decision.Admitted
	var errs []error
	switch {
	case !haveService && !waiting:
		errs = append(errs, c.children.CreateService(ctx, ji, service))
	case haveService:
		errs = append(errs, c.manageService(ctx, ji, service, existingService))
	}
	for _, w := range workers {
		existing := kids.deployments[w.worker.Name]
		if existing == nil && waiting {
			continue
		}
		errs = append(errs, c.manageDeployment(ctx, ji, w, existing))
		errs = append(errs, c.manageHPA(ctx, ji, w, kids.hpas[hpaName(ji, w.worker.Role)]))
	}
	return decision, errors.Join(append(errs, c.removeOthers(ctx, ji, kids))...)
}

// removeOthers deletes the service's Deployments and autoscalers that have
// none of the names it gives them now: those an earlier Nereid named
// <service>-<role>.
func (c *Controller) removeOthers(ctx context.Context, ji *sednav1.JointInferenceService, kids children) error {
	names := childNames(ji)
	const why = "replaced by one of Sedna's name"
	var errs []error
	for name, d := range kids.deployments {
		if !slices.Contains(names["Deployment"], name) && d.DeletionTimestamp == nil {
			errs = append(errs, c.children.DeleteDeployment(ctx, ji, d, why))
		}
	}
	for name, h := range kids.hpas {
		if !slices.Contains(names["HorizontalPodAutoscaler"], name) && h.DeletionTimestamp == nil {
			errs = append(errs, c.children.DeleteHPA(ctx, ji, h, why))
		}
	}
	return errors.Join(errs...)
}

// manageService updates the cloud worker's Service when it was made from
// another spec (its hash label differs) or is Sedna's, kept: its selector
// and port become Nereid's, its address stays.
func (c *Controller) manageService(ctx context.Context, ji *sednav1.JointInferenceService, desired, existing *corev1.Service) error {
	if existing.DeletionTimestamp != nil ||
		(!common.IsAdopted(existing) && existing.Labels[common.LabelTemplateHash] == desired.Labels[common.LabelTemplateHash]) {
		return nil
	}
	svc := existing.DeepCopy()
	svc.Labels = common.UpdatedLabels(svc.Labels, desired.Labels)
	svc.Spec.Selector = desired.Spec.Selector
	svc.Spec.Ports = desired.Spec.Ports
	return c.children.UpdateService(ctx, ji, svc, "the cloud worker's Service was made from another spec")
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
	if !templateChanged && !rescale && !common.IsAdopted(existing) {
		return nil
	}
	d := existing.DeepCopy()
	d.Labels = common.UpdatedLabels(d.Labels, desired.Labels)
	why := fmt.Sprintf("scaled back to %d replica: the worker has no autoscaler", *desired.Spec.Replicas)
	if templateChanged {
		d.Spec.Template = desired.Spec.Template
		// A Deployment's selector is immutable: one Sedna made selects
		// Sedna's labels, which its pods then carry too.
		d.Spec.Template.Labels = common.MergeLabels(existing.Spec.Selector.MatchLabels, desired.Spec.Template.Labels)
		why = "the service's spec changed"
		if common.IsAdopted(existing) {
			why = "kept from Sedna's GlobalManager; its pods roll over to the current spec"
		}
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
	if existing.DeletionTimestamp != nil ||
		(!common.IsAdopted(existing) && existing.Labels[common.LabelTemplateHash] == desired.Labels[common.LabelTemplateHash]) {
		return nil
	}
	h := existing.DeepCopy()
	h.Labels = common.UpdatedLabels(h.Labels, desired.Labels)
	h.Spec = desired.Spec
	return c.children.UpdateHPA(ctx, ji, h, "the worker's hpa changed")
}
