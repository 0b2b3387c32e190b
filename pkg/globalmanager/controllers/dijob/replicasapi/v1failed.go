package replicasapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// v1FailedRequest is the body of replicas/failed, DI's DIJobResponse: the
// pods the coordinator (or an aggregator, naming itself "coordinator")
// found failed.
type v1FailedRequest struct {
	Namespace   string   `json:"namespace"`
	Coordinator string   `json:"coordinator"`
	Collectors  []string `json:"collectors"`
	Learners    []string `json:"learners"`
}

// v1Failed answers POST /v1alpha1/replicas/failed: each pod named is
// replaced by a new one (coordinated.Rebuild: from the template, with the
// old one's resources, a new name)
// and the new ones' URLs are answered. A name may be given as DI-engine
// gives it, "<pod>", or as a URL, "<pod>.<namespace>:<port>"; each must be
// a collector (under collectors), or a learner, an aggregator or a DDP
// learner (under learners) of the caller's job, else 400, or 404 when there
// is no such pod, as DI answered; an aggregator names only its own DDP
// learners (403). A pod already being deleted is left out.
// The new pods are created first, then the old ones deleted: should a
// create fail, the new ones are deleted and nothing changed; should a
// delete fail, its new pod is deleted again.
func (s *Server) v1Failed(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *exchange) *reply {
	var req v1FailedRequest
	body, rep := s.v1Body(w, r, &req)
	if rep == nil {
		rep = checkCaller(req.Namespace, req.Coordinator)
	}
	for _, list := range []*[]string{&req.Collectors, &req.Learners} {
		if rep == nil {
			*list, rep = s.podNamesOf(*list)
		}
	}
	if rep != nil {
		return rep
	}
	caller := s.v1CallerOf(req.Namespace, req.Coordinator)
	return s.v1Change(ctx, r, ex, caller, body, func(ctx context.Context, job *div2alpha1.DIJob, st *v1Job) *reply {
		return s.v1Replace(ctx, job, st, caller.pod, &req)
	})
}

