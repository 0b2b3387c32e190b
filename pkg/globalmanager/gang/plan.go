package gang

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

// Reasons of a job's Scheduled condition.
const (
	// ReasonWaitingForGang: fewer of its pods are placed than its gang needs.
	ReasonWaitingForGang = "WaitingForGang"
	// ReasonGangScheduled: the gang is placed.
	ReasonGangScheduled = "GangScheduled"
	// ReasonNoGangScheduler: the cluster serves no gang API; pods are placed
	// one by one.
	ReasonNoGangScheduler = "NoGangScheduler"
	// ReasonGangSchedulingOff: --gang-scheduler=none or the job's annotation.
	ReasonGangSchedulingOff = "GangSchedulingOff"
	// ReasonInvalidGangAnnotation: an annotation of the job is not valid;
	// its pods wait for an edit.
	ReasonInvalidGangAnnotation = "InvalidGangAnnotation"
	// ReasonGangSchedulerUnavailable: the job asks for a gang scheduler whose
	// API the cluster does not serve; its pods wait.
	ReasonGangSchedulerUnavailable = "GangSchedulerUnavailable"
)

// Plan is the gang of one job in one sync.
type Plan struct {
	// Mode is the job's gang scheduler; None when it has none.
	Mode Mode
	// Name is the name of its group objects and Kueue pod group.
	Name string
	// Problem, when set, is why the job's pods must not be made: its
	// annotations ask for what cannot be. Its Reason and Message are the
	// Scheduled condition's.
	Problem *Status

	m         *Manager
	owner     common.Owner
	ownerKind schema.GroupVersionKind
	// min is the annotation's minimum, 0 for all pods.
	min int32
	// why says why Mode is None, noneReason with which reason.
	why, noneReason string
	queue           string
}

// Status is what a job's Scheduled condition says.
type Status struct {
	Scheduled       bool
	Reason, Message string
}

// GroupName is the name of a job's group objects: the kind in it, so jobs
// of two kinds with one name do not share a group.
func GroupName(owner common.Owner, ownerKind schema.GroupVersionKind) string {
	return common.ChildName(owner.GetName(), common.LowerKind(ownerKind))
}

// Decorate prepares a pod of the job before it is created, for members
// pods in all: its group's reference, its scheduler, Kueue's labels, and
// its template's node name as a required node affinity.
func (p *Plan) Decorate(pod *corev1.Pod, members Members) {
	if p.queue != "" {
		pod.Labels = common.MergeLabels(pod.Labels, map[string]string{LabelKueueQueue: p.queue, LabelKueueGroup: p.Name})
		pod.Annotations = common.MergeLabels(pod.Annotations, map[string]string{AnnotationKueueTotal: itoa(members.Count)})
	}
	if p.Mode == None && p.queue == "" {
		return
	}
	// A pod made with spec.nodeName is never seen by a scheduler, so no
	// gang could hold it, and Kueue could not gate it (the API server
	// refuses a pod with both a node name and a scheduling gate): the same
	// node, as a requirement the scheduler keeps.
	if node := pod.Spec.NodeName; node != "" {
		pod.Spec.Affinity = common.Pin(pod.Spec.Affinity, node)
		pod.Spec.NodeName = ""
		pod.Annotations = common.MergeLabels(pod.Annotations, map[string]string{placement.AnnotationPinnedNode: node})
	}
	switch p.Mode {
	case Kubernetes:
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(p.Name)}
	case Volcano:
		pod.Spec.SchedulerName = VolcanoSchedulerName
		pod.Annotations = common.MergeLabels(pod.Annotations, map[string]string{AnnotationVolcanoGroup: p.Name})
	case Coscheduling:
		pod.Labels = common.MergeLabels(pod.Labels, map[string]string{LabelCoschedulingGroup: p.Name})
	}
}

// inGroup says whether a pod carries the reference to this plan's group.
func (p *Plan) inGroup(pod *corev1.Pod) bool {
	switch p.Mode {
	case Kubernetes:
		g := pod.Spec.SchedulingGroup
		return g != nil && g.PodGroupName != nil && *g.PodGroupName == p.Name
	case Volcano:
		return pod.Annotations[AnnotationVolcanoGroup] == p.Name
	case Coscheduling:
		return pod.Labels[LabelCoschedulingGroup] == p.Name
	}
	return false
}

