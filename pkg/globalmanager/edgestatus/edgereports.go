package edgestatus

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/internal/lanes"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// EdgeReports applies what the edge reports to the status of one kind's
// objects, by the rule every kind follows. A write starts from the object
// its writer last wrote, or else from the cache, and is conditional on that
// object's resourceVersion: a base the API server has moved past conflicts,
// and the object is then read from the API server and the reports applied
// again, so a report never rewinds a status the cache has not caught up
// with. That nothing is to be written is decided only on a read of the API
// server (a cache may count a report an object of the same name, since
// deleted, counted). Events are recorded once the status is written. The
// edge hub acknowledges a report when the applier returns nil, so only after
// the write.
//
// Reports about the same object are coalesced: while one status write of an
// object is in flight, the reports that arrive for that object wait
// together, and the next write carries them all, in the order they arrived. Each still gets its own answer: a report that
// its change refuses is left out of the write and refused alone. Reports
// about other objects never wait behind it: each object has its own writer.
type EdgeReports[T common.Owner] struct {
	// Kind is the lower-case kind, in refusals ("federatedlearningjob").
	Kind string
	// Client is the kind's generated client for a namespace.
	Client func(namespace string) common.StatusClient[T]
	// Cached reads an object from the cache, as a lister's Get does: the
	// base of an object's first write, which saves reading the API server
	// when the cache is current; nil reads the API server.
	Cached func(namespace, name string) (T, error)
	// EdgeNodes points at the object's record of what the cloud last heard
	// from each edge node (status.edgeNodes); ApplyWorkers needs it.
	EdgeNodes func(obj T) *[]sednav1.EdgeNodeStatus
	// Recorder records the events of an applied report.
	Recorder record.EventRecorder
	// Clock says the time a report is applied at.
	Clock clock.PassiveClock
	// Metrics counts the writes and the reports each carried; nil counts
	// nothing.
	Metrics *common.Metrics

	writers lanes.Lanes[string, *reportChange[T]] // by namespace/name
}

// For is the applier of edge reports to the status of p's owners, of the
// lower-case kind, through p's client and recorder. edgeNodes points at an
// owner's status.edgeNodes; clk says the time a report is applied at.
func For[T common.Object[T]](p *common.Syncer[T], kind string, edgeNodes func(owner T) *[]sednav1.EdgeNodeStatus, clk clock.PassiveClock,
	metrics *common.Metrics) *EdgeReports[T] {
	return &EdgeReports[T]{Kind: kind, Client: p.Client, Cached: p.Get, EdgeNodes: edgeNodes, Recorder: p.Recorder, Clock: clk, Metrics: metrics}
}

// reportChange is one report's change to an object's status, waiting for
// the write that carries it.
type reportChange[T common.Owner] struct {
	change func(obj T) (changed bool, events []common.Event, err error)
	done   chan error // buffered: the writer never waits on it
	// call is shared by the changes of one ApplyAll call (one node's
	// reports, in order): one that fails to be retried holds back the
	// later ones of its call.
	call *int
}

// reportWriteTimeout bounds one write of an object's status, its conflicts'
// retries included: the write serves many reports, so no one report's
// context cancels it.
const reportWriteTimeout = time.Minute

// Apply folds a report into the status of the object namespace/name: change
// changes obj and says whether anything changed and which events to record
// once it is written. Nothing is written when nothing changed, so a resent
// report is harmless. A report about an object that does not exist, or
// that another controller runs (common.RunByNereid), is refused for good
// (edgeproto.Refuse), and change may refuse one too; any
// other error has it resent. change may run more than once (after a
// conflict, or when another report of the same write is refused) and must
// depend only on obj.
//
// Apply returns once the write that carries the report is done, or when ctx
// ends; the write goes on for the other reports it carries.
func (a *EdgeReports[T]) Apply(ctx context.Context, namespace, name string, change func(obj T) (changed bool, events []common.Event, err error)) error {
	return a.ApplyAll(ctx, namespace, name, []func(obj T) (bool, []common.Event, error){change})[0]
}