// podNamesOf are the pod names of names (names or URLs), without
// duplicates: 400 past the bound of replicas per request or for a name
// that is none.
func (s *Server) podNamesOf(names []string) ([]string, *reply) {
	if limit := s.cfg.V1.MaxReplicasPerRequest; len(names) > limit {
		return nil, fail(http.StatusBadRequest, "%d pods named: the bound of replicas per request is %d", len(names), limit)
	}
	var out []string
	for _, n := range names {
		host, _, _ := strings.Cut(n, ":")
		name, _, _ := strings.Cut(host, ".")
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return nil, fail(http.StatusBadRequest, "%s is not a pod's name or URL", v1Quote(n))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// v1Replace replaces the pods req names, which caller (the coordinator, or
// an aggregator) found failed.
func (s *Server) v1Replace(ctx context.Context, job *div2alpha1.DIJob, st *v1Job, caller *corev1.Pod, req *v1FailedRequest) *reply {
	collectors, rep := s.v1FailedPods(ctx, job, req.Collectors, coordinated.Collector)
	if rep != nil {
		return rep
	}
	learners, rep := s.v1FailedPods(ctx, job, req.Learners, coordinated.Learner, coordinated.Aggregator, coordinated.DDPLearner)
	if rep != nil {
		return rep
	}
	if rep := aggregatorReports(caller, collectors, learners); rep != nil {
		return rep
	}
	if slices.ContainsFunc(learners, func(p *corev1.Pod) bool { return coordinated.TypeOf(p) == coordinated.Aggregator }) &&
		s.cfg.V1.GPUs == nil {
		return fail(http.StatusNotImplemented, "replacing an aggregator rebuilds its DDP learners, which needs the GPU allocator, which a GlobalManager run with --allocator=none does not have")
	}
	return s.v1Note(ctx, job, s.v1Remake(ctx, job, st, req, collectors, learners))
}

// v1Remake makes the replacements of the failed collectors and learners,
// then deletes them.
func (s *Server) v1Remake(ctx context.Context, job *div2alpha1.DIJob, st *v1Job, req *v1FailedRequest, collectors, learners []*corev1.Pod) *reply {
	c := &v1Creation{s: s, st: st}
	newCollectors, err := c.rebuild(ctx, job, collectors)
	var newLearners []*corev1.Pod
	if err == nil {
		newLearners, err = c.rebuild(ctx, job, learners)
	}
	if err != nil {
		c.undo(ctx)
		var refusal *refusalError
		if errors.As(err, &refusal) {
			return refusal.rep
		}
		return podFailure(err)
	}
	if err := s.v1DeleteReplaced(ctx, st, append(collectors, learners...), append(newCollectors, newLearners...)); err != nil {
		return podFailure(err)
	}
	out := v1JobResponse{Namespace: req.Namespace, Coordinator: req.Coordinator, Collectors: urlsOrNull(newCollectors), Learners: urlsOrNull(newLearners)}
	klog.FromContext(ctx).V(2).Info("Replaced failed replicas of a v1 DIJob", "dijob", klog.KObj(job), "collectors", out.Collectors, "learners", out.Learners)
	return ok("successfully recreate replicas", out)
}

// v1FailedPods are the pods of job named, each of one of types, whole (the
// cache holds them slimmed; Rebuild needs their spec): 404 for a name of
// no pod, 400 for a pod of another job or type. Pods being deleted are
// left out.
func (s *Server) v1FailedPods(ctx context.Context, job *div2alpha1.DIJob, names []string, types ...string) ([]*corev1.Pod, *reply) {
	var out []*corev1.Pod
	for _, name := range names {
		cached, err := s.pods.Pods(job.Namespace).Get(name)
		if err != nil {
			return nil, fail(http.StatusNotFound, "pod: %s/%s not exists in cache", job.Namespace, name)
		}
		ref := metav1.GetControllerOfNoCopy(cached)
		switch {
		case ref == nil || ref.UID != job.UID:
			return nil, fail(http.StatusBadRequest, "pod %s is not a replica of DIJob %s", klog.KObj(cached), klog.KObj(job))
		case !slices.Contains(types, coordinated.TypeOf(cached)):
			return nil, fail(http.StatusBadRequest, "pod %s is a %s, not a %s", klog.KObj(cached), cmp.Or(coordinated.TypeOf(cached), "pod of no replica type"), strings.Join(types, " or "))
		case cached.DeletionTimestamp != nil:
			continue
		}
		pod, rep := s.wholePod(ctx, cached)
		if rep != nil {
			return nil, rep
		}
		if pod != nil {
			out = append(out, pod)
		}
	}
	return out, nil
}

// aggregatorReports refuses (403) pods an aggregator caller names that are
// not its own DDP learners: the rest of the job is the coordinator's.
func aggregatorReports(caller *corev1.Pod, collectors, learners []*corev1.Pod) *reply {
	if coordinated.TypeOf(caller) != coordinated.Aggregator {
		return nil
	}
	for _, p := range append(collectors, learners...) {
		if coordinated.TypeOf(p) != coordinated.DDPLearner || !ownedBy(p, caller) {
			return fail(http.StatusForbidden, "pod %s is no DDP learner of aggregator %s: an aggregator reports only its own", klog.KObj(p), klog.KObj(caller))
		}
	}
	return nil
}

// ownedBy says whether owner (by UID) is among pod's owners.
func ownedBy(pod, owner *corev1.Pod) bool {
	return slices.ContainsFunc(pod.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == owner.UID })
}

// wholePod reads cached from the API server: nil when it is gone or going,
// or no longer of the type the cache showed (and was checked).
func (s *Server) wholePod(ctx context.Context, cached *corev1.Pod) (*corev1.Pod, *reply) {
	pod, err := coordinated.AsStored(ctx, s.cfg.Kube.CoreV1(), cached)
	switch {
	case err != nil:
		return nil, internal(fmt.Errorf("reading pod %s: %w", klog.KObj(cached), err), "the pod could not be read")
	case pod == nil || pod.DeletionTimestamp != nil:
		return nil, nil
	}
	return pod, nil
}

// rebuild creates a new pod in place of each of olds (their DDP learners
// too, for aggregators) from its type's template (coordinated.Rebuild),
// and returns them in the same order.
func (c *v1Creation) rebuild(ctx context.Context, job *div2alpha1.DIJob, olds []*corev1.Pod) ([]*corev1.Pod, error) {
	view, err := conversion.ToV1(job)
	if err != nil {
		return nil, fmt.Errorf("converting DIJob %s to v1alpha1: %w", klog.KObj(job), err)
	}
	var out []*corev1.Pod
	v1 := c.s.cfg.V1
	for _, old := range olds {
		template := coordinated.TemplateOf(view, coordinated.TypeOf(old))
		if coordinated.TypeOf(old) == coordinated.Aggregator {
			var rep *reply
			if template, rep = c.s.v1AggregatorTemplate(); rep != nil {
				return nil, &refusalError{rep}
			}
		}
		if template == nil {
			return nil, &refusalError{fail(http.StatusBadRequest, "DIJob %s has no template for its %s %s", klog.KObj(job), coordinated.TypeOf(old), klog.KObj(old))}
		}
		pod := coordinated.Rebuild(old, coordinated.Replica{Job: view, Template: template, ServerURL: v1.ServerURL}, v1.EdgeLinkGrace)
		made, err := c.create(ctx, pod)
		if err != nil {
			return nil, err
		}
		if coordinated.TypeOf(old) == coordinated.Aggregator {
			if err := c.rebuildDDPLearners(ctx, job, old, made); err != nil {
				return nil, err
			}
		}
		out = append(out, made)
	}
	return out, nil
}

// rebuildDDPLearners makes new DDP learners for aggregator made in place
// of old, of the world size and resources of old's; old's go with it.
func (c *v1Creation) rebuildDDPLearners(ctx context.Context, job *div2alpha1.DIJob, old, made *corev1.Pod) error {
	var first *corev1.Pod
	for _, p := range c.s.v1LivePods(job)[coordinated.DDPLearner] {
		if slices.ContainsFunc(p.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == old.UID }) {
			first = p
			break
		}
	}
	if first == nil {
		return nil
	}
	whole, rep := c.s.wholePod(ctx, first)
	if rep != nil {
		return &refusalError{rep}
	}
	if whole == nil {
		return nil
	}
	res, worldSize := ddpResourcesOf(whole)
	view, err := conversion.ToV1(job)
	if err != nil {
		return fmt.Errorf("converting DIJob %s to v1alpha1: %w", klog.KObj(job), err)
	}
	if view.Spec.Learner == nil {
		return &refusalError{fail(http.StatusBadRequest, "DIJob %s has no learner template (spec.learner)", klog.KObj(job))}
	}
	v1 := c.s.cfg.V1
	slots, err := v1.GPUs.Place(worldSize, &view.Spec.Learner.Template.Spec)
	if err != nil {
		return &refusalError{fail(http.StatusConflict, "%d GPUs for a learner cannot be placed: %v", worldSize, err)}
	}
	res.GPU = *resource.NewQuantity(int64(worldSize), resource.DecimalSI)
	return c.ddpLearners(ctx, view, &view.Spec.Learner.Template, made, res, slots)
}

