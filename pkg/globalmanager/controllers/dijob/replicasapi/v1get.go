package replicasapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// v1Query is a GET's query, DI's DIJobRequestParams: each parameter's
// first value, nil when absent.
type v1Query struct {
	namespace, coordinator, aggregator, name *string
}

// parseV1Query reads DI's parameters, whose names it takes in any case;
// another parameter is 400, as DI answered.
func parseV1Query(r *http.Request) (v1Query, *reply) {
	var q v1Query
	for k, v := range r.URL.Query() {
		var dst **string
		switch strings.ToLower(k) {
		case "namespace":
			dst = &q.namespace
		case "coordinator":
			dst = &q.coordinator
		case "aggregator":
			dst = &q.aggregator
		case "name":
			dst = &q.name
		default:
			return q, fail(http.StatusBadRequest, "request param %s is not supported", v1Quote(k))
		}
		value := ""
		if len(v) > 0 {
			value = v[0]
		}
		*dst = &value
	}
	if q.namespace != nil && len(validation.IsDNS1123Label(*q.namespace)) > 0 {
		return q, fail(http.StatusBadRequest, "namespace %s is not a namespace", v1Quote(*q.namespace))
	}
	return q, nil
}

// v1Get answers GET /v1alpha1/replicas as DI did, by its parameters:
//
//	namespace, coordinator     the coordinator's job's collectors and learners
//	                           (its aggregators among them): DIJobResponse
//	namespace, aggregator      the aggregator's DDP learners, each at its
//	                           di-port and every gpu-port-N: DIJobResponse
//	namespace, name (any)      null, as DI answered
//	namespace                  every v1 job of the namespace: [DIJobResponse]
//	(none)                     every v1 job: [DIJobResponse]
//
// The first three are let in by v1Access for the pod named; the last two
// need a token that may list DIJobs in the namespace (in every namespace).
func (s *Server) v1Get(ctx context.Context, r *http.Request, ex *exchange) *reply {
	q, rep := parseV1Query(r)
	if rep != nil {
		return rep
	}
	named := q.coordinator
	if named == nil {
		named = q.aggregator
	}
	if q.namespace == nil || named == nil {
		return s.v1List(ctx, r, ex, q)
	}
	caller := s.v1CallerOf(*q.namespace, *named)
	job, rep := s.v1Access(ctx, r, ex, actionV1GetReplicas, caller)
	if rep != nil {
		return rep
	}
	const message = "successfully get replicas"
	switch {
	case q.name != nil:
		return ok(message, nil)
	case q.coordinator != nil:
		return ok(message, s.v1Replicas(job, *q.coordinator))
	}
	if coordinated.TypeOf(caller.pod) != coordinated.Aggregator {
		return fail(http.StatusNotFound, "pod %s is not an aggregator", caller.key)
	}
	return ok(message, s.v1DDPLearners(job, caller.pod))
}

// v1List answers a GET that names no coordinator nor aggregator: the
// replicas of every v1 job of the namespace (or of every namespace), for a
// token that may list DIJobs there, never without one.
func (s *Server) v1List(ctx context.Context, r *http.Request, ex *exchange, q v1Query) *reply {
	namespace := ""
	if q.namespace != nil {
		namespace = *q.namespace
	}
	if len(r.Header.Values("Authorization")) == 0 {
		return unauthorized("a bearer token that may list DIJobs is required to read the replicas of every job of a namespace (or of every namespace); " +
			"a coordinator or aggregator names itself: ?namespace=<namespace>&coordinator=<its pod>")
	}
	user, rep := s.authenticate(ctx, r)
	if rep != nil {
		return rep
	}
	ex.user = user.Username
	if rep := s.authorizeDIJobs(ctx, user, "list", namespace); rep != nil {
		return rep
	}
	if q.name != nil {
		return ok("successfully get replicas", nil)
	}
	jobs, err := s.cfg.Jobs.DIJobs(namespace).List(labels.Everything())
	if err != nil {
		return internal(fmt.Errorf("listing DIJobs from the cache: %w", err), "the DIJobs could not be listed")
	}
	slices.SortFunc(jobs, func(a, b *div2alpha1.DIJob) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	out := []v1JobResponse{}
	for _, job := range jobs {
		if !conversion.IsV1(job) {
			continue
		}
		for _, c := range s.v1LivePods(job)[coordinated.Coordinator] {
			out = append(out, s.v1Replicas(job, c.Name))
		}
	}
	return ok("successfully get replicas", out)
}

// v1Replicas is a job's collectors and learners, aggregators among the
// learners, as DI answered its coordinator.
func (s *Server) v1Replicas(job *div2alpha1.DIJob, coordinator string) v1JobResponse {
	live := s.v1LivePods(job)
	learners := urlsOf(live[coordinated.Learner])
	return v1JobResponse{
		Namespace: job.Namespace, Coordinator: coordinator,
		Collectors: urlsOf(live[coordinated.Collector]),
		Learners:   append(learners, urlsOf(live[coordinated.Aggregator])...),
	}
}

// v1DDPLearners is the DDP learners of aggregator, each at its di-port
// and at each of its gpu-port-N, as DI answered the aggregator.
func (s *Server) v1DDPLearners(job *div2alpha1.DIJob, aggregator *corev1.Pod) v1JobResponse {
	urls := []string{}
	for _, pod := range s.v1LivePods(job)[coordinated.DDPLearner] {
		if !slices.ContainsFunc(pod.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == aggregator.UID }) {
			continue
		}
		urls = append(urls, coordinated.AccessURL(pod))
		for _, c := range pod.Spec.Containers {
			if c.Name != coordinated.ContainerName {
				continue
			}
			for _, p := range c.Ports {
				if strings.HasPrefix(p.Name, coordinated.DDPPortPrefix) {
					urls = append(urls, coordinated.URL(pod.Name, pod.Namespace, p.ContainerPort))
				}
			}
		}
	}
	return v1JobResponse{Namespace: aggregator.Namespace, Coordinator: aggregator.Name, Learners: urls}
}

// v1LivePods are the job's pods that are not being deleted, by replica
// type, oldest first: DI's replicas (it listed failed pods too, which
// the coordinator then reports as failed).
func (s *Server) v1LivePods(job *div2alpha1.DIJob) map[string][]*corev1.Pod {
	pods, err := common.ListOwned[*corev1.Pod](s.cfg.Pods, job)
	if err != nil {
		// The owner index is the cache's own; this is a bug.
		klog.Background().Error(err, "Cannot list the pods of a DIJob", "dijob", klog.KObj(job))
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name))
	})
	out := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		ref := metav1.GetControllerOfNoCopy(pod)
		if ref == nil || ref.UID != job.UID || pod.DeletionTimestamp != nil {
			continue
		}
		out[coordinated.TypeOf(pod)] = append(out[coordinated.TypeOf(pod)], pod)
	}
	return out
}

// urlsOf are pods' URLs, never null.
func urlsOf(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, pod := range pods {
		out = append(out, coordinated.AccessURL(pod))
	}
	return out
}
