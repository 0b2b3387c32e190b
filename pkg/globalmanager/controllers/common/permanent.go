package common

import (
	"errors"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// IsPermanent says whether an error of a status write (or of an applier of
// edge reports) is one that no retry of the same write can mend, because the
// API server refused the write for what it holds rather than for when it
// came: the status would be invalid (422), the request too large (413),
// malformed (400), or the object too large for etcd. Timeouts, conflicts,
// throttling (429) and other server errors are worth trying again.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	return apierrors.IsInvalid(err) || apierrors.IsRequestEntityTooLargeError(err) ||
		apierrors.IsBadRequest(err) || isEtcdRequestTooLarge(err)
}

// The two texts of a request too large for etcd, as kube-apiserver passes
// them on: etcd's own refusal (rpctypes.ErrRequestTooLarge) of a request over
// its --max-request-bytes (1.5 MiB by default), and the gRPC client's refusal
// to send a message over its limit (2 MiB in kube-apiserver) before it
// reaches etcd. These are the two errors k8s.io/apiserver's own
// isTooLargeError (endpoints/handlers/rest.go) recognises.
var etcdTooLarge = []string{
	"etcdserver: request is too large",
	"trying to send message larger than max",
}

// isEtcdRequestTooLarge recognises a write refused because the object is too
// large to store, as kube-apiserver answers it. It gives it no status of its
// own: in k8s.io/apiserver v0.35.4 the update handler
// (endpoints/handlers/update.go) tries once more without managedFields, then
// returns the storage error as is, which ErrorToAPIStatus
// (endpoints/handlers/responsewriters/status.go) answers as a Status with
// code 500, reason "" (StatusReasonUnknown) and the error's text as the
// message; kubernetes/kubernetes#74600 shows the 500, and #112152, still open,
// asks for a 4xx. The integration test
// TestEdgeHubKnowsTheStatusWritesNoRetryCanMend sees both texts from the real
// API server. So the message tells it from a 500 worth retrying; the code is
// not checked, so that an API server answering 413 or 400 with the same text
// is recognised too.
func isEtcdRequestTooLarge(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	msg := status.Status().Message
	return slices.ContainsFunc(etcdTooLarge, func(text string) bool { return strings.Contains(msg, text) })
}
