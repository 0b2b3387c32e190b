package dashboard

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/plugin/cli"
	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// clusterSource reads the cluster with the user's clients: the fleet, the
// jobs and their rounds as package view reads them, and the jobs' events.
type clusterSource struct {
	clients  *cli.Clients
	snapshot *sharedRead
}

// NewClusterSource is the Source of the cluster clients reach, read as
// their user: the dashboard shows what that user may see.
func NewClusterSource(clients *cli.Clients) Source {
	return &clusterSource{clients: clients, snapshot: newSharedRead(clock.RealClock{}, time.Second, func(ctx context.Context) (*view.Snapshot, error) {
		return view.Read(ctx, clients)
	})}
}

func (s *clusterSource) Snapshot(ctx context.Context) (*view.Snapshot, error) {
	return s.snapshot.get(ctx)
}

func (s *clusterSource) Rounds(ctx context.Context, kind, namespace, name string) (*view.Rounds, error) {
	return view.ReadRounds(ctx, s.clients, kind, namespace, name)
}

func (s *clusterSource) Events(ctx context.Context, kind, namespace, name string) ([]Event, error) {
	return readEvents(ctx, s.clients.Kube, kind, namespace, name)
}

// sharedRead is one snapshot read shared by every tab: a request within
// fresh of the last good read gets that read, and reads are one at a time,
// so however many tabs poll, the API server sees at most one snapshot read
// (view.Read's handful of lists) per fresh period.
type sharedRead struct {
	fresh time.Duration
	read  func(context.Context) (*view.Snapshot, error)
	clock clock.PassiveClock

	mu   sync.Mutex
	last *view.Snapshot
	at   time.Time
}

func newSharedRead(clk clock.PassiveClock, fresh time.Duration, read func(context.Context) (*view.Snapshot, error)) *sharedRead {
	return &sharedRead{fresh: fresh, read: read, clock: clk}
}

func (r *sharedRead) get(ctx context.Context) (*view.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil && r.clock.Now().Sub(r.at) < r.fresh {
		return r.last, nil
	}
	snap, err := r.read(ctx)
	if err != nil {
		return nil, err
	}
	r.last, r.at = snap, r.clock.Now()
	return snap, nil
}
