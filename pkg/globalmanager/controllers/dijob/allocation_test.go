package dijob

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/allocator"
)

// The caches of every node and pod are started by the first DIJob synced,
// not before and not by the sync of a job that is gone, and the sync that
// starts them places the job once they are filled.
func TestTheClusterCachesStartWithTheFirstDIJob(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, job)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100"), corev1.ResourceMemory: resource.MustParse("100Gi"), corev1.ResourcePods: resource.MustParse("100"),
	}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	usage := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(node), 0)
	nodes, pods := usage.Core().V1().Nodes(), usage.Core().V1().Pods()
	var starts atomic.Int32
	f.c.placer = newPlacer(&Allocation{
		Policy: allocator.PackAndSpread{}, Nodes: nodes.Lister(), Pods: pods.Lister(), Period: time.Hour,
		Start: func() {
			starts.Add(1)
			usage.Start(t.Context().Done())
		},
		Synced: []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced},
	}, 0, f.c.now)

	// Running with no DIJob synced starts nothing.
	optimizeLoopWaitsForAJob(t)

	// Nor does a sync of a job that is gone.
	if err := f.c.sync(t.Context(), ns+"/gone"); err != nil {
		t.Fatalf("sync of a job that is gone: %v", err)
	}
	if n := starts.Load(); n != 0 {
		t.Fatalf("the caches were started %d times by the sync of a job that is gone", n)
	}

	created, _ := f.sync(t, job)
	if n := starts.Load(); n != 1 {
		t.Fatalf("the caches were started %d times by the first sync, want 1", n)
	}
	if len(created) != 4 {
		t.Fatalf("the first sync created %d pods, want the 4 replicas placed on the node the caches hold; status %+v", len(created), f.status(t, job))
	}
	for _, p := range created {
		if got := p.Annotations["diengine/node"]; got != "big" {
			t.Errorf("pod %s placed on %q, want big", p.Name, got)
		}
	}
	f.sync(t, job)
	if n := starts.Load(); n != 1 {
		t.Errorf("the caches were started %d times after two syncs, want once", n)
	}
}

// optimizeLoopWaitsForAJob runs the optimize loop of a controller that
// has synced no DIJob for a day of the bubble's clock, until the loop
// blocks (synctest.Wait: every goroutine of the bubble is blocked), and
// checks that it started no cache, then that it ends with its context.
func optimizeLoopWaitsForAJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var starts atomic.Int32
		c := &Controller{placer: newPlacer(&Allocation{
			Policy: allocator.PackAndSpread{}, Period: time.Hour,
			Start: func() { starts.Add(1) },
			// Caches that never fill: a loop that started them waits here.
			Synced: []cache.InformerSynced{func() bool { return false }},
		}, 0, time.Now)}
		ctx, cancel := context.WithCancel(t.Context())
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			c.optimizeLoop(ctx)
		}()
		// A day passes at once on the bubble's clock; then the loop runs
		// until it blocks.
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if n := starts.Load(); n != 0 {
			t.Errorf("the optimize loop started the caches %d times before any DIJob was synced", n)
		}
		select {
		case <-c.placer.started:
			t.Error("the placer says it started with no DIJob synced")
		case <-ended:
			t.Error("the optimize loop ended before its context")
		default:
		}
		cancel()
		synctest.Wait()
		select {
		case <-ended:
		default:
			t.Error("the optimize loop still runs after its context ended")
		}
	})
}