// ApplyAll is Apply for several reports about the same object, in the order
// given: they wait together and go in the same write, so they are written
// together or not at all (a change that refuses its report is left out
// alone). It returns each change's result.
func (a *EdgeReports[T]) ApplyAll(ctx context.Context, namespace, name string, changes []func(obj T) (changed bool, events []common.Event, err error)) []error {
	cs := make([]*reportChange[T], len(changes))
	call := new(int)
	for i, change := range changes {
		cs[i] = &reportChange[T]{change: change, done: make(chan error, 1), call: call}
	}
	key := namespace + "/" + name
	if a.writers.Add(key, cs...) {
		go a.write(context.WithoutCancel(ctx), key, namespace, name)
	}
	errs := make([]error, len(cs))
	for i, c := range cs {
		select {
		case errs[i] = <-c.done:
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
	}
	return errs
}

// write is the writer of one object: it writes what waits for it, batch
// after batch, until nothing does. Each batch starts from what the previous
// one wrote; the first from the cache.
func (a *EdgeReports[T]) write(ctx context.Context, key, namespace, name string) {
	var last T
	wroteLast := false
	for {
		changes := a.writers.Take(key)
		if len(changes) == 0 {
			return
		}
		base, known := last, wroteLast
		if !known && a.Cached != nil {
			cached, err := a.Cached(namespace, name)
			base, known = cached, err == nil
		}
		if known {
			base = base.DeepCopyObject().(T)
		}
		wctx, cancel := context.WithTimeout(ctx, reportWriteTimeout)
		errs, written, wrote := a.applyAll(wctx, namespace, name, changes, base, known)
		if !wrote && slices.ContainsFunc(errs, common.IsPermanent) && changes[0].call != changes[len(changes)-1].call {
			// Refused for good: one call's change (one node's reports)
			// may be at fault, and the others must not be refused with
			// it. Each call is written alone.
			errs, written, wrote = a.applyEachCall(wctx, namespace, name, changes)
		}
		cancel()
		last, wroteLast = written, wrote
		for i, c := range changes {
			c.done <- errs[i]
		}
	}
}

// applyEachCall applies the changes of each ApplyAll call among changes
// (each call's are together, in order) in a write of its own, one call
// after another, starting from a read of the API server; it returns each
// change's result and the last object written, if any.
func (a *EdgeReports[T]) applyEachCall(ctx context.Context, namespace, name string, changes []*reportChange[T]) ([]error, T, bool) {
	errs := make([]error, 0, len(changes))
	var last T
	wroteAny := false
	for start := 0; start < len(changes); {
		end := start + 1
		for end < len(changes) && changes[end].call == changes[start].call {
			end++
		}
		base := last
		if wroteAny {
			base = last.DeepCopyObject().(T)
		}
		callErrs, written, wrote := a.applyAll(ctx, namespace, name, changes[start:end], base, wroteAny)
		errs = append(errs, callErrs...)
		if wrote {
			last, wroteAny = written, true
		}
		start = end
	}
	return errs, last, wroteAny
}

// applyAll applies changes to the object in one status write, and returns
// each change's result and the object written, if it wrote one. When
// known, the first attempt starts from base, which is the caller's to
// change; otherwise, and after a conflict, from a read of the API server.
func (a *EdgeReports[T]) applyAll(ctx context.Context, namespace, name string, changes []*reportChange[T], base T, known bool) ([]error, T, bool) {
	client := a.Client(namespace)
	errs := make([]error, len(changes))
	var written T
	events := make([][]common.Event, len(changes))
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		for {
			fresh, read := base, !known
			known = false // a conflict, or a second look, reads the API server
			if read {
				var err error
				fresh, err = client.Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return edgeproto.Refuse("%s %s/%s does not exist", a.Kind, namespace, name)
				} else if err != nil {
					return fmt.Errorf("reading %s %s/%s: %w", a.Kind, namespace, name, err)
				}
			}
			if !common.RunByNereid(fresh) {
				return edgeproto.Refuse("%s %s/%s is run by another controller (spec.managedBy)", a.Kind, namespace, name)
			}
			// Events and refusals of an attempt that conflicted are
			// computed again.
			clear(errs)
			clear(events)
			obj, changed := a.changeAll(fresh, changes, errs, events)
			if !changed {
				clear(events)
				if !read {
					// Only a write checks its base is current: with
					// nothing to write, look again at the API server's.
					continue
				}
				return nil
			}
			updated, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
			if err != nil {
				clear(events)
				return fmt.Errorf("updating status of %s %s/%s: %w", a.Kind, namespace, name, err)
			}
			written, wrote = updated, true
			return nil
		}
	})
	carried := 0
	for i := range changes {
		if errs[i] == nil {
			errs[i] = err
		}
		if errs[i] == nil {
			carried++
		}
	}
	if !wrote || err != nil {
		return errs, written, false
	}
	a.Metrics.ReportsWritten(a.Kind, carried)
	for _, e := range events {
		common.RecordEvents(a.Recorder, written, e)
	}
	return errs, written, true
}

