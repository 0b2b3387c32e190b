// Package datasetstatus applies the LocalControllers' counts of Datasets to their
// status. The GlobalManager runs no controller for Datasets: the count is the
// edge's business (the LocalController of spec.nodeName reads the index file
// under the node's root, counts samples per format and reports when the count
// or the file's readability changes); the cloud records it.
package datasetstatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgestatus"
)

// ConditionReadable says whether the Dataset's LocalController could read its
// index file. When it could not, numberOfSamples keeps the last count.
const ConditionReadable = "Readable"

// Reasons of the Readable condition.
const (
	ReasonCounted    = "Counted"
	ReasonUnreadable = "IndexFileUnreadable"
)

// Applier writes dataset counts to Dataset status.
type Applier struct {
	reports *edgestatus.EdgeReports[*sednav1.Dataset]
	clock   clock.PassiveClock
}

// NewApplier returns an Applier writing with client and telling the user
// through recorder when the index file becomes unreadable or readable again;
// clk says when a count was applied.
func NewApplier(client sednaclient.Interface, recorder record.EventRecorder, clk clock.PassiveClock) *Applier {
	a := &Applier{clock: clk}
	a.reports = &edgestatus.EdgeReports[*sednav1.Dataset]{
		Kind: "dataset",
		Client: func(ns string) common.StatusClient[*sednav1.Dataset] {
			return client.SednaV1alpha1().Datasets(ns)
		},
		Recorder: recorder,
	}
	return a
}

// ApplyDatasetReport records a count in the Dataset's status: numberOfSamples
// and updateTime when the count changed, the Readable condition, and the
// report's node, store and id (status.lastReport). A report applied already
// (the same node and store, an id not above the last) changes nothing: the
// LocalController sends a report again until it is acknowledged, and an
// older count must not come back over a newer one meanwhile. The
// LocalController's reports of one Dataset arrive in order. It follows
// edgestatus.EdgeReports' rule.
func (a *Applier) ApplyDatasetReport(ctx context.Context, from edgeproto.Source, r *edgeproto.Report, d *edgeproto.DatasetReport) error {
	return a.reports.Apply(ctx, d.Namespace, d.Name, func(ds *sednav1.Dataset) (bool, []common.Event, error) {
		if applied(ds.Status.LastReport, from, r.ID) {
			return false, nil, nil
		}
		before := apimeta.FindStatusCondition(ds.Status.Conditions, ConditionReadable)
		wasReadable := before != nil && before.Status == metav1.ConditionTrue
		changed := Apply(&ds.Status, ds.Generation, d, metav1.NewTime(a.clock.Now()))
		if last := ds.Status.LastReport; last == nil || last.Node != from.Node || last.Store != from.Store || last.ID != int64(r.ID) {
			ds.Status.LastReport = &sednav1.DatasetReportID{Node: from.Node, Store: from.Store, ID: int64(r.ID)}
			changed = true
		}
		if !changed {
			return false, nil, nil
		}
		// Tell the user when the file becomes unreadable, or readable again.
		switch readable := d.Error == ""; {
		case !readable && (wasReadable || before == nil):
			return true, []common.Event{{Type: corev1.EventTypeWarning, Reason: ReasonUnreadable,
				Message: fmt.Sprintf("Node %s cannot read the index file: %s", from.Node, d.Error)}}, nil
		case readable && !wasReadable && before != nil:
			return true, []common.Event{{Type: corev1.EventTypeNormal, Reason: ReasonCounted,
				Message: fmt.Sprintf("Node %s reads the index file again: %d samples", from.Node, d.NumberOfSamples)}}, nil
		}
		return true, nil, nil
	})
}

// applied says whether the report id from from is one last, the last
// applied, counts already: the same node and store, and an id not above it.
func applied(last *sednav1.DatasetReportID, from edgeproto.Source, id uint64) bool {
	return last != nil && last.Node == from.Node && last.Store == from.Store && int64(id) <= last.ID
}

// Apply folds a count into status and says whether anything changed.
func Apply(status *sednav1.DatasetStatus, generation int64, d *edgeproto.DatasetReport, now metav1.Time) bool {
	changed := false
	cond := metav1.Condition{Type: ConditionReadable, ObservedGeneration: generation}
	if d.Error != "" {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonUnreadable, d.Error
	} else {
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonCounted
		cond.Message = fmt.Sprintf("%d samples counted", d.NumberOfSamples)
		if status.NumberOfSamples != d.NumberOfSamples || status.UpdateTime == nil {
			status.NumberOfSamples = d.NumberOfSamples
			t := metav1.NewTime(d.CountedAt)
			status.UpdateTime = &t
			changed = true
		}
	}
	cond.LastTransitionTime = now
	if apimeta.SetStatusCondition(&status.Conditions, cond) {
		changed = true
	}
	if status.ObservedGeneration != generation {
		status.ObservedGeneration = generation
		changed = true
	}
	return changed
}
