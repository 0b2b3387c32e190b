package replicasapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// v1Add answers POST /v1alpha1/replicas: it creates the collectors and
// learners asked for, from the job's templates with the resources asked
// for, and answers their URLs; a learner of more than one GPU is an
// aggregator (its URL among the learners) and DDP learners. All or
// nothing: when a pod cannot be created, those created are deleted before
// the failure is answered, and put on the job (v1Note).
func (s *Server) v1Add(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *exchange) *reply {
	return s.v1ReplicasChange(ctx, w, r, ex, func(ctx context.Context, job *div2alpha1.DIJob, st *v1Job, req *v1ReplicasRequest) *reply {
		return s.v1Note(ctx, job, s.v1Create(ctx, job, st, req))
	})
}

// v1ReplicasChange reads and checks a body of DI's DIJobRequest (POST and
// DELETE /v1alpha1/replicas) and makes the change act makes, as one of the
// job's changes (v1Change).
func (s *Server) v1ReplicasChange(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *exchange,
	act func(context.Context, *div2alpha1.DIJob, *v1Job, *v1ReplicasRequest) *reply) *reply {
	var req v1ReplicasRequest
	body, rep := s.v1Body(w, r, &req)
	if rep == nil {
		rep = checkCaller(req.Namespace, req.Coordinator)
	}
	if rep == nil {
		rep = s.checkResources("collectors", &req.Collectors)
	}
	if rep == nil {
		rep = s.checkResources("learners", &req.Learners)
	}
	if rep != nil {
		return rep
	}
	caller := s.v1CallerOf(req.Namespace, req.Coordinator)
	return s.v1Change(ctx, r, ex, caller, body, func(ctx context.Context, job *div2alpha1.DIJob, st *v1Job) *reply {
		return act(ctx, job, st, &req)
	})
}

// v1Create creates what req asks for, within the job's bounds.
func (s *Server) v1Create(ctx context.Context, job *div2alpha1.DIJob, st *v1Job, req *v1ReplicasRequest) *reply {
	view, err := conversion.ToV1(job)
	if err != nil {
		return internal(fmt.Errorf("converting DIJob %s to v1alpha1: %w", klog.KObj(job), err), "the DIJob could not be read as v1alpha1")
	}
	if rep := s.v1CheckRoom(job, st, req); rep != nil {
		return rep
	}
	collectors, learners, rep := templatesOf(view, req)
	if rep != nil {
		return rep
	}
	ddp := req.Learners.Replicas > 0 && req.Learners.GPU.Value() > 1
	var aggregator *corev1.PodTemplateSpec
	if ddp {
		if aggregator, rep = s.v1AggregatorTemplate(); rep != nil {
			return rep
		}
	}
	c := &v1Creation{s: s, st: st}
	out := v1JobResponse{Namespace: req.Namespace, Coordinator: req.Coordinator, Collectors: []string{}, Learners: []string{}}
	for range req.Collectors.Replicas {
		url, err := c.replica(ctx, view, coordinated.Collector, collectors, req.Collectors)
		if err != nil {
			c.undo(ctx)
			return podFailure(err)
		}
		out.Collectors = append(out.Collectors, url)
	}
	for range req.Learners.Replicas {
		var url string
		var err error
		if ddp {
			url, err = c.ddpLearner(ctx, view, aggregator, learners, req.Learners)
		} else {
			url, err = c.replica(ctx, view, coordinated.Learner, learners, req.Learners)
		}
		if err != nil {
			c.undo(ctx)
			var refusal *refusalError
			if errors.As(err, &refusal) {
				return refusal.rep
			}
			return podFailure(err)
		}
		out.Learners = append(out.Learners, url)
	}
	klog.FromContext(ctx).V(2).Info("Created replicas of a v1 DIJob", "dijob", klog.KObj(job), "collectors", out.Collectors, "learners", out.Learners)
	return ok("successfully create replicas", out)
}

// v1CheckRoom refuses (409) a request that would take the job past
// V1Config.MaxLiveReplicas collectors, or learners and aggregators.
func (s *Server) v1CheckRoom(job *div2alpha1.DIJob, st *v1Job, req *v1ReplicasRequest) *reply {
	counts, _ := s.v1Counts(job, st)
	limit := s.cfg.V1.MaxLiveReplicas
	if have := counts[coordinated.Collector]; have+req.Collectors.Replicas > limit {
		return fail(http.StatusConflict, "DIJob %s has %d collectors: %d more would pass the bound of %d live collectors per job",
			klog.KObj(job), have, req.Collectors.Replicas, limit)
	}
	if have := counts[coordinated.Learner] + counts[coordinated.Aggregator]; have+req.Learners.Replicas > limit {
		return fail(http.StatusConflict, "DIJob %s has %d learners and aggregators: %d more would pass the bound of %d live learners per job",
			klog.KObj(job), have, req.Learners.Replicas, limit)
	}
	return nil
}

// templatesOf are the job's collector and learner templates, 400 when one
// is asked for and the job has none.
func templatesOf(view *div1.DIJob, req *v1ReplicasRequest) (*corev1.PodTemplateSpec, *corev1.PodTemplateSpec, *reply) {
	var collectors, learners *corev1.PodTemplateSpec
	if view.Spec.Collector != nil {
		collectors = &view.Spec.Collector.Template
	}
	if view.Spec.Learner != nil {
		learners = &view.Spec.Learner.Template
	}
	switch {
	case req.Collectors.Replicas > 0 && collectors == nil:
		return nil, nil, fail(http.StatusBadRequest, "DIJob %s has no collector template (spec.collector)", klog.KObj(view))
	case req.Learners.Replicas > 0 && learners == nil:
		return nil, nil, fail(http.StatusBadRequest, "DIJob %s has no learner template (spec.learner)", klog.KObj(view))
	}
	return collectors, learners, nil
}