// group is the gang of members, of which live are the job's pods now:
// those made before the job had this gang (without its reference) are not
// in it, and the gang's minimum is at most what it has.
func (p *Plan) group(members Members, live []*corev1.Pod) *group {
	count, minimum := p.size(members.Count, live)
	g := &group{
		name: p.Name, owner: p.owner, ownerKind: p.ownerKind,
		count: count, min: minimum, requests: members.Requests, priorityClassName: members.PriorityClassName,
		queue: p.owner.GetAnnotations()[AnnotationVolcanoQueue],
	}
	if g.queue == "" {
		g.queue = "default"
	}
	if t, err := strconv.ParseInt(p.owner.GetAnnotations()[AnnotationScheduleTimeout], 10, 32); err == nil && t > 0 {
		g.timeout = int32(t)
	}
	return g
}

// size is the count and the minimum of the gang of count pods, of which
// live are the job's pods now: those not in the gang are not counted.
func (p *Plan) size(count int32, live []*corev1.Pod) (size, minimum int32) {
	for _, pod := range live {
		if !common.PodTerminating(pod) && !p.inGroup(pod) {
			count--
		}
	}
	count = max(count, 1)
	if p.min > 0 {
		return count, min(p.min, count)
	}
	return count, count
}

// Ensure makes the job's group objects match members (and live, its pods
// now): created when missing, their counts updated after a scale or a
// respec, with children's events and metrics. It does nothing without a
// gang. An object of the same name that is not the job's is an error, left
// alone.
func (p *Plan) Ensure(ctx context.Context, children *common.Children, members Members, live []*corev1.Pod) error {
	if p.Mode == None || p.Problem != nil {
		return nil
	}
	if !p.m.HasSynced() {
		return errNotSynced
	}
	g := p.group(members, live)
	switch p.Mode {
	case Kubernetes:
		if err := p.ensureWorkload(ctx, children, g); err != nil {
			return err
		}
		return p.ensurePodGroup(ctx, children, g)
	case Volcano:
		return p.ensureUnstructured(ctx, children, volcanoPodGroupsResource, g.volcanoPodGroup())
	case Coscheduling:
		return p.ensureUnstructured(ctx, children, coschedulingPodGroupsResource, g.coschedulingPodGroup())
	}
	return nil
}

func (p *Plan) ensureWorkload(ctx context.Context, children *common.Children, g *group) error {
	want := g.workload()
	have, err := p.m.workloads().Workloads(want.Namespace).Get(want.Name)
	client := p.m.kube.SchedulingV1beta1().Workloads(want.Namespace)
	switch {
	case apierrors.IsNotFound(err):
		return common.CreateChild(ctx, children, p.owner, "Workload", client, want)
	case err != nil:
		return err
	case !common.IsControlledBy(have, p.owner):
		return notOurs("Workload", have)
	}
	if equalPolicies(have.Spec.PodGroupTemplates, want.Spec.PodGroupTemplates) {
		return nil
	}
	// Templates cannot be added or removed; the minimum of ours can change.
	updated := have.DeepCopy()
	for i := range updated.Spec.PodGroupTemplates {
		if updated.Spec.PodGroupTemplates[i].Name == templateName {
			updated.Spec.PodGroupTemplates[i].SchedulingPolicy = g.gangPolicy()
		}
	}
	return common.UpdateChild(ctx, children, p.owner, "Workload", client, updated, fmt.Sprintf("the gang needs %d pods", g.min))
}

