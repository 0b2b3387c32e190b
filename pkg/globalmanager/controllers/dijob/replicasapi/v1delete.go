package replicasapi

import (
	"context"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// v1Delete answers DELETE /v1alpha1/replicas: it deletes up to
// collectors.replicas collectors and learners.replicas learners of the
// job, the newest first, or, when it deleted no learner, as many
// aggregators (with their DDP learners, which the garbage collector
// deletes after them), as DI did; and answers the URLs of those deleted.
// A pod is deleted with its own grace period, and leaves the answers to GET
// at once.
func (s *Server) v1Delete(ctx context.Context, w http.ResponseWriter, r *http.Request, ex *exchange) *reply {
	return s.v1ReplicasChange(ctx, w, r, ex, s.v1Remove)
}

// v1Remove deletes what req asks for.
func (s *Server) v1Remove(ctx context.Context, job *div2alpha1.DIJob, st *v1Job, req *v1ReplicasRequest) *reply {
	_, live := s.v1Counts(job, st)
	out := v1JobResponse{Namespace: req.Namespace, Coordinator: req.Coordinator}
	var err error
	if out.Collectors, err = s.v1DeleteNewest(ctx, st, live[coordinated.Collector], req.Collectors.Replicas); err != nil {
		return podFailure(err)
	}
	if out.Learners, err = s.v1DeleteNewest(ctx, st, live[coordinated.Learner], req.Learners.Replicas); err != nil {
		return podFailure(err)
	}
	if len(out.Learners) == 0 {
		if out.Learners, err = s.v1DeleteNewest(ctx, st, live[coordinated.Aggregator], req.Learners.Replicas); err != nil {
			return podFailure(err)
		}
	}
	klog.FromContext(ctx).V(2).Info("Deleted replicas of a v1 DIJob", "dijob", klog.KObj(job), "collectors", out.Collectors, "learners", out.Learners)
	return ok("successfully delete replicas", out)
}

// v1DeleteNewest deletes the n newest of pods (oldest first) and returns
// their URLs, never null.
func (s *Server) v1DeleteNewest(ctx context.Context, st *v1Job, pods []*corev1.Pod, n int) ([]string, error) {
	pods = slices.Clone(pods)
	slices.Reverse(pods)
	urls := []string{}
	for _, pod := range pods[:min(n, len(pods))] {
		if err := s.v1DeletePod(ctx, st, pod); err != nil {
			return urls, err
		}
		urls = append(urls, coordinated.AccessURL(pod))
	}
	return urls, nil
}
