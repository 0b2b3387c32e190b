package common

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// EdgeReports applies what the edge reports to the status of one kind's
// objects, by the rule every kind follows. The object is read from the API
// server, not the cache, so a report never rewinds a status the cache has
// not caught up with; a conflict reads it again and applies the report
// again; events are recorded once the status is written. The edge hub
// acknowledges a report when the applier returns nil, so only after the
// write.
type EdgeReports[T Owner] struct {
	// Kind is the lower-case kind, in refusals ("federatedlearningjob").
	Kind string
	// Client is the kind's generated client for a namespace.
	Client func(namespace string) StatusClient[T]
	// EdgeNodes points at the object's record of what the cloud last heard
	// from each edge node (status.edgeNodes); ApplyWorker needs it.
	EdgeNodes func(obj T) *[]sednav1.EdgeNodeStatus
	// Recorder records the events of an applied report.
	Recorder record.EventRecorder
	// Now is the time a report is applied at.
	Now func() time.Time
}

// EdgeReports is the applier of edge reports to the status of p's owners, of
// the lower-case kind, through p's client and recorder. edgeNodes points at
// an owner's status.edgeNodes; now is the time a report is applied at.
func (p *Syncer[T]) EdgeReports(kind string, edgeNodes func(owner T) *[]sednav1.EdgeNodeStatus, now func() time.Time) *EdgeReports[T] {
	return &EdgeReports[T]{Kind: kind, Client: p.Client, EdgeNodes: edgeNodes, Recorder: p.Recorder, Now: now}
}

// Apply folds a report into the status of the object namespace/name: change
// changes obj and says whether anything changed and which events to record
// once it is written. Nothing is written when nothing changed, so a resent
// report is harmless. A report about an object that does not exist is
// refused for good (edgeproto.Refuse), and change may refuse one too; any
// other error has it resent.
func (a *EdgeReports[T]) Apply(ctx context.Context, namespace, name string, change func(obj T) (changed bool, events []Event, err error)) error {
	client := a.Client(namespace)
	var obj T
	var events []Event
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		obj, err = client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return edgeproto.Refuse("%s %s/%s does not exist", a.Kind, namespace, name)
		} else if err != nil {
			return fmt.Errorf("reading %s %s/%s: %w", a.Kind, namespace, name, err)
		}
		// Events of an attempt that conflicted are computed again.
		var changed bool
		changed, events, err = change(obj)
		if err != nil || !changed {
			events = nil
			return err
		}
		if _, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
			events = nil
			return fmt.Errorf("updating status of %s %s/%s: %w", a.Kind, namespace, name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	RecordEvents(a.Recorder, obj, events)
	return nil
}

// ApplyWorker applies a worker's report, forwarded by the LocalController of
// from.Node, to the status of the object info names. The report is recorded
// under edgeNodes (RecordEdgeReport), which makes it idempotent by node,
// store and report ID: a report the status already counts changes nothing.
// A new one is then handed to apply, the kind's part, which may change the
// object further, return events, or refuse the report.
func (a *EdgeReports[T]) ApplyWorker(ctx context.Context, from edgeproto.Source, r *edgeproto.Report, info *edgeproto.WorkerInfo,
	apply func(obj T, now metav1.Time) ([]Event, error)) error {
	return a.Apply(ctx, info.Namespace, info.OwnerName, func(obj T) (bool, []Event, error) {
		now := metav1.NewTime(a.Now())
		nodes := a.EdgeNodes(obj)
		recorded, applied := RecordEdgeReport(*nodes, from, r, info, now)
		if !applied {
			return false, nil, nil
		}
		*nodes = recorded
		if apply == nil {
			return true, nil, nil
		}
		events, err := apply(obj, now)
		return true, events, err
	})
}
