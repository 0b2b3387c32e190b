package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/nodefs"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// DefaultPeriod is how often a Watcher counts when Config.Period is 0.
const DefaultPeriod = 10 * time.Second

// Store is the part of the LocalController's store a Watcher uses: the
// Datasets the GlobalManager sent, and the state half, where it remembers what
// it reported across restarts.
type Store interface {
	ListObjects(kind string) ([]store.Object, error)
	GetState(key string) ([]byte, bool, error)
	DeleteState(key string) error
}

// Outbox takes a report for the GlobalManager with the state that says it
// was made (see store.Outbox).
type Outbox = store.Outbox

// Config says which Datasets a Watcher counts and where their files are.
type Config struct {
	// Node is this LocalController's node: only Datasets whose spec.nodeName
	// it is are counted.
	Node string
	// Root is the node's filesystem (its Dir "/" on a real node); a
	// Dataset's spec.url is resolved under it, within its allowed paths.
	Root nodefs.Root
	// Period is how often every Dataset is counted (DefaultPeriod if 0).
	Period time.Duration
}

// Watcher counts the samples of the Datasets on its node and reports a
// Dataset's count whenever it differs from the one last reported. What it
// reported is kept in the store's state, so a restart reports only what
// changed meanwhile (and every Dataset it has no record of).
type Watcher struct {
	cfg    Config
	store  Store
	outbox Outbox

	// clock says the time put in reports and ticks Run; a test seam.
	clock clock.WithTicker

	// reported is what was last reported per Dataset on this node, loaded
	// from the store's state on first sight. Only the goroutine polling
	// touches it.
	reported map[types.NamespacedName]countState
}

// countState is what was last reported about a Dataset: kept in memory and
// under stateKey in the store.
type countState struct {
	// UID tells a Dataset from an earlier one of the same name, which the
	// GlobalManager has no count for.
	UID             types.UID `json:"uid,omitempty"`
	NumberOfSamples int32     `json:"numberOfSamples"`
	Error           string    `json:"error,omitempty"`
}

// NewWatcher returns a Watcher reading Datasets from st and appending its
// reports to outbox.
func NewWatcher(st Store, outbox Outbox, cfg Config) *Watcher {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	return &Watcher{cfg: cfg, store: st, outbox: outbox, clock: clock.RealClock{},
		reported: make(map[types.NamespacedName]countState)}
}

// Run polls at once and then every period until ctx is done.
func (w *Watcher) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	t := w.clock.NewTicker(w.cfg.Period)
	defer t.Stop()
	for {
		if err := w.PollOnce(ctx); err != nil {
			logger.Error(err, "Counting datasets")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// stateKey is where what was reported about a Dataset is kept.
func stateKey(nn types.NamespacedName) string {
	return "dataset/" + nn.Namespace + "/" + nn.Name
}

// PollOnce counts every Dataset of this node once, reports those whose count
// or error changed, and forgets those no longer on this node. It returns what
// went wrong with the store or the outbox; a Dataset whose file cannot be read
// is reported with the reason, not returned.
func (w *Watcher) PollOnce(ctx context.Context) error {
	objs, err := w.store.ListObjects("Dataset")
	if err != nil {
		return err
	}
	var errs []error
	seen := make(map[types.NamespacedName]bool, len(objs))
	for _, o := range objs {
		nn := types.NamespacedName{Namespace: o.Key.Namespace, Name: o.Key.Name}
		var d sednav1.Dataset
		if err := json.Unmarshal(o.Data, &d); err != nil {
			// Kept as seen: what it said last time is not known to be gone.
			seen[nn] = true
			errs = append(errs, fmt.Errorf("decoding Dataset %s: %w", nn, err))
			continue
		}
		if d.Spec.NodeName != w.cfg.Node {
			continue
		}
		seen[nn] = true
		if err := w.check(ctx, nn, &d); err != nil {
			errs = append(errs, err)
		}
	}
	for nn := range w.reported {
		if seen[nn] {
			continue
		}
		if err := w.store.DeleteState(stateKey(nn)); err != nil {
			errs = append(errs, err) // kept in memory, so tried again next poll
			continue
		}
		delete(w.reported, nn)
		klog.FromContext(ctx).V(2).Info("Forgot a dataset no longer on this node", "dataset", nn)
	}
	return errors.Join(errs...)
}

// check counts one Dataset and reports the count if it changed.
func (w *Watcher) check(ctx context.Context, nn types.NamespacedName, d *sednav1.Dataset) error {
	last, known := w.reported[nn]
	if !known {
		data, found, err := w.store.GetState(stateKey(nn))
		if err != nil {
			return err
		}
		if found {
			if err := json.Unmarshal(data, &last); err != nil {
				// Reporting again is harmless; a bad record must not stop counting.
				klog.FromContext(ctx).Error(err, "Ignoring an unreadable dataset state", "dataset", nn)
				found = false
			}
		}
		known = found
	}

	now := w.clock.Now()
	cur := countState{UID: d.UID}
	n, err := w.count(d)
	if err != nil {
		cur.Error = err.Error()
	} else {
		cur.NumberOfSamples = n
	}
	if known && last == cur {
		w.reported[nn] = last
		return nil
	}

	body, err := json.Marshal(edgeproto.DatasetReport{
		Namespace: nn.Namespace, Name: nn.Name,
		NumberOfSamples: cur.NumberOfSamples, CountedAt: now.UTC(), Error: cur.Error,
	})
	if err != nil {
		return fmt.Errorf("encoding the report of Dataset %s: %w", nn, err)
	}
	report, err := edgeproto.OutboxRecord(edgeproto.Report{
		Kind: edgeproto.ReportDataset, Worker: edgeproto.LocalControllerWorker, Body: body, ReceivedAt: now.UTC(),
	})
	if err != nil {
		return fmt.Errorf("encoding the report of Dataset %s: %w", nn, err)
	}
	state, err := json.Marshal(cur)
	if err != nil {
		return fmt.Errorf("encoding the state of Dataset %s: %w", nn, err)
	}
	if _, err := w.outbox.AppendReportWithState(report, stateKey(nn), state); err != nil {
		// Not remembered: the next poll tries again.
		return fmt.Errorf("reporting the count of Dataset %s: %w", nn, err)
	}
	w.reported[nn] = cur
	klog.FromContext(ctx).V(2).Info("Reported a dataset's count", "dataset", nn,
		"numberOfSamples", cur.NumberOfSamples, "error", cur.Error)
	return nil
}

// count counts a Dataset's index file. Its error names the file by its URL,
// as the user wrote it, not where the LocalController sees it.
func (w *Watcher) count(d *sednav1.Dataset) (int32, error) {
	path, err := w.cfg.Root.Resolve(d.Spec.URL)
	if err != nil {
		return 0, fmt.Errorf("index file: %w", err)
	}
	n, err := Count(path, d.Spec.Format)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return 0, fmt.Errorf("index file %s: %w", d.Spec.URL, err)
	}
	return n, nil
}
