package dashboard

import (
	"context"

	"github.com/nereid-ml/nereid/pkg/plugin/cli"
	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// clusterSource reads the cluster with the user's clients: the fleet, the
// jobs and their rounds as package view reads them, and the jobs' events.
type clusterSource struct {
	clients *cli.Clients
}

// NewClusterSource is the Source of the cluster clients reach, read as
// their user: the dashboard shows what that user may see.
func NewClusterSource(clients *cli.Clients) Source {
	return &clusterSource{clients: clients}
}

func (s *clusterSource) Snapshot(ctx context.Context) (*view.Snapshot, error) {
	return view.Read(ctx, s.clients)
}

func (s *clusterSource) Rounds(ctx context.Context, kind, namespace, name string) (*view.Rounds, error) {
	return view.ReadRounds(ctx, s.clients, kind, namespace, name)
}

func (s *clusterSource) Events(ctx context.Context, kind, namespace, name string) ([]Event, error) {
	return readEvents(ctx, s.clients.Kube, kind, namespace, name)
}
