package reports

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// One node's lanes hold at most turnsPerNode of the shared turns: another
// node's lane gets one while the first node's next lane waits.
func TestANodeHoldsAtMostItsShareOfTheTurns(t *testing.T) {
	shared := NewTurns(8, prometheus.NewGauge(prometheus.GaugeOpts{Name: "waiting"}))
	nodeA, nodeB := make(chan struct{}, turnsPerNode), make(chan struct{}, turnsPerNode)
	var held []*laneTurn
	for range turnsPerNode {
		l := &laneTurn{turns: shared, node: nodeA}
		if !l.take(t.Context()) {
			t.Fatal("a node's first turns were not given")
		}
		held = append(held, l)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if (&laneTurn{turns: shared, node: nodeA}).take(ctx) {
		t.Errorf("node a got a turn beyond its %d", turnsPerNode)
	}
	other := &laneTurn{turns: shared, node: nodeB}
	if !other.take(t.Context()) {
		t.Fatal("another node waited for node a's turns")
	}
	other.release()
	held[0].release()
	if l := (&laneTurn{turns: shared, node: nodeA}); !l.take(t.Context()) {
		t.Error("node a got no turn after giving one back")
	}
	if len(shared.turns) != turnsPerNode {
		t.Errorf("%d shared turns held, want %d", len(shared.turns), turnsPerNode)
	}
}
