package dijob

import (
	"sync/atomic"
	"testing"
	"time"

	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	difake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	diinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// The cache of the link Leases is started by the first DIJob synced, not
// by the controller's start nor by the sync of a job that is gone: a
// GlobalManager that runs no DIJob does not take every Lease renewal of
// the fleet. The sync that starts it waits until it is filled.
func TestTheLinkLeasesCacheStartsWithTheFirstDIJob(t *testing.T) {
	job := exampleJob(t)
	leases := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0).Coordination().V1().Leases()
	build := func(cfg Config) *Controller {
		kube, di := kubefake.NewClientset(), difake.NewClientset(job)
		c, err := NewController(kinds.Deps{Kube: kube, Client: di, KubeInformers: kubeinformers.NewSharedInformerFactory(kube, 0),
			Informers: diinformers.NewSharedInformerFactory(di, 0), Recorder: record.NewFakeRecorder(100),
			Clock: testingclock.NewFakePassiveClock(time.Unix(1000, 0))}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	plain := build(Config{ServerURL: "http://di-server:8081"})
	withLeases := build(Config{ServerURL: "http://di-server:8081", LinkLeases: leases.Informer()})
	if len(withLeases.synced) != len(plain.synced) {
		t.Errorf("the controller waits for %d caches with the link Leases and %d without: its start must not wait for them", len(withLeases.synced), len(plain.synced))
	}

	f := newFixture(t, job)
	var starts atomic.Int32
	var filled atomic.Bool
	f.c.linkLeases = newLazyCaches("the link Leases", func() {
		starts.Add(1)
		go filled.Store(true) // filled a moment later: the sync waits
	}, []cache.InformerSynced{filled.Load})
	if err := f.c.sync(t.Context(), ns+"/gone"); err != nil {
		t.Fatalf("sync of a job that is gone: %v", err)
	}
	if n := starts.Load(); n != 0 {
		t.Fatalf("the link Leases were started %d times by the sync of a job that is gone", n)
	}
	f.sync(t, job)
	if n, ok := starts.Load(), filled.Load(); n != 1 || !ok {
		t.Fatalf("after the first sync the link Leases were started %d times (filled %t), want once and filled", n, ok)
	}
	f.sync(t, job)
	if n := starts.Load(); n != 1 {
		t.Errorf("the link Leases were started %d times after two syncs, want once", n)
	}
}
