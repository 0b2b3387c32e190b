package reports

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// Every session's lanes take turns to apply (Turns): a lane takes its
// reports when its turn comes, so while the API server is slower than the
// reports, they gather in their lane and go in one write, instead of each
// waiting in the API server's queue for a write of its own.

// Turns bound the lanes applying reports at once, across sessions. A
// lane's call makes at most one status write at a time (the applier's writer
// of its object carries the reports of every lane that waits for it), so
// this bounds the status writes of reports in flight. Turns are given in the
// order they were asked for: a Go channel wakes its waiting senders in
// order.
type Turns struct {
	turns   chan struct{}
	waiting prometheus.Gauge // lanes waiting for a turn
}

// NewTurns returns n turns; waiting, when not nil, counts the lanes
// waiting for one.
func NewTurns(n int, waiting prometheus.Gauge) *Turns {
	return &Turns{turns: make(chan struct{}, n), waiting: waiting}
}

// turnsPerNode is how many of the shared turns one node's lanes hold at
// most: a node whose calls are slow (its objects' writes wait, or it sends
// many datasets' counts) slows only itself.
const turnsPerNode = 2

// laneTurn is a lane's turn, held or not: one of its node's turnsPerNode,
// then one of the shared turns. A lane holds at most one: it never waits
// for a turn while it holds one.
type laneTurn struct {
	turns *Turns
	node  chan struct{} // the node's turns
	held  bool
}

// take waits for a turn, unless one is held; it returns false if ctx ends
// first.
func (l *laneTurn) take(ctx context.Context) bool {
	if l.held {
		return true
	}
	if !acquire(ctx, l.node, nil) {
		return false
	}
	if !acquire(ctx, l.turns.turns, l.turns.waiting) {
		<-l.node
		return false
	}
	l.held = true
	return true
}

// acquire puts a token into sem, waiting (counted by waiting, if not nil)
// while it is full; it returns false if ctx ends first.
func acquire(ctx context.Context, sem chan struct{}, waiting prometheus.Gauge) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
	}
	if waiting != nil {
		waiting.Inc()
		defer waiting.Dec()
	}
	select {
	case sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// release gives the turn back, if held.
func (l *laneTurn) release() {
	if l.held {
		l.held = false
		<-l.turns.turns
		<-l.node
	}
}
