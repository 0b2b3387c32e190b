package auth

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// The hub's own verification of a token (verifyLocally) trusts its caches
// of Pods and ServiceAccounts: a watch that stalls without an error would
// leave a deleted Pod's token acceptable until the deletion's event came.
// So the API server still checks every token the hub accepted itself, after
// the connection has started: a TokenReview in the background, at most
// ConfirmRate a second, so that a storm of connections costs it nothing at
// once. The hub's recheck of open connections (edgehub/recheck.go) hands it, in the same
// way, each token the hub cannot check again itself. A connection whose token the review refuses, or finds bound to
// another Pod, is closed, and that Pod's tokens are reviewed before they are
// accepted from then on (for deletedMemory). How long a connection waits
// for its review is bounded by the connections waiting ÷ ConfirmRate
// (10,000 nodes: about 8 minutes after a storm).

// ConfirmRate is how many TokenReviews a second confirm tokens the hub
// accepted itself.
const ConfirmRate = 20

// confirmWorkers is how many of those reviews are in flight at once.
const confirmWorkers = 2

// Confirmer has the API server review, after the fact, the token of each
// connection the hub accepted without a review. It holds one per node, the
// node's current connection: a node that reconnects takes its place in the
// queue again, and a connection that ended costs nothing.
type Confirmer struct {
	auth      *Authenticator
	confirmed func(result string)                          // counts the reviews, by result
	queue     workqueue.TypedRateLimitingInterface[string] // by node; failed reviews back off per node
	pace      *rate.Limiter                                // ConfirmRate, across nodes
	clock     clock.WithTicker                             // the hub's, for the backoff and the pace

	mu      sync.Mutex
	pending map[string]pendingToken // by node
}

// Conn is what the Confirmer needs of an open connection.
type Conn interface {
	// Identity is who the connection was admitted as.
	Identity() *Identity
	// Ended says whether the connection has ended.
	Ended() bool
	// Revoke ends the connection: what admitted it no longer holds.
	// reason is the label of connections_revoked_total (Revoked…).
	Revoke(reason, message string)
	// Logger is the connection's.
	Logger() klog.Logger
}

// pendingToken is a connection whose token waits for its review.
type pendingToken struct {
	s     Conn
	token string
}

// NewConfirmer returns a Confirmer of a's tokens, on clk; confirmed, when
// not nil, counts its reviews by result ("confirmed", "refused").
func NewConfirmer(auth *Authenticator, confirmed func(result string), clk clock.WithTicker) *Confirmer {
	if confirmed == nil {
		confirmed = func(string) {}
	}
	return &Confirmer{
		auth: auth, confirmed: confirmed,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "edgehub_token_confirmations", Clock: clk}),
		pace:    rate.NewLimiter(ConfirmRate, 1),
		clock:   clk,
		pending: make(map[string]pendingToken),
	}
}

// Add has s's token, which the hub accepted itself, reviewed in its turn.
func (c *Confirmer) Add(s Conn, token string) {
	node := s.Identity().Node
	c.mu.Lock()
	c.pending[node] = pendingToken{s: s, token: token}
	c.mu.Unlock()
	c.queue.Add(node)
}

// Forget lets s go: confirmed, refused, or ended.
func (c *Confirmer) Forget(s Conn) {
	node := s.Identity().Node
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[node].s == s {
		delete(c.pending, node)
	}
}

// Run reviews the waiting tokens until ctx is done.
func (c *Confirmer) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range confirmWorkers {
		wg.Go(func() {
			for {
				node, shutdown := c.queue.Get()
				if shutdown {
					return
				}
				c.confirmNode(ctx, node)
				c.queue.Done(node)
			}
		})
	}
	wg.Wait()
}

// waitTurn waits, on the hub's clock, for the turn of one review at
// ConfirmRate; false when ctx ends first.
func (c *Confirmer) waitTurn(ctx context.Context) bool {
	now := c.clock.Now()
	r := c.pace.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if delay == 0 {
		return ctx.Err() == nil
	}
	t := c.clock.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		r.CancelAt(c.clock.Now()) // the turn not taken goes to the next
		return false
	}
}

// confirmNode reviews the token of node's connection, if one waits: a
// refusal closes the connection, and has the Pod's next token reviewed
// before it is accepted; an error of the review has it tried again later.
func (c *Confirmer) confirmNode(ctx context.Context, node string) {
	c.mu.Lock()
	p, ok := c.pending[node]
	c.mu.Unlock()
	if !ok || p.s.Ended() {
		c.queue.Forget(node)
		return
	}
	if !c.waitTurn(ctx) {
		return
	}
	refusal := c.auth.confirm(ctx, p.s.Identity(), p.token)
	switch {
	case refusal == nil:
		c.queue.Forget(node)
		c.Forget(p.s)
		c.confirmed("confirmed")
	case refusal.Metric == RefusedReviewError:
		if ctx.Err() == nil {
			p.s.Logger().V(2).Info("Confirming the token by a TokenReview failed; trying again later", "err", refusal.Err)
			c.queue.AddRateLimited(node)
		}
	default:
		c.queue.Forget(node)
		c.Forget(p.s)
		c.confirmed("refused")
		c.auth.reviewFirst(p.s.Identity().PodUID)
		p.s.Revoke(RevokedTokenRefused, "a TokenReview refused the connection's token: "+refusal.Reason)
	}
}

// confirm reviews token, which the hub accepted itself as id, and refuses it
// unless the API server finds it valid and bound to the same Pod of the same
// ServiceAccount on the same node. A refusal with metric RefusedReviewError
// is the review failing, not the token.
func (a *Authenticator) confirm(ctx context.Context, id *Identity, token string) *Refusal {
	cl := tokenreview.ReadClaims(token)
	if cl == nil {
		cl = &tokenreview.Claims{} // the hub parsed it to accept it; its times are not read here
	}
	got, refusal := a.review(ctx, token, cl)
	if refusal != nil {
		return refusal
	}
	if got.Node != id.Node || got.Pod != id.Pod || got.PodUID != id.PodUID || got.ServiceAccount != id.ServiceAccount {
		return &Refusal{Status: http.StatusUnauthorized, Metric: RefusedInvalidToken,
			Reason: fmt.Sprintf("the TokenReview binds it to Pod %s (%s) of %s on node %s, not to Pod %s (%s) of %s on node %s",
				got.Pod, got.PodUID, got.ServiceAccount, got.Node, id.Pod, id.PodUID, id.ServiceAccount, id.Node)}
	}
	return nil
}
