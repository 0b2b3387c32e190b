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
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

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
	}, 0, f.c.clock)

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
		}, 0, clock.RealClock{})}
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
		case <-c.placer.caches.started:
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

// A move's placement holds for the job's pods made again while the move
// settles (one of its new pods deleted by someone else as it starts), and
// no longer than plannedTTL.
func TestAMovesPlacementHoldsForPodsMadeAgain(t *testing.T) {
	job := exampleJob(t)
	key := ns + "/" + job.Name
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100"), corev1.ResourceMemory: resource.MustParse("100Gi"), corev1.ResourcePods: resource.MustParse("100"),
		}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	}
	// Node a is nearly full: the allocator, packing, would put a pod
	// placed afresh there.
	busy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: "other"}, Spec: corev1.PodSpec{NodeName: "a",
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("98"), corev1.ResourceMemory: resource.MustParse("90Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	usage := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(node("a"), node("b"), busy), 0)
	nodes, pods := usage.Core().V1().Nodes(), usage.Core().V1().Pods()
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	p := newPlacer(&Allocation{
		Policy: allocator.PackAndSpread{}, Nodes: nodes.Lister(), Pods: pods.Lister(), Period: time.Hour,
		Start:  func() { usage.Start(t.Context().Done()) },
		Synced: []cache.InformerSynced{nodes.Informer().HasSynced, pods.Informer().HasSynced},
	}, 0, clk)
	p.moves[key] = allocator.Placement{"b", "b", "b", "b"}
	if !p.startMove(key) {
		t.Fatal("the move chosen was not started")
	}

	f := newFixture(t, job)
	f.c.placer = p
	made, _ := f.sync(t, job)
	if len(made) != 4 {
		t.Fatalf("made %d pods, want 4", len(made))
	}
	for _, pod := range made {
		if got := pod.Annotations[AnnotationNode]; got != "b" {
			t.Errorf("pod %s placed on %q, want b, where the move goes", pod.Name, got)
		}
	}

	// The learner's new pod is deleted as it starts: made again, it goes
	// where the move goes too.
	again := newFixture(t, job, made[1:]...)
	again.c.placer = p
	remade, _ := again.sync(t, job)
	if len(remade) != 1 || remade[0].Annotations[AnnotationNode] != "b" {
		t.Fatalf("made again %v on %v, want the learner on b", names(remade), annotationsOf(remade))
	}

	// Past plannedTTL the move's placement is gone: the pod is placed afresh.
	clk.SetTime(clk.Now().Add(plannedTTL + time.Second))
	late := newFixture(t, job, made[1:]...)
	late.c.placer = p
	if remade, _ := late.sync(t, job); len(remade) != 1 || remade[0].Annotations[AnnotationNode] != "a" {
		t.Fatalf("made again %v on %v, want the learner placed afresh, packed onto a", names(remade), annotationsOf(remade))
	}
	if _, ok := p.planned[key]; ok {
		t.Error("the move's placement outlived plannedTTL")
	}
}

func annotationsOf(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Annotations[AnnotationNode])
	}
	return out
}
