package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	sednalisters "github.com/nereid-ml/nereid/pkg/client/listers/sedna/v1alpha1"
)

// jobTracker follows the edge section's FederatedLearningJobs through a
// watch: how many run, and how many worker reports from the edge nodes their
// status counts.
type jobTracker struct {
	lister sednalisters.FederatedLearningJobLister

	mu        sync.Mutex
	applied   map[string]int64 // by job: reportsApplied summed over its edge nodes
	running   map[string]bool
	total     int64     // applied, summed over the jobs
	totalAt   time.Time // when total last changed
	changedAt time.Time // when any job last changed
	changed   chan struct{}
}

// newJobTracker starts a watch of the jobs in namespace ns until ctx is done
// and returns once it has listed them.
func newJobTracker(ctx context.Context, sedna sednaclient.Interface, ns string) (*jobTracker, error) {
	t := &jobTracker{applied: map[string]int64{}, running: map[string]bool{}, changed: make(chan struct{}, 1), changedAt: time.Now()}
	f := sednainformers.NewSharedInformerFactoryWithOptions(sedna, 0, sednainformers.WithNamespace(ns))
	inf := f.Sedna().V1alpha1().FederatedLearningJobs()
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj.(*sednav1.FederatedLearningJob), false) },
		UpdateFunc: func(_, obj any) { t.observe(obj.(*sednav1.FederatedLearningJob), false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if j, ok := obj.(*sednav1.FederatedLearningJob); ok {
				t.observe(j, true)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	t.lister = inf.Lister()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("watching the jobs of %s: %w", ns, ctx.Err())
	}
	return t, nil
}

func (t *jobTracker) observe(j *sednav1.FederatedLearningJob, deleted bool) {
	var applied int64
	for _, n := range j.Status.EdgeNodes {
		if strings.HasPrefix(n.Name, "bench-edge-") {
			applied += n.ReportsApplied
		}
	}
	now := time.Now()
	t.mu.Lock()
	if deleted {
		applied = 0
		delete(t.running, j.Name)
	} else {
		t.running[j.Name] = j.Status.Phase == sednav1.FLJobRunning
	}
	if d := applied - t.applied[j.Name]; d != 0 {
		t.total += d
		t.totalAt = now
	}
	t.applied[j.Name] = applied
	t.changedAt = now
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// runningJobs is how many jobs are in phase Running.
func (t *jobTracker) runningJobs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, r := range t.running {
		if r {
			n++
		}
	}
	return n
}

// reportsApplied is the reports the jobs' status counts, and when that last
// changed.
func (t *jobTracker) reportsApplied() (int64, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total, t.totalAt
}

// waitReports waits until the jobs' status counts count reports more than
// base.
func (t *jobTracker) waitReports(ctx context.Context, base int64, count int, timeout time.Duration) error {
	return t.waitFor(ctx, timeout, func() bool {
		applied, _ := t.reportsApplied()
		return applied-base >= int64(count)
	})
}

// waitFor blocks until cond, checked on every change, holds.
func (t *jobTracker) waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-t.changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("timed out after %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// waitQuiet waits until no job changed for quiet, for at most timeout, and
// says whether it saw that.
func (t *jobTracker) waitQuiet(ctx context.Context, quiet, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		t.mu.Lock()
		since := time.Since(t.changedAt)
		t.mu.Unlock()
		if since >= quiet {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(quiet-since, 100*time.Millisecond)):
		}
	}
}