// v1AggregatorTemplate is the aggregators' template, from the
// AggregatorConfig V1Config names: 501 without the GPU allocator, 503
// while the cache fills, 404 when there is no such AggregatorConfig.
func (s *Server) v1AggregatorTemplate() (*corev1.PodTemplateSpec, *reply) {
	v1 := s.cfg.V1
	if v1.GPUs == nil {
		return nil, fail(http.StatusNotImplemented, "learners with more than one GPU need the GPU allocator, which a GlobalManager run with --allocator=none does not have")
	}
	if v1.AggregatorConfigs == nil {
		return nil, fail(http.StatusNotFound, "AggregatorConfig %s not found: this server reads none", v1.AggregatorConfig)
	}
	if v1.AggregatorConfigsSynced != nil && !v1.AggregatorConfigsSynced() {
		return nil, unavailable(ErrBusy, "the AggregatorConfigs are being read, try again later")
	}
	ag, err := v1.AggregatorConfigs.AggregatorConfigs(v1.AggregatorConfig.Namespace).Get(v1.AggregatorConfig.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fail(http.StatusNotFound, "AggregatorConfig %s not found: learners with more than one GPU are made with it", v1.AggregatorConfig)
	case err != nil:
		return nil, internal(fmt.Errorf("reading AggregatorConfig %s: %w", v1.AggregatorConfig, err), "the AggregatorConfig could not be read")
	}
	return &ag.Spec.Aggregator.Template, nil
}

// replica creates one replica of typ from template with res, and returns
// its URL.
func (c *v1Creation) replica(ctx context.Context, view *div1.DIJob, typ string, template *corev1.PodTemplateSpec, res v1Resources) (string, error) {
	pod, port := coordinated.Pod(coordinated.Replica{
		Job: view, Type: typ, Name: coordinated.ReplicaName(view.Name, typ), Template: template, ServerURL: c.s.cfg.V1.ServerURL,
	})
	coordinated.SetResources(pod, resourcesOf(res))
	coordinated.Place(pod, c.s.cfg.V1.EdgeLinkGrace)
	if _, err := c.create(ctx, pod); err != nil {
		return "", err
	}
	return coordinated.URL(pod.Name, pod.Namespace, port), nil
}

// refusalError carries an answer other than a pod's failure.
type refusalError struct{ rep *reply }

func (e *refusalError) Error() string { return e.rep.message }

// ddpLearner creates an aggregator and the DDP learners of one learner of
// res.GPU GPUs, placed by the GPU allocator, and returns the aggregator's
// URL (DI's answer for such a learner).
func (c *v1Creation) ddpLearner(ctx context.Context, view *div1.DIJob, aggregator, learner *corev1.PodTemplateSpec, res v1Resources) (string, error) {
	v1 := c.s.cfg.V1
	worldSize := int(res.GPU.Value())
	slots, err := v1.GPUs.Place(worldSize, &learner.Spec)
	if err != nil {
		return "", &refusalError{fail(http.StatusConflict, "%d GPUs for a learner cannot be placed: %v", worldSize, err)}
	}
	pod, port := coordinated.Pod(coordinated.Replica{
		Job: view, Type: coordinated.Aggregator, Name: coordinated.ReplicaName(view.Name, coordinated.Aggregator), Template: aggregator, ServerURL: v1.ServerURL,
	})
	coordinated.Place(pod, v1.EdgeLinkGrace)
	made, err := c.create(ctx, pod)
	if err != nil {
		v1.GPUs.Release(slots)
		return "", err
	}
	if err := c.ddpLearners(ctx, view, learner, made, resourcesOf(res), slots); err != nil {
		return "", err
	}
	return coordinated.URL(pod.Name, pod.Namespace, port), nil
}

// ddpLearners creates the DDP learners of the aggregator made, one per
// slot the GPU allocator placed, from the job's learner template; the
// allocator holds the slots until its cache has the pods.
func (c *v1Creation) ddpLearners(ctx context.Context, view *div1.DIJob, learner *corev1.PodTemplateSpec, made *corev1.Pod, res coordinated.Resources, slots []coordinated.GPUSlot) error {
	v1 := c.s.cfg.V1
	pods, err := coordinated.DDPLearners(coordinated.Replica{Job: view, Type: coordinated.DDPLearner, Template: learner, ServerURL: v1.ServerURL}, made, res, slots)
	if err != nil {
		v1.GPUs.Release(slots)
		return &refusalError{internal(fmt.Errorf("building the DDP learners of %s: %w", klog.KObj(made), err), "the DDP learners could not be built")}
	}
	created := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		m, err := c.create(ctx, p)
		if err != nil {
			// What was made is deleted with the request's other pods.
			v1.GPUs.Release(slots)
			return err
		}
		created = append(created, m)
	}
	v1.GPUs.Hold(slots, created)
	return nil
}

// resourcesOf is what each replica of res gets.
func resourcesOf(res v1Resources) coordinated.Resources {
	return coordinated.Resources{CPU: res.CPU, GPU: res.GPU, Memory: res.Memory}
}
