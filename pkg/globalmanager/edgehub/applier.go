package edgehub

import (
	"context"
	"errors"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// Source is where a report comes from: the node its connection authenticated
// as, and the identity of the LocalController's store that its Hello stated.
// Report IDs count per store: a wiped or replaced store starts again at 1.
type Source = edgeproto.Source

// ReportApplier applies worker reports to the status of one kind's objects.
// Each kind's controller implements it; the hub holds one per API kind
// (FederatedLearningJob, …).
//
// ApplyReports gets reports of one source about one object, in the order
// the LocalController sent them (ID order), and returns each one's result.
// It should write them together: one status write for all, which is what
// lets a node's burst of reports about one object cost one write. The hub
// hands over a source's reports about one object one call after another,
// never two at once, and never skips one that failed: after an error that
// is not a refusal it tries the failed ones twice more within half a
// second, then closes the connection (websocket.CloseTryAgainLater) and
// hands over nothing more of that object, so the LocalController resends
// that report and those after it, in order, when it reconnects. Reports
// about different objects may be applied at the same time and finish in
// any order. An applier may therefore take "ID at most the last applied for
// this node and store on this object" to mean "already applied"; it must
// not compare IDs across stores.
//
// ApplyReports must be idempotent by source (node and store) and report ID:
// a report is resent until acknowledged, so it can arrive again after it
// was applied. A report's result is nil when it is applied (or was already),
// an error from Refuse when it can never be applied (the report is
// acknowledged with the reason and leaves the LocalController's outbox), and
// any other error to have it resent later. The hub itself refuses a report
// whose applier fails with an error no retry can mend (IsPermanent).
//
// The hub has already checked that each report's info is valid and that
// from.Node has a worker in the object info.Owner() names.
type ReportApplier interface {
	ApplyReports(ctx context.Context, from Source, reports []edgeproto.WorkerReport) []error
}

// DatasetApplier applies a LocalController's count of a Dataset on its node to
// the Dataset's status. The hub has checked that the report is valid and that
// the Dataset is on from.Node. The same rules as ReportApplier's hold: nil
// when applied, Refuse for never, any other error to have it resent.
type DatasetApplier interface {
	ApplyDatasetReport(ctx context.Context, from Source, r *edgeproto.Report, d *edgeproto.DatasetReport) error
}

// Appliers are what the hub hands reports to.
type Appliers struct {
	// Workers apply worker reports, by the API kind of the report's owner
	// ("FederatedLearningJob", …); a report about a kind with none is refused.
	Workers map[string]ReportApplier
	// Datasets applies dataset counts; without one they are refused.
	Datasets DatasetApplier
}

// applyInOrder calls apply for 0 to n-1, in order, and returns each result.
// It stops at the first error that is not a refusal: the rest get that
// error too, so that none is applied before the one that failed.
func applyInOrder(n int, apply func(i int) error) []error {
	errs := make([]error, n)
	for i := range n {
		errs[i] = apply(i)
		if _, refused := edgeproto.IsRefused(errs[i]); errs[i] != nil && !refused {
			for j := i + 1; j < n; j++ {
				errs[j] = errs[i]
			}
			break
		}
	}
	return errs
}

// IsPermanent says whether an applier's error is one that no retry of the
// same report can mend, because the API server refused the write for what it
// holds rather than for when it came: the status would be invalid (422), the
// request too large (413), malformed (400), or the object too large for etcd.
// Timeouts, conflicts, throttling (429) and other server errors are worth
// trying again.
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

// RefusedError is the error of a report that can never be applied; it is
// edgeproto's, so appliers may use either package.
type RefusedError = edgeproto.RefusedError

// Refuse returns the error an applier returns for a report that can never be
// applied, with a formatted reason the LocalController logs.
func Refuse(format string, args ...any) error {
	return edgeproto.Refuse(format, args...)
}
