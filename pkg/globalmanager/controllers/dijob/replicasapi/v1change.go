package replicasapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// cleanupTimeout bounds the deletion of what a failed request created,
// which outlives the request: a retry must not find them.
const cleanupTimeout = 30 * time.Second

// v1Change is a change to a job: POST, DELETE or replicas/failed, let in
// for the pod caller names, made under the job's lock, at most
// V1Config.RequestsPerSecond per job (429 past it), and answered as the
// first request with the same Idempotency-Key and body was, when it
// succeeded (409 when the body differs).
func (s *Server) v1Change(ctx context.Context, r *http.Request, ex *exchange, caller v1Caller, body [sha256.Size]byte,
	change func(context.Context, *div2alpha1.DIJob, *v1Job) *reply) *reply {
	job, rep := s.v1Access(ctx, r, ex, ex.act, caller)
	if rep != nil {
		return rep
	}
	if rep := v1AggregatorMay(ex.act, caller.pod); rep != nil {
		return rep
	}
	if ex.act != actionV1DeleteReplicas {
		if rep := v1Writable(job); rep != nil {
			return rep
		}
	}
	key, rep := idempotencyKey(r)
	if rep != nil {
		return rep
	}
	st, found := s.v1Jobs.get(job.UID)
	if !found {
		return unavailable(ErrBusy, "too many DIJobs are being changed, try again later")
	}
	defer s.v1Jobs.done(st)
	if err := st.take(ctx); err != nil {
		return unavailable(err, "the DIJob's other changes took too long, try again later")
	}
	defer st.give()
	now := s.cfg.Clock.Now()
	k := answerKey{job: job.UID, route: ex.act, key: key}
	if key != "" {
		if kept, found, same := s.v1Answers.get(k, body, now); found && same {
			return kept
		} else if found {
			return fail(http.StatusConflict, "%s %s was given before with another request body", IdempotencyKeyHeader, v1Quote(key))
		}
	}
	if !st.limit.AllowN(now, 1) {
		rep := fail(http.StatusTooManyRequests, "DIJob %s is changed at most %g times a second: try again later", klog.KObj(job), s.cfg.V1.RequestsPerSecond)
		rep.header = map[string]string{"Retry-After": strconv.Itoa(int(math.Ceil(1 / s.cfg.V1.RequestsPerSecond)))}
		return rep
	}
	rep = change(ctx, job, st)
	if key != "" && rep.status == http.StatusOK {
		s.v1Answers.put(k, body, rep, now)
	}
	return rep
}

// v1AggregatorMay refuses (403) a POST or DELETE that names an
// aggregator: adding and removing the job's replicas is its coordinator's,
// while an aggregator, made from the cluster's AggregatorConfig and
// reached by the job's DDP learners, only reports its own DDP learners
// failed (v1Replace).
func v1AggregatorMay(act action, caller *corev1.Pod) *reply {
	if act == actionV1FailedReplicas || coordinated.TypeOf(caller) != coordinated.Aggregator {
		return nil
	}
	return fail(http.StatusForbidden, "pod %s is an aggregator: only the coordinator adds and deletes replicas", klog.KObj(caller))
}

// v1Counts are the job's live pods by replica type, as the cache shows
// them and as this server changed them since: a pod created and not yet
// in the cache counts, a pod deleted and still there does not. It forgets
// what the cache has caught up with, and expectations past
// expectationTTL. The job's turn is held.
func (s *Server) v1Counts(job *div2alpha1.DIJob, st *v1Job) (map[string]int, map[string][]*corev1.Pod) {
	now := s.cfg.Clock.Now()
	live := s.v1LivePods(job)
	counts := map[string]int{}
	seen := map[string]bool{}
	for t, pods := range live {
		kept := pods[:0:0]
		for _, pod := range pods {
			seen[pod.Name] = true
			delete(st.created, pod.Name)
			if _, gone := st.deleted[pod.Name]; gone {
				continue
			}
			kept = append(kept, pod)
		}
		live[t] = kept
		counts[t] = len(kept)
	}
	for name, e := range st.created {
		if now.Sub(e.at) >= expectationTTL {
			delete(st.created, name)
			continue
		}
		counts[e.replicaType]++
	}
	for name, e := range st.deleted {
		if !seen[name] || now.Sub(e.at) >= expectationTTL {
			delete(st.deleted, name)
		}
	}
	return counts, live
}

// v1Creation creates pods for one request and, should a later one fail,
// deletes those it created, so that a retry does not double them.
type v1Creation struct {
	s       *Server
	st      *v1Job
	created []*corev1.Pod
}

// create creates pod, counted as the job's from before the call.
func (c *v1Creation) create(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	c.st.created[pod.Name] = expectation{replicaType: coordinated.TypeOf(pod), at: c.s.cfg.Clock.Now()}
	made, err := c.s.cfg.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		delete(c.st.created, pod.Name)
		typ := coordinated.TypeOf(pod)
		return nil, fmt.Errorf("creating %s pod %s from %s: %w", typ, klog.KObj(pod), coordinated.TemplateField(typ), err)
	}
	c.created = append(c.created, made)
	return made, nil
}

// undo deletes what was created, within cleanupTimeout even when the
// request has ended.
func (c *v1Creation) undo(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for _, pod := range c.created {
		if err := c.s.v1DeletePod(ctx, c.st, pod); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot delete a pod made for a request that failed; the DIJob has one replica more", "pod", klog.KObj(pod))
		}
	}
	c.created = nil
}

// v1DeletePod deletes pod, that very one (by UID), counted as gone from
// before the call.
func (s *Server) v1DeletePod(ctx context.Context, st *v1Job, pod *corev1.Pod) error {
	st.deleted[pod.Name] = expectation{replicaType: coordinated.TypeOf(pod), at: s.cfg.Clock.Now()}
	delete(st.created, pod.Name)
	err := s.cfg.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// Another pod has the name: this one is gone.
		return nil
	}
	delete(st.deleted, pod.Name)
	return fmt.Errorf("deleting pod %s: %w", klog.KObj(pod), err)
}

// podFailure is the answer to a failed create or delete of a pod: 400 for
// what the API server finds invalid, 409 for a name taken or a quota
// exceeded, 404 for a namespace gone, 500 otherwise; the API server's
// message is told, for it concerns the caller's own job.
func podFailure(err error) *reply {
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return fail(http.StatusBadRequest, "the API server refused a pod: %v", err)
	case apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err) || apierrors.IsConflict(err):
		return fail(http.StatusConflict, "the API server refused a pod: %v", err)
	case apierrors.IsNotFound(err):
		return fail(http.StatusNotFound, "%v", err)
	}
	return internal(err, fmt.Sprintf("the pods could not be changed: %v", err))
}
