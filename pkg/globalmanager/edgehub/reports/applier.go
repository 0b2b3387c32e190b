package reports

import (
	"context"

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
// whose applier fails with an error no retry can mend (common.IsPermanent).
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

// ApplyInOrder calls apply for 0 to n-1, in order, and returns each result.
// It stops at the first error that is not a refusal: the rest get that
// error too, so that none is applied before the one that failed.
func ApplyInOrder(n int, apply func(i int) error) []error {
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

// RefusedError is the error of a report that can never be applied; it is
// edgeproto's, so appliers may use either package.
type RefusedError = edgeproto.RefusedError

// Refuse returns the error an applier returns for a report that can never be
// applied, with a formatted reason the LocalController logs.
func Refuse(format string, args ...any) error {
	return edgeproto.Refuse(format, args...)
}