// changeAll applies every change not refused yet to a copy of fresh, and
// says whether any changed it. A change that fails is marked in errs and the
// others are applied again to a new copy, so that what it did before failing
// is not written. A change that fails with an error worth retrying (not a
// refusal) fails the later changes of its ApplyAll call with it: written,
// they would record the node's later report ids as applied, and the retried
// report would then be taken for one already applied, and acknowledged
// without its change.
func (a *EdgeReports[T]) changeAll(fresh T, changes []*reportChange[T], errs []error, events [][]common.Event) (T, bool) {
	for {
		obj := fresh
		if len(changes) > 1 {
			obj = fresh.DeepCopyObject().(T)
		}
		changed, failed := false, false
		for i, c := range changes {
			if errs[i] != nil {
				continue
			}
			ch, ev, err := c.change(obj)
			if err != nil {
				errs[i], failed = err, true
				if _, refused := edgeproto.IsRefused(err); !refused {
					for j := i + 1; j < len(changes); j++ {
						if changes[j].call == c.call {
							errs[j] = err
						}
					}
				}
				break
			}
			changed = changed || ch
			if ch {
				events[i] = ev
			}
		}
		if !failed {
			return obj, changed
		}
		clear(events)
		if len(changes) == 1 {
			return obj, false
		}
	}
}

// ApplyWorkers applies workers' reports, forwarded by the LocalController
// of from.Node, to the status of the object they name (all the same one, in
// ID order), in one write (ApplyAll). Each report is recorded under
// edgeNodes (RecordEdgeReport), which makes it idempotent by node, store and
// report ID: a report the status already counts changes nothing. A new one
// is then handed to apply, the kind's part, with the report, which may
// change the object further, return events, or refuse the report. It
// returns each report's result.
func (a *EdgeReports[T]) ApplyWorkers(ctx context.Context, from edgeproto.Source, reports []edgeproto.WorkerReport,
	apply func(obj T, wr edgeproto.WorkerReport, now metav1.Time) ([]common.Event, error)) []error {
	if len(reports) == 0 {
		return nil
	}
	changes := make([]func(obj T) (bool, []common.Event, error), len(reports))
	for i, wr := range reports {
		changes[i] = func(obj T) (bool, []common.Event, error) {
			now := metav1.NewTime(a.Clock.Now())
			nodes := a.EdgeNodes(obj)
			recorded, applied := RecordEdgeReport(*nodes, from, wr.Report, wr.Info, now)
			if !applied {
				return false, nil, nil
			}
			*nodes = recorded
			if apply == nil {
				return true, nil, nil
			}
			events, err := apply(obj, wr, now)
			return true, events, err
		}
	}
	info := reports[0].Info
	return a.ApplyAll(ctx, info.Namespace, info.OwnerName, changes)
}
