package replicasapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	div2alpha1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// The keys of user.extra that a TokenReview of a ServiceAccount token bound
// to a pod returns.
const (
	PodNameExtra = "authentication.kubernetes.io/pod-name"
	PodUIDExtra  = "authentication.kubernetes.io/pod-uid"
)

// serviceAccountPrefix starts the username of every ServiceAccount token:
// system:serviceaccount:<namespace>:<name>.
const serviceAccountPrefix = "system:serviceaccount:"

// bearerRealm is told with every 401.
const bearerRealm = `Bearer realm="nereid-diserver"`

// authenticate returns who sent r: 401 without a valid bearer token, 503
// when the token could not be reviewed. A token the API server's keys do
// not verify is refused without a review (401); an address refused for its
// tokens too often is answered 429 but for a token they verify
// (tokenreview.AddressLimiter).
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*authenticationv1.UserInfo, *reply) {
	const required = "a bearer token is required (Authorization: Bearer <token>)"
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return nil, unauthorized(required)
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, unauthorized(required)
	}
	var blocked *reply
	if after, ok := s.addresses.Blocked(r.RemoteAddr); ok {
		blocked = fail(http.StatusTooManyRequests, "too many requests from this address were refused for their token (more than %d a minute); "+
			"only a token the API server's keys verify is taken from it now; try again in %ds", s.cfg.MaxRefusalsPerAddress, after)
		blocked.header = map[string]string{"Retry-After": strconv.Itoa(after)}
	}
	// A refusal counts against the address; a blocked address is told so,
	// but of a token its review refused, which it is told of.
	refuse := func(message string, reviewed bool) (*authenticationv1.UserInfo, *reply) {
		if blocked != nil && !reviewed {
			return nil, blocked
		}
		if blocked == nil {
			s.addresses.Refused(r.RemoteAddr)
		}
		return nil, unauthorized(message)
	}
	if len(token) > tokenreview.MaxTokenBytes || strings.ContainsAny(token, " \t") {
		return refuse(ErrInvalidToken.Error(), false)
	}
	// Junk, anything the API server did not sign as a ServiceAccount token
	// it may take, costs no review: anyone who reaches the server can send
	// it. What the keys verify, the review decides (the token's
	// ServiceAccount, Pod or Secret may be gone).
	_, err := s.keys.Verify(ctx, token, tokenreview.VerifyOptions{Audiences: s.cfg.Audiences, AnyServiceAccountToken: true}, s.cfg.Clock.Now())
	switch {
	case errors.Is(err, tokenreview.ErrUnverifiable):
		if blocked != nil {
			return nil, blocked
		}
	case err != nil:
		return refuse(err.Error(), false)
	}
	user, err := s.authn.Authenticate(ctx, token)
	switch {
	case errors.Is(err, ErrInvalidToken):
		return refuse(err.Error(), true)
	case errors.Is(err, ErrBusy):
		return nil, unavailable(err, ErrBusy.Error())
	case err != nil:
		return nil, unavailable(err, "the token could not be reviewed, try again later")
	case user == nil || user.Username == "":
		return refuse(ErrInvalidToken.Error(), true)
	}
	return user, nil
}

// unauthorized is a 401 saying message, which asks for a bearer token.
func unauthorized(message string) *reply {
	rep := fail(http.StatusUnauthorized, "%s", message)
	rep.header = map[string]string{"WWW-Authenticate": bearerRealm}
	return rep
}