// ddpResourcesOf are a DDP learner's CPU and memory (its di-container's
// limits) and its world size (WORLD_SIZE), as DI read them back.
func ddpResourcesOf(pod *corev1.Pod) (coordinated.Resources, int) {
	var res coordinated.Resources
	worldSize := 0
	for _, c := range pod.Spec.Containers {
		if c.Name != coordinated.ContainerName {
			continue
		}
		res.CPU, res.Memory = c.Resources.Limits[corev1.ResourceCPU], c.Resources.Limits[corev1.ResourceMemory]
		for _, e := range c.Env {
			if e.Name == coordinated.EnvWorldSize {
				worldSize, _ = strconv.Atoi(e.Value)
			}
		}
	}
	return res, worldSize
}

// v1DeleteReplaced deletes olds, replaced by news (same order); a new pod
// whose old one could not be deleted is deleted again.
func (s *Server) v1DeleteReplaced(ctx context.Context, st *v1Job, olds, news []*corev1.Pod) error {
	var errs []error
	for i, old := range olds {
		if err := s.v1DeletePod(ctx, st, old); err != nil {
			errs = append(errs, err)
			if err := s.v1DeletePod(ctx, st, news[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// urlsOrNull are pods' URLs, null for none, as DI answered failed.
func urlsOrNull(pods []*corev1.Pod) []string {
	if len(pods) == 0 {
		return nil
	}
	return urlsOf(pods)
}
