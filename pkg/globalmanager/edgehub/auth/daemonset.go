package auth

import (
	"context"
	"fmt"
	"net/http"

	"github.com/nereid-ml/nereid/internal/cached"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Only the Pods of the LocalControllers' DaemonSet are LocalControllers. A
// token of the LocalController's ServiceAccount bound to a Pod proves only
// that the Pod runs as that ServiceAccount, which anyone who may create Pods
// in its namespace can have a Pod do, on any node. So the token's Pod must
// also be controlled by the DaemonSet Config.DaemonSet names: the Pod is in
// the DaemonSet's namespace, and its controller ownerReference names that
// DaemonSet with the UID it has now (one deleted and made again is another
// DaemonSet, whose Pods are new ones). The hub watches that DaemonSet alone
// (a field selector by name) and keeps of each LocalController Pod its
// controller reference.

// daemonSetKind is what a Pod's controller reference says of a DaemonSet.
var daemonSetKind = appsv1.SchemeGroupVersion.WithKind("DaemonSet")

// NotDaemonSetPod refuses a Pod that is not one of the DaemonSet's.
func NotDaemonSetPod(format string, args ...any) *Refusal {
	return &Refusal{Status: http.StatusForbidden, Metric: RefusedNotDaemonSetPod, Reason: fmt.Sprintf(format, args...)}
}

// checkController refuses pod (of UID uid) unless the LocalControllers'
// DaemonSet, as it is now, controls it; otherwise it returns the
// DaemonSet's UID. The Pod is read from the cache of LocalController Pods,
// or from the API server when the cache does not have it (a Pod just made);
// the DaemonSet from its cache alone.
func (a *Authenticator) checkController(ctx context.Context, pod types.NamespacedName, uid types.UID) (types.UID, *Refusal) {
	ds := a.daemonSetName
	if pod.Namespace != ds.Namespace {
		return "", NotDaemonSetPod("Pod %s is not a LocalController: only the Pods of the DaemonSet %s are, and it is in another namespace", pod, ds)
	}
	current, ok := cached.Get[*appsv1.DaemonSet](a.daemonSets, ds.String())
	switch {
	case !ok:
		return "", NotDaemonSetPod("Pod %s is not a LocalController: the LocalControllers' DaemonSet %s does not exist", pod, ds)
	case current.DeletionTimestamp != nil:
		return "", NotDaemonSetPod("Pod %s is not a LocalController: the LocalControllers' DaemonSet %s is being deleted", pod, ds)
	}
	p, refusal := a.localControllerPod(ctx, pod, uid)
	if refusal != nil {
		return "", refusal
	}
	if reason := controlledBy(p, current); reason != "" {
		return "", NotDaemonSetPod("Pod %s is not a LocalController: %s", pod, reason)
	}
	return current.UID, nil
}

// controlledBy says why pod is not controlled by ds, "" when it is.
func controlledBy(pod *corev1.Pod, ds *appsv1.DaemonSet) string {
	ref := metav1.GetControllerOfNoCopy(pod)
	switch {
	case ref == nil:
		return fmt.Sprintf("it has no controller (a bare Pod); only the Pods of the DaemonSet %s/%s are", ds.Namespace, ds.Name)
	case ref.Kind != daemonSetKind.Kind || ref.APIVersion != daemonSetKind.GroupVersion().String() || ref.Name != ds.Name:
		return fmt.Sprintf("its controller is %s %s (%s), not the DaemonSet %s/%s", ref.Kind, ref.Name, ref.APIVersion, ds.Namespace, ds.Name)
	case ref.UID != ds.UID:
		return fmt.Sprintf("its controller is the DaemonSet %s/%s of UID %s, and that DaemonSet is now UID %s (deleted and made again)",
			ds.Namespace, ds.Name, ref.UID, ds.UID)
	}
	return ""
}

// localControllerPod is the Pod of UID uid, from the cache or read. A Pod
// that is not there, or has another UID, was deleted: its token is no
// longer valid.
func (a *Authenticator) localControllerPod(ctx context.Context, key types.NamespacedName, uid types.UID) (*corev1.Pod, *Refusal) {
	if p, ok := get[*corev1.Pod](a.podCache, key.String()); ok && p.UID == uid {
		return p, nil
	}
	p, err := a.client.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && p.UID != uid):
		return nil, invalidToken(fmt.Sprintf("its Pod %s (%s) no longer exists", key, uid))
	case err != nil:
		return nil, &Refusal{Status: http.StatusServiceUnavailable, Metric: RefusedReviewError, RetryAfter: 5,
			Reason: "the token's Pod could not be read, try again later", Err: fmt.Errorf("reading Pod %s: %w", key, err)}
	}
	return p, nil
}
