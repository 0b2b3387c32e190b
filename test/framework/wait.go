package framework

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/nereid-ml/nereid/internal/testwait"
)

// Eventually is testwait.Eventually, the tree's one wait for a fact, named
// here for the integration tests.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	testwait.Eventually(t, timeout, what, cond)
}

// DeletePodByHand deletes a pod as a user would who wants it gone now
// (grace period 0), so the API server removes it at once. Its watchers still
// see it with a deletionTimestamp before it goes, and kwok's pod-delete
// Stage would then delete it again by name, without the kubelet's UID
// precondition, taking the controller's replacement of the same name with it
// when that came first: a recreation no real cluster makes. The pod is
// marked first (KwokDeletedByHand), and kwok leaves a marked pod alone
// (hack/kwok/pod-stages.yaml).
func DeletePodByHand(t testing.TB, namespace, name string) {
	t.Helper()
	pods := KubeClient(t).CoreV1().Pods(namespace)
	mark := []byte(`{"metadata":{"annotations":{"` + KwokDeletedByHand + `":"true"}}}`)
	if _, err := pods.Patch(t.Context(), name, types.MergePatchType, mark, metav1.PatchOptions{}); err != nil {
		t.Fatalf("marking pod %s/%s as deleted by hand: %v", namespace, name, err)
	}
	zero := int64(0)
	if err := pods.Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("deleting pod %s/%s: %v", namespace, name, err)
	}
}

// KwokDeletedByHand is the annotation that keeps the local run's kwok from
// finishing a pod's deletion (hack/kwok/pod-stages.yaml).
const KwokDeletedByHand = "nereid.io/kwok-deleted-by-hand"

// VersionAtLeast says whether resourceVersion have is want or a later one,
// comparing them as the numbers etcd makes them: opaque to clients in
// general, but the local control plane's are etcd's revisions. Two that are
// not numbers compare equal only when the same.
func VersionAtLeast(have, want string) bool {
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return have == want
	}
	return h >= w
}

// Edit reads the object name with get, changes it with edit and writes it
// with update, reading it again after a conflict: the controllers write the
// object's status meanwhile, and each status write changes its
// resourceVersion. It returns the object written.
func Edit[T any](t testing.TB, get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error), name string, edit func(T)) T {
	t.Helper()
	var written T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(obj)
		written, err = update(t.Context(), obj, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("editing %s: %v", name, err)
	}
	return written
}

// EndPod ends a pod in phase as its kubelet would (kwok keeps pods Running,
// so the tests play the kubelet for a pod's end), failing the test when the
// pod is gone. See EndPodUnlessGone.
func EndPod(t testing.TB, namespace, name string, phase corev1.PodPhase) {
	t.Helper()
	if !EndPodUnlessGone(t, namespace, name, phase) {
		t.Fatalf("pod %s/%s is gone: it cannot end %s", namespace, name, phase)
	}
}

// EndPodUnlessGone ends a pod in phase as its kubelet would, and says
// whether the pod was there to end. It waits for kwok to have made the pod
// Running first (its podIP set): kwok's pod-ready Stage, applied after the
// end, would write the pod Running again. A conflict with kwok's own
// status write is tried again.
func EndPodUnlessGone(t testing.TB, namespace, name string, phase corev1.PodPhase) bool {
	t.Helper()
	pods := KubeClient(t).CoreV1().Pods(namespace)
	there := true
	Eventually(t, 30*time.Second, "pod "+namespace+"/"+name+" "+string(phase), func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			there = false
			return true, nil
		} else if err != nil || p.Status.PodIP == "" {
			return false, err
		}
		p.Status.Phase = phase
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
	return there
}