func equalPolicies(have, want []schedulingv1beta1.PodGroupTemplate) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h.Name == w.Name {
				found = h.SchedulingPolicy.Gang != nil && h.SchedulingPolicy.Gang.MinCount == w.SchedulingPolicy.Gang.MinCount
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (p *Plan) ensurePodGroup(ctx context.Context, children *common.Children, g *group) error {
	want := g.podGroup()
	have, err := p.m.podGroups().PodGroups(want.Namespace).Get(want.Name)
	client := p.m.kube.SchedulingV1beta1().PodGroups(want.Namespace)
	switch {
	case apierrors.IsNotFound(err):
		return common.CreateChild(ctx, children, p.owner, "PodGroup", client, want)
	case err != nil:
		return err
	case !common.IsControlledBy(have, p.owner):
		return notOurs("PodGroup", have)
	case have.Spec.SchedulingPolicy.Gang == nil:
		return fmt.Errorf("PodGroup %s/%s has no gang policy, and a policy cannot change; delete it and the job's pods to start the gang again", have.Namespace, have.Name)
	case have.Spec.SchedulingPolicy.Gang.MinCount == g.min:
		return nil
	}
	updated := have.DeepCopy()
	updated.Spec.SchedulingPolicy.Gang.MinCount = g.min
	return common.UpdateChild(ctx, children, p.owner, "PodGroup", client, updated, fmt.Sprintf("the gang needs %d pods", g.min))
}

func (p *Plan) ensureUnstructured(ctx context.Context, children *common.Children, gvr schema.GroupVersionResource, want *unstructured.Unstructured) error {
	lister, err := p.m.dynamicLister(gvr)
	if err != nil {
		return err
	}
	client := dynamicClient{p.m.dynamic.Resource(gvr).Namespace(want.GetNamespace())}
	obj, err := lister.ByNamespace(want.GetNamespace()).Get(want.GetName())
	if apierrors.IsNotFound(err) {
		return common.CreateChild(ctx, children, p.owner, "PodGroup", client, want)
	} else if err != nil {
		return err
	}
	have, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("PodGroup %s/%s in the cache is a %T", want.GetNamespace(), want.GetName(), obj)
	}
	if !common.IsControlledBy(have, p.owner) {
		return notOurs("PodGroup", have)
	}
	spec, _ := want.Object["spec"].(map[string]any)
	if !specDiffers(have, spec) {
		return nil
	}
	return common.UpdateChild(ctx, children, p.owner, "PodGroup", client, withSpec(have, spec), "the job's pods changed")
}

func notOurs(kind string, obj metav1.Object) error {
	return fmt.Errorf("%s %s/%s exists and is not the job's; Nereid leaves it alone and the job's pods wait: rename or delete it", kind, obj.GetNamespace(), obj.GetName())
}

// Status is what the job's Scheduled condition says of live, its pods of
// the current spec, when count pods are wanted.
func (p *Plan) Status(live []*corev1.Pod, count int) Status {
	if p.Problem != nil {
		return *p.Problem
	}
	placed := 0
	var first *corev1.Pod // the first pod not placed, by name
	var unplaced []*corev1.Pod
	inGroup := 0
	for _, pod := range live {
		if common.PodTerminating(pod) {
			continue
		}
		if p.inGroup(pod) {
			inGroup++
		}
		if pod.Spec.NodeName != "" {
			placed++
			continue
		}
		unplaced = append(unplaced, pod)
		if first == nil || pod.Name < first.Name {
			first = pod
		}
	}
	if p.Mode == None {
		// Placed one by one: a pod that cannot be placed is named, with
		// its node and why, until it is.
		if says := p.nodes().Unplaced(p.context(), live); says != "" {
			return Status{Reason: placement.ReasonUnschedulable, Message: says}
		}
		return Status{Scheduled: placed >= count && count > 0, Reason: p.noneReason, Message: p.why}
	}
	minimum := int32(count)
	if p.min > 0 {
		minimum = min(p.min, minimum)
	}
	if placed >= count && count > 0 {
		return Status{Scheduled: true, Reason: ReasonGangScheduled,
			Message: fmt.Sprintf("all %d pods are placed (%s gang %s)", count, p.Mode, p.Name)}
	}
	if int32(placed) >= minimum && placed > 0 {
		return Status{Scheduled: true, Reason: ReasonGangScheduled,
			Message: fmt.Sprintf("%d of %d pods are placed, the gang's minimum of %d is met (%s gang %s)", placed, count, minimum, p.Mode, p.Name)}
	}
	msg := fmt.Sprintf("%d of %d pods are placed; the %s gang %s needs %d placed together", placed, count, p.Mode, p.Name, minimum)
	// The gang's message says only that too few are placed; the node of a
	// pinned pod may say why: the first such pod's, by name. A refusal
	// that lasts until a person acts is no longer waiting: Unschedulable.
	reason := ReasonWaitingForGang
	if refused := p.refused(unplaced); refused.Says != "" {
		msg += "; " + refused.Says
		if refused.Lasts {
			reason = placement.ReasonUnschedulable
		}
	}
	// What the scheduler said of the gang before it changed (a trainer
	// removed) would contradict the job as it is now: left out.
	_, asked := p.size(int32(count), live)
	says, stale := p.schedulerSays(first, asked)
	switch {
	case says != "":
		msg += "; the scheduler says: " + says
	case stale:
		msg += "; the scheduler has not yet tried the gang as it is now"
	}
	if says == "" && inGroup < count {
		msg += fmt.Sprintf("; %d of its pods are made", inGroup)
	}
	return Status{Reason: reason, Message: common.ClipConditionMessage(msg)}
}

