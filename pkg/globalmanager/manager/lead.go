package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/owner"
)

// Election is how replicas of the GlobalManager take turns: of several,
// the one holding the Lease Namespace/Name acts.
type Election struct {
	Namespace, Name                           string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ShutdownTimeout is how long the work may take to stop once the lease
	// is lost or given up.
	ShutdownTimeout time.Duration
	// Owner, when it names an owner, owns the Lease (OwnLeaderLease).
	Owner owner.Owner
	// WatchDog is /healthz's view of the election; Following is set to the
	// identity of the replica that leads while this one stands by, "" else.
	WatchDog  *leaderelection.HealthzAdaptor
	Following *atomic.Value
	// Leader, when set, is 1 while this replica holds the Lease and 0
	// otherwise (NewLeaderGauge).
	Leader prometheus.Gauge
	// Clock times ShutdownTimeout; nil is the real clock.
	Clock clock.Clock
}

// NewLeaderGauge registers with reg nereid_globalmanager_leader, which every
// replica exports from its start: 0 until it leads, 1 while it does. The
// replicas' values summed say how many lead, so an alert sees a cluster
// where none does (the sum, or the max, is 0 or the series are absent).
func NewLeaderGauge(reg prometheus.Registerer) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "nereid_globalmanager_leader",
		Help: "1 while this GlobalManager replica holds the leader election Lease (or runs without election), 0 otherwise.",
	})
	reg.MustRegister(g)
	return g
}

// setLeader sets the Leader gauge, if any.
func (e Election) setLeader(leads bool) {
	if e.Leader == nil {
		return
	}
	if leads {
		e.Leader.Set(1)
	} else {
		e.Leader.Set(0)
	}
}

func (e Election) clock() clock.Clock {
	if e.Clock == nil {
		return clock.RealClock{}
	}
	return e.Clock
}

// Lead runs work while this replica holds the Lease, until ctx is done.
// Work that fails gives up the Lease, so that a standby takes over, and
// Lead returns its error; a Lease lost to another replica is an error too,
// since carrying on would make two replicas act.
func (e Election) Lead(ctx context.Context, client kubernetes.Interface, work func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	if e.Owner != nil {
		if err := OwnLeaderLease(ctx, client, e.Namespace, e.Name, e.Owner()); err != nil {
			return err
		}
	}
	host, _ := os.Hostname()
	id := host + "_" + uuid.NewString()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.Namespace, e.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return fmt.Errorf("building leader election lock: %w", err)
	}
	electionCtx, stopElection := context.WithCancel(ctx)
	defer stopElection()
	var lost, leading atomic.Bool
	var workErr error
	// RunOrDie returns as soon as the lease is released, without waiting
	// for OnStartedLeading; led is closed once that has returned.
	led := make(chan struct{})
	// The gauge says 0 once Lead returns, whatever order the callbacks ran
	// in: the Lease is then released or lost.
	defer e.setLeader(false)
	leaderelection.RunOrDie(electionCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.LeaseDuration,
		RenewDeadline:   e.RenewDeadline,
		RetryPeriod:     e.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.Name,
		WatchDog:        e.WatchDog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				leading.Store(true)
				e.setLeader(true)
				defer close(led)
				if err := work(ctx); err != nil && ctx.Err() == nil {
					workErr = err
					logger.Error(err, "The GlobalManager cannot work; releasing the lease")
					stopElection() // RunOrDie releases the lease and returns
				}
			},
			OnStoppedLeading: func() {
				e.setLeader(false)
				if electionCtx.Err() == nil {
					lost.Store(true)
				}
			},
			OnNewLeader: func(identity string) {
				if identity != id {
					e.Following.Store(identity)
					logger.Info("Another replica leads", "leader", identity)
				} else {
					e.Following.Store("")
				}
			},
		},
	})
	if leading.Load() {
		select {
		case <-led:
		case <-e.clock().After(e.ShutdownTimeout):
			return fmt.Errorf("the controllers did not stop within --shutdown-timeout %s", e.ShutdownTimeout)
		}
	}
	switch {
	case workErr != nil:
		return workErr
	case lost.Load():
		return errors.New("lost the leader election lease")
	}
	return nil
}

// OwnLeaderLease creates the leader election Lease owned by ref, or adds
// ref to it: leader election keeps the metadata of the Lease it updates.
func OwnLeaderLease(ctx context.Context, client kubernetes.Interface, namespace, name string, ref *metav1.OwnerReference) error {
	if ref == nil {
		return nil
	}
	leases := client.CoordinationV1().Leases(namespace)
	for range 5 {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
			owner.OwnedBy(&lease.ObjectMeta, ref)
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		} else if err == nil && owner.OwnedBy(&lease.ObjectMeta, ref) {
			_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		}
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("owning the leader election Lease %s/%s: %w", namespace, name, err)
		}
	}
	return fmt.Errorf("the leader election Lease %s/%s keeps changing", namespace, name)
}
