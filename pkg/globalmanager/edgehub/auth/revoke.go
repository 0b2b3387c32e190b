package auth

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nereid-ml/nereid/internal/cached"
)

// An open connection lasts only as long as what admitted it. The hub ends
// it when the watches (watch.go, Hooks) say what admitted it went; these say
// whether it did, and why.

// The reasons say first what went, then its name: a close frame holds 123
// bytes of them.

// ServiceAccountGone says why id's ServiceAccount, whose state now is
// current (nil: deleted), no longer admits it; "" if it does.
func ServiceAccountGone(id *Identity, current *corev1.ServiceAccount) string {
	switch {
	case current == nil:
		return fmt.Sprintf("the LocalController's ServiceAccount was deleted (%s)", id.ServiceAccount)
	case current.DeletionTimestamp != nil:
		return fmt.Sprintf("the LocalController's ServiceAccount is being deleted (%s)", id.ServiceAccount)
	case id.ServiceAccountUID != "" && current.UID != id.ServiceAccountUID:
		return fmt.Sprintf("the LocalController's ServiceAccount was deleted and made again (%s)", id.ServiceAccount)
	}
	return ""
}

// DaemonSetGone says why the DaemonSet, whose state now is current (nil:
// deleted), no longer admits id; "" if it does.
func (a *Authenticator) DaemonSetGone(id *Identity, current *appsv1.DaemonSet) string {
	ds := a.daemonSetName
	switch {
	case current == nil:
		return fmt.Sprintf("the LocalControllers' DaemonSet was deleted (%s)", ds)
	case current.DeletionTimestamp != nil:
		return fmt.Sprintf("the LocalControllers' DaemonSet is being deleted (%s)", ds)
	case current.UID != id.DaemonSet:
		return fmt.Sprintf("the LocalControllers' DaemonSet was deleted and made again (%s)", ds)
	}
	return ""
}

// GoneFromCaches says whether the caches say id's DaemonSet or its
// ServiceAccount went, and why, with the reason label of the revocation
// (Revoked…); "" when they do not: for a connection recorded after their
// events came. A ServiceAccount the cache does not hold proves nothing (the
// cache may lag one just made); the recheck settles it.
func (a *Authenticator) GoneFromCaches(id *Identity) (reason, why string) {
	ds, _ := cached.Get[*appsv1.DaemonSet](a.daemonSets, a.daemonSetName.String())
	if why := a.DaemonSetGone(id, ds); why != "" {
		return RevokedDaemonSetDeleted, why
	}
	if sa, ok := get[*corev1.ServiceAccount](a.accountCache, id.ServiceAccount); ok {
		if why := ServiceAccountGone(id, sa); why != "" {
			return RevokedServiceAccountDeleted, why
		}
	}
	return "", ""
}

// ControllerUID is the UID of pod's controller, "" for none.
func ControllerUID(pod *corev1.Pod) types.UID {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return ref.UID
	}
	return ""
}