// refused is what the node of the first unplaced pinned pod (by name)
// that its node refuses says; a refusal that lasts comes before one that
// does not.
func (p *Plan) refused(unplaced []*corev1.Pod) placement.Refusal {
	slices.SortFunc(unplaced, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	var first placement.Refusal
	for _, pod := range unplaced {
		refused := p.nodes().NodeSays(p.context(), pod)
		if refused.Lasts {
			return refused
		}
		if first.Says == "" {
			first = refused
		}
	}
	return first
}

// nodes reads the nodes of pinned pods; nil (it reads none) without a
// Manager.
func (p *Plan) nodes() *placement.Nodes {
	if p.m == nil {
		return nil
	}
	return p.m.nodes
}

// context is the Manager's, or a background one without a Manager.
func (p *Plan) context() context.Context {
	if p.m == nil {
		return context.Background()
	}
	return p.m.context()
}

// dynamicClient is a dynamic resource client as common.TypedClient.
type dynamicClient struct {
	c interface {
		Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error)
		Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error)
		Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
		Delete(ctx context.Context, name string, opts metav1.DeleteOptions, subresources ...string) error
	}
}

func (d dynamicClient) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions) (*unstructured.Unstructured, error) {
	return d.c.Create(ctx, obj, opts)
}

func (d dynamicClient) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return d.c.Update(ctx, obj, opts)
}

func (d dynamicClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*unstructured.Unstructured, error) {
	return d.c.Get(ctx, name, opts)
}

func (d dynamicClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return d.c.Delete(ctx, name, opts)
}

// whySuspended is why a suspended job's group objects are deleted, in its
// event.
const whySuspended = "the job is suspended (spec.suspend)"

// Release deletes the job's group objects while it runs no pods (it is
// suspended): a Volcano PodGroup left Pending is queued again and holds
// its minResources in its queue. Objects of the name that are not the
// job's are left alone; the next Ensure makes them again on resume. It
// does nothing without a gang (Kueue's pod group is its pods' labels: it
// goes with them).
func (p *Plan) Release(ctx context.Context, children *common.Children) error {
	if p.Mode == None || p.Problem != nil {
		return nil
	}
	if !p.m.HasSynced() {
		return errNotSynced
	}
	ns := p.owner.GetNamespace()
	switch p.Mode {
	case Kubernetes:
		var errs []error
		if pg, err := p.m.podGroups().PodGroups(ns).Get(p.Name); err == nil && p.ours(pg) {
			errs = append(errs, common.DeleteChild(ctx, children, p.owner, "PodGroup", p.m.kube.SchedulingV1beta1().PodGroups(ns), pg, whySuspended, nil))
		}
		if w, err := p.m.workloads().Workloads(ns).Get(p.Name); err == nil && p.ours(w) {
			errs = append(errs, common.DeleteChild(ctx, children, p.owner, "Workload", p.m.kube.SchedulingV1beta1().Workloads(ns), w, whySuspended, nil))
		}
		return errors.Join(errs...)
	case Volcano:
		return p.releaseUnstructured(ctx, children, volcanoPodGroupsResource)
	case Coscheduling:
		return p.releaseUnstructured(ctx, children, coschedulingPodGroupsResource)
	}
	return nil
}

// ours says whether obj is the job's and not already going.
func (p *Plan) ours(obj metav1.Object) bool {
	return obj.GetDeletionTimestamp() == nil && common.IsControlledBy(obj, p.owner)
}

func (p *Plan) releaseUnstructured(ctx context.Context, children *common.Children, gvr schema.GroupVersionResource) error {
	lister, err := p.m.dynamicLister(gvr)
	if err != nil {
		return err
	}
	obj, err := lister.ByNamespace(p.owner.GetNamespace()).Get(p.Name)
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	have, ok := obj.(*unstructured.Unstructured)
	if !ok || !p.ours(have) {
		return nil
	}
	client := dynamicClient{p.m.dynamic.Resource(gvr).Namespace(have.GetNamespace())}
	return common.DeleteChild(ctx, children, p.owner, "PodGroup", client, have, whySuspended, nil)
}