// authorize decides whether user may do act on the DIJob key and returns the
// job (from the lister): 403 when not allowed, then 404 when there is no such
// job, in that order, so that who may not see a job does not learn whether
// it exists.
func (s *Server) authorize(ctx context.Context, user *authenticationv1.UserInfo, act action, key types.NamespacedName) (*div2alpha1.DIJob, *reply) {
	job, err := s.cfg.Jobs.DIJobs(key.Namespace).Get(key.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, internal(fmt.Errorf("reading DIJob %s from the cache: %w", key, err), "the DIJob could not be read")
	}
	if err != nil {
		job = nil
	}
	isWorker, notWorker, err := s.isWorkerOf(ctx, user, key, job)
	if err != nil {
		return nil, unavailable(err, ErrBusy.Error())
	}
	if isWorker {
		return job, nil
	}

	verb := "update"
	if !act.writes() {
		verb = "get"
	}
	attrs := authorizationv1.ResourceAttributes{
		Namespace: key.Namespace,
		Verb:      verb,
		Group:     div2alpha1.GroupName,
		Version:   div2alpha1.SchemeGroupVersion.Version,
		Resource:  "dijobs",
		Name:      key.Name,
	}
	dec, err := s.authz.Authorize(ctx, user, attrs)
	switch {
	case errors.Is(err, ErrBusy):
		return nil, unavailable(err, ErrBusy.Error())
	case err != nil:
		return nil, unavailable(err, "the request could not be authorized, try again later")
	}
	if !dec.Allowed {
		msg := fmt.Sprintf("user %q may not %s dijobs.%s %q in namespace %q", user.Username, verb, div2alpha1.GroupName, key.Name, key.Namespace)
		if dec.Reason != "" {
			msg += ": " + dec.Reason
		}
		if notWorker != "" {
			msg += "; and " + notWorker
		}
		return nil, fail(http.StatusForbidden, "%s", msg)
	}
	if job == nil {
		return nil, fail(http.StatusNotFound, "DIJob %s not found", key)
	}
	return job, nil
}

// isWorkerOf reports whether user is a worker of the job key: a
// ServiceAccount token bound to a live pod that the DIJob controls. When the
// token is bound to a pod that is not one, it says why, the same whether or
// not job (nil when there is none) exists. The error is ErrBusy when the
// pod could not be read for want of a turn.
func (s *Server) isWorkerOf(ctx context.Context, user *authenticationv1.UserInfo, key types.NamespacedName, job *div2alpha1.DIJob) (bool, string, error) {
	podName, podUID := oneExtra(user, PodNameExtra), oneExtra(user, PodUIDExtra)
	account, isSA := strings.CutPrefix(user.Username, serviceAccountPrefix)
	if !isSA || podName == "" || podUID == "" {
		return false, "", nil
	}
	namespace, _, _ := strings.Cut(account, ":")
	notWorker := fmt.Sprintf("the token's pod %s/%s is not a worker of DIJob %s", namespace, podName, key)
	if namespace != key.Namespace {
		return false, notWorker, nil
	}
	pod, err := s.pod(ctx, namespace, podName)
	if errors.Is(err, ErrBusy) {
		return false, "", err
	}
	if err != nil {
		if !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Cannot read the pod of a token; deciding as if it were not a worker", "pod", klog.KRef(namespace, podName))
		}
		return false, notWorker, nil
	}
	switch {
	case string(pod.UID) != podUID:
		return false, fmt.Sprintf("the token's pod %s/%s is gone (another pod has its name)", namespace, podName), nil
	case pod.DeletionTimestamp != nil:
		return false, fmt.Sprintf("the token's pod %s/%s is being deleted", namespace, podName), nil
	}
	if job == nil {
		return false, notWorker, nil
	}
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.UID != job.UID || pod.Labels[common.LabelOwnerUID] != string(job.UID) {
		return false, notWorker, nil
	}
	return true, "", nil
}

// pod reads a pod from the lister of Nereid's children only, never from
// the API server: a pod someone else created with an ownerReference to the
// job (anyone who may create pods in the namespace could) is then no worker,
// and a worker's pod is in the cache long before its containers start.
func (s *Server) pod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	return s.pods.Pods(namespace).Get(name)
}

// oneExtra is the single value of user.extra[key], or "".
func oneExtra(user *authenticationv1.UserInfo, key string) string {
	if v := user.Extra[key]; len(v) == 1 {
		return v[0]
	}
	return ""
}
