package replicasapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
)

// v1Caller is the pod a v1 request names as its sender (the body's
// "coordinator", or the query's coordinator or aggregator) and the v1 job
// that pod belongs to, when it is a live coordinator or aggregator of one.
type v1Caller struct {
	key types.NamespacedName
	pod *corev1.Pod
	job *div2alpha1.DIJob
}

// v1CallerOf resolves the pod namespace/name from the pod cache (Nereid's
// children only): its job is the DIJob of its controller reference, by
// UID, which must be a v1 job; the pod must be its coordinator or an
// aggregator, neither being deleted nor ended. A pod that is not leaves pod
// and job nil.
func (s *Server) v1CallerOf(namespace, name string) v1Caller {
	c := v1Caller{key: types.NamespacedName{Namespace: namespace, Name: name}}
	pod, err := s.pods.Pods(namespace).Get(name)
	if err != nil || pod.DeletionTimestamp != nil || podEnded(pod) {
		return c
	}
	if t := coordinated.TypeOf(pod); t != coordinated.Coordinator && t != coordinated.Aggregator {
		return c
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != div2alpha1.DIJobKind.Kind {
		return c
	}
	job, err := s.cfg.Jobs.DIJobs(namespace).Get(ref.Name)
	if err != nil || job.UID != ref.UID || !conversion.IsV1(job) || pod.Labels[common.LabelOwnerUID] != string(job.UID) {
		return c
	}
	// The pod cache holds every pod with an owner label, and anyone who may
	// create pods in the namespace may label one and make the job its
	// controller: a coordinator is the pod of the coordinator's own name,
	// which no other pod can have while it lives.
	if coordinated.TypeOf(pod) == coordinated.Coordinator && pod.Name != coordinated.CoordinatorName(job.Name) {
		return c
	}
	c.pod, c.job = pod, job
	return c
}

// callerAddressWait bounds how long a tokenless request whose caller's pod
// has no address in the pod cache yet waits for the cache to show one: a
// coordinator may call as soon as it starts, and the cache follows the
// API server a moment behind its status.
var callerAddressWait = 2 * time.Second

// awaitCallerAddress resolves caller again until its pod has an address in
// the pod cache, for at most callerAddressWait; a caller that is no live
// coordinator or aggregator, or whose pod has an address (the request's or
// another), is answered at once.
func (s *Server) awaitCallerAddress(ctx context.Context, caller v1Caller) v1Caller {
	if caller.pod == nil || caller.pod.Status.PodIP != "" {
		return caller
	}
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, callerAddressWait, false, func(context.Context) (bool, error) {
		caller = s.v1CallerOf(caller.key.Namespace, caller.key.Name)
		return caller.pod == nil || caller.pod.Status.PodIP != "", nil
	})
	return caller
}

// v1Access lets in a request that names caller, and returns its job:
//
//   - without an Authorization header, from the address (r.RemoteAddr) of
//     the caller's pod, which must be a live coordinator or aggregator of a
//     v1 job and not on the host's network (401 otherwise, the same for a
//     pod that does not exist, so the answer tells nothing of it);
//   - with a bearer token, as the v2 API: a subject that may update the job
//     (get it, for GET) or a token bound to the caller's pod (v1Subject);
//     401, 403, then
//     404 when the caller names no such pod.
func (s *Server) v1Access(ctx context.Context, r *http.Request, ex *exchange, act action, caller v1Caller) (*div2alpha1.DIJob, *reply) {
	if len(r.Header.Values("Authorization")) == 0 {
		addr := callerAddress(r)
		caller = s.awaitCallerAddress(ctx, caller)
		if caller.job != nil && !caller.pod.Spec.HostNetwork && hasPodIP(caller.pod, addr) {
			ex.user = "pod:" + caller.key.String()
			return caller.job, nil
		}
		return nil, unauthorized(fmt.Sprintf("without a bearer token, a request is taken only from the address of the coordinator or aggregator pod it names: "+
			"%s is not the address of a live coordinator or aggregator %s of a v1 DIJob", addr, caller.key))
	}
	user, rep := s.authenticate(ctx, r)
	if rep != nil {
		return nil, rep
	}
	ex.user = user.Username
	if caller.job == nil {
		return nil, s.v1NoSuchCaller(ctx, user, act, caller.key)
	}
	return s.authorize(ctx, v1Subject(user, caller), act, types.NamespacedName{Namespace: caller.job.Namespace, Name: caller.job.Name})
}

