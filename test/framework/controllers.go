package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// quietPeriod is how long a controller's counts must stay the same before
// WaitForSyncAfter takes it to be idle. It is longer than the watch latency
// of the local control plane (milliseconds) and than the retry backoff of a
// key's first six failures in a row (5 ms doubling, so 160 ms at the sixth).
const quietPeriod = 250 * time.Millisecond

// ControllerReading is what one controller of a GlobalManager said in its
// metrics at one moment: its sync count and its work queue's counters
// (pkg/globalmanager/controllers/common/metrics.go). ReadController takes one;
// WaitForSyncAfter waits for the syncs after one.
type ControllerReading struct {
	gm         *Process
	controller string
	// start is which start of gm the reading is of; counts restart at 0.
	start int
	// metrics is the whole reading, for ChildrenCreated.
	metrics Metrics

	syncs    float64 // syncs ended, success or error
	failures float64 // syncs ended in error, retried with backoff
	adds     float64 // keys put into the queue
	taken    float64 // keys a worker took from the queue
	finished float64 // keys a worker finished with
	delayed  float64 // AddAfter calls: batched child events and retries
	depth    float64 // keys waiting in the queue
}

// ChildrenCreated is how many children of kind (Pod, Service, Deployment…)
// the controller had created when r was read, since its GlobalManager started.
func (r ControllerReading) ChildrenCreated(kind string) float64 {
	return r.metrics.Get(fmt.Sprintf(`nereid_controller_children_created_total{controller=%q,kind=%q}`, r.controller, kind))
}

// Syncs is how many syncs the controller had ended, in success or error,
// when r was read, since its GlobalManager started.
func (r ControllerReading) Syncs() float64 { return r.syncs }

// idle says that nothing is queued and no worker is on a key.
func (r ControllerReading) idle() bool { return r.depth == 0 && r.taken == r.finished }

// sameCounts says that nothing happened between two readings.
func (r ControllerReading) sameCounts(o ControllerReading) bool {
	return r.start == o.start && r.syncs == o.syncs && r.failures == o.failures && r.adds == o.adds &&
		r.taken == o.taken && r.finished == o.finished && r.delayed == o.delayed
}

func (r ControllerReading) String() string {
	return fmt.Sprintf("%d syncs (%d failed), %d keys added, %d taken, %d finished, %d delayed adds, %d queued",
		int(r.syncs), int(r.failures), int(r.adds), int(r.taken), int(r.finished), int(r.delayed), int(r.depth))
}

// readController reads controller's counts from the metrics of gm's current
// start.
func readController(ctx context.Context, gm *Process, controller string) (ControllerReading, error) {
	r := ControllerReading{gm: gm, controller: controller, start: gm.Starts()}
	addr := gm.HealthAddress()
	if addr == "" {
		return r, fmt.Errorf("%s has not said where it serves its metrics yet", gm.Name)
	}
	m, err := ScrapeMetrics(ctx, "http://"+addr)
	if err != nil {
		return r, err
	}
	// The queue exists from the controller's start, and its series with it.
	if _, ok := m[fmt.Sprintf(`nereid_workqueue_depth{name=%q}`, controller)]; !ok {
		return r, fmt.Errorf("%s has no work queue named %q", gm.Name, controller)
	}
	syncs := func(result string) float64 {
		return m.Get(fmt.Sprintf(`nereid_controller_syncs_total{controller=%q,result=%q}`, controller, result))
	}
	queue := func(metric string) float64 {
		return m.Get(fmt.Sprintf(`nereid_workqueue_%s{name=%q}`, metric, controller))
	}
	r.metrics = m
	r.failures = syncs("error")
	r.syncs = syncs("success") + r.failures
	r.adds = queue("adds_total")
	// A key's time in the queue is observed when a worker takes it, its
	// work duration when the worker is done with it.
	r.taken = queue("queue_duration_seconds_count")
	r.finished = queue("work_duration_seconds_count")
	r.delayed = queue("retries_total")
	r.depth = queue("depth")
	return r, nil
}

// ReadController reads what controller (a GlobalManager controller's name,
// such as federatedlearning.Name) of gm has done so far. Take it before the
// write whose handling the test then waits for with WaitForSyncAfter.
func ReadController(t testing.TB, gm *Process, controller string) ControllerReading {
	t.Helper()
	var (
		r    ControllerReading
		last error
	)
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, last = readController(ctx, gm, controller)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("reading the metrics of controller %s: %v (%v)", controller, err, last)
	}
	return r
}

// WaitForSyncAfter waits until the controller of since has handled what
// happened after since was read, and returns its reading then. It proves
// that
//   - a worker took a key from the controller's queue after since was read
//     (after a restart of the GlobalManager, any key its new process took)
//     and every sync has ended: a change that enqueues the controller was
//     synced, not merely not acted on yet;
//   - nothing is queued or being synced, and nothing was added, taken,
//     synced or delayed for a quiet period: the longer of 250 ms and the
//     GlobalManager's --child-event-batch-period. Batched child events and
//     retries after a failed sync wait outside the queue (AddAfter), where
//     no metric shows them; each such wait counts as a delayed add when it
//     starts, and is over before the quiet period ends, so none is pending.
//
// What a sync writes comes back to the controller as events, and so do the
// writes of other controllers (the garbage collector, kwok): each is handled
// before the quiet period can end, as long as it reaches the controller
// within it, which on the local control plane takes milliseconds. So once it
// returns, a check of the cluster sees what the controller settled on, and a
// condition that holds then holds for as long as nothing new happens.
func WaitForSyncAfter(t testing.TB, since ControllerReading) ControllerReading {
	t.Helper()
	w := &quietWatch{since: since, quiet: max(quietPeriod, since.gm.flagDuration("child-event-batch-period"))}
	var (
		last    ControllerReading
		lastErr error
	)
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := readController(ctx, since.gm, since.controller)
		if err != nil {
			lastErr = err
			return false, nil // the GlobalManager is (re)starting
		}
		last, lastErr = r, nil
		return w.settled(r, time.Now()), nil
	})
	if err != nil {
		t.Fatalf("waiting for controller %s to sync after %v and go quiet for %s: %v; last: %v (%v)",
			since.controller, since, w.quiet, err, last, lastErr)
	}
	return last
}

// quietWatch tells from successive readings when a controller has synced
// after since and then stayed idle, its counts unchanged, for quiet.
type quietWatch struct {
	since ControllerReading
	quiet time.Duration
	// stable is the first of the idle readings with the latest counts.
	stable   ControllerReading
	stableAt time.Time
	idle     bool
}

// settled takes the reading r, read at now, and says whether the controller
// has settled.
func (w *quietWatch) settled(r ControllerReading, now time.Time) bool {
	base := w.since
	if r.start != w.since.start {
		base = ControllerReading{start: r.start} // a new process: all it did is after since
	}
	if r.taken <= base.taken || !r.idle() {
		w.idle = false
		return false
	}
	if !w.idle || !r.sameCounts(w.stable) {
		w.stable, w.stableAt, w.idle = r, now, true
		return false
	}
	return now.Sub(w.stableAt) >= w.quiet
}

// flagDuration is the duration the process was given for --name, 0 if none.
func (p *Process) flagDuration(name string) time.Duration {
	d, _ := time.ParseDuration(p.Flag(name))
	return d
}
