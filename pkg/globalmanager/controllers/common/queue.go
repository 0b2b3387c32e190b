package common

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// SyncFunc reconciles the object of one key; an error requeues the key with backoff.
type SyncFunc func(ctx context.Context, key string) error

// NewQueue is the rate-limited queue of keys every controller uses, named for
// its metrics.
func NewQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedMaxOfRateLimiter(
			// Per item: 5ms doubling to 60s; overall: generous enough to never be the bottleneck.
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 60*time.Second),
			&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(500), 5000)},
		),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// Run waits for the caches, runs workers that take keys from queue and call sync
// until ctx is done, then shuts the queue down.
func Run(ctx context.Context, name string, queue workqueue.TypedRateLimitingInterface[string], workers int, syncFn SyncFunc, metrics *Metrics, synced ...cache.InformerSynced) error {
	defer utilruntime.HandleCrash()
	defer queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", name)
	ctx = klog.NewContext(ctx, logger)

	logger.Info("Waiting for caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("caches of controller %s did not sync", name)
	}
	logger.Info("Starting workers", "count", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for processNext(ctx, name, queue, syncFn, metrics) {
				}
			}, time.Second)
		})
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	logger.Info("Workers stopped")
	return nil
}

func processNext(ctx context.Context, name string, queue workqueue.TypedRateLimitingInterface[string], syncFn SyncFunc, metrics *Metrics) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	start := time.Now()
	err := syncFn(ctx, key)
	metrics.observeSync(name, time.Since(start), err)
	if err == nil {
		queue.Forget(key)
		return true
	}
	utilruntime.HandleErrorWithContext(ctx, err, "Sync failed; retrying with backoff", "controller", name, "key", key)
	queue.AddRateLimited(key)
	return true
}

// KeyOf returns the namespace/name key of an object, or of the last state of a
// deleted one; ok is false for anything without one.
func KeyOf(obj any) (key string, ok bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("computing key of %T: %w", obj, err))
		return "", false
	}
	return key, true
}

// Batched enqueues keys after period, so a burst of child events (a job's
// pods being created, scheduled and started) is one sync and one status write,
// not one each, as the upstream Job controller batches pod events. Owner spec
// changes are enqueued at once, never batched.
func Batched(queue workqueue.TypedRateLimitingInterface[string], period time.Duration) func(key string) {
	if period <= 0 {
		return queue.Add
	}
	return func(key string) { queue.AddAfter(key, period) }
}