// v1Subject is user as a v1 request is authorized: a token bound to a pod
// is a worker of the job (authorize) only when that pod is the caller it
// names, the job's coordinator or an aggregator. DI-engine's collectors and
// learners never call this server, and a collector may run on an edge
// node, which may ask for its pods' tokens: through their tokens, such a
// node would create, delete and replace the job's replicas in the cloud.
// Another pod's token is its ServiceAccount's, as any other subject.
func v1Subject(user *authenticationv1.UserInfo, caller v1Caller) *authenticationv1.UserInfo {
	if oneExtra(user, PodNameExtra) == "" || oneExtra(user, PodUIDExtra) == string(caller.pod.UID) {
		return user
	}
	u := *user
	u.Extra = maps.Clone(user.Extra)
	delete(u.Extra, PodNameExtra)
	delete(u.Extra, PodUIDExtra)
	return &u
}

// v1NoSuchCaller answers a token's request naming a pod that is no
// coordinator or aggregator of a v1 job: 403 when the token may not act on
// the namespace's DIJobs (so it learns nothing of its pods), else 404.
func (s *Server) v1NoSuchCaller(ctx context.Context, user *authenticationv1.UserInfo, act action, key types.NamespacedName) *reply {
	verb := "update"
	if !act.writes() {
		verb = "get"
	}
	if rep := s.authorizeDIJobs(ctx, user, verb, key.Namespace); rep != nil {
		return rep
	}
	return fail(http.StatusNotFound, "pod %s is not a live coordinator or aggregator of a v1 DIJob", key)
}

// authorizeDIJobs decides whether user may do verb on every DIJob of
// namespace ("" for every namespace): nil, 403 with the reason, or 503.
func (s *Server) authorizeDIJobs(ctx context.Context, user *authenticationv1.UserInfo, verb, namespace string) *reply {
	attrs := authorizationv1.ResourceAttributes{
		Namespace: namespace, Verb: verb, Group: div2alpha1.GroupName, Version: div2alpha1.SchemeGroupVersion.Version, Resource: "dijobs",
	}
	dec, err := s.authz.Authorize(ctx, user, attrs)
	switch {
	case errors.Is(err, ErrBusy):
		return unavailable(err, ErrBusy.Error())
	case err != nil:
		return unavailable(err, "the request could not be authorized, try again later")
	}
	if dec.Allowed {
		return nil
	}
	where := fmt.Sprintf("in namespace %q", namespace)
	if namespace == "" {
		where = "in every namespace"
	}
	msg := fmt.Sprintf("user %q may not %s dijobs.%s %s", user.Username, verb, div2alpha1.GroupName, where)
	if dec.Reason != "" {
		msg += ": " + dec.Reason
	}
	return fail(http.StatusForbidden, "%s", msg)
}

// callerAddress is the address r came from, never a header's.
func callerAddress(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// podEnded says whether pod has ended (Succeeded or Failed): its status
// keeps the IPs it had, which the node has given back and may give to any
// other pod by now, of any namespace. A Failed aggregator stays so, its
// replacements spent, while its job runs.
func podEnded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// hasPodIP says whether addr is one of pod's IPs.
func hasPodIP(pod *corev1.Pod, addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	for _, p := range append([]corev1.PodIP{{IP: pod.Status.PodIP}}, pod.Status.PodIPs...) {
		if ip, err := netip.ParseAddr(p.IP); err == nil && ip.Unmap() == addr {
			return true
		}
	}
	return false
}

// v1Writable refuses a change to a job that is being deleted, has
// finished, is suspended (its pods are stopped) or is run by another
// controller (409).
func v1Writable(job *div2alpha1.DIJob) *reply {
	switch {
	case job.DeletionTimestamp != nil:
		return fail(http.StatusConflict, "DIJob %s is being deleted", klog.KObj(job))
	case !common.RunByNereid(job):
		return runByAnother(job)
	case ptr.Deref(job.Spec.Suspend, false):
		return fail(http.StatusConflict, "DIJob %s is suspended (spec.suspend): it makes no pods until resumed", klog.KObj(job))
	case job.Status.Phase == div2alpha1.JobSucceeded || job.Status.Phase == div2alpha1.JobFailed:
		return fail(http.StatusConflict, "DIJob %s has finished (%s)", klog.KObj(job), job.Status.Phase)
	}
	return nil
}

// runByAnother refuses a change to a job another controller runs
// (spec.managedBy): Nereid writes nothing of it (409).
func runByAnother(job *div2alpha1.DIJob) *reply {
	return fail(http.StatusConflict, "DIJob %s is run by %s (spec.managedBy), not Nereid", klog.KObj(job), job.ManagedByName())
}
