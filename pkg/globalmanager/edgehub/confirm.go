package edgehub

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// The hub's own verification of a token (verifyLocally) trusts its caches
// of Pods and ServiceAccounts: a watch that stalls without an error would
// leave a deleted Pod's token acceptable until the deletion's event came.
// So the API server still checks every token the hub accepted itself, after
// the connection has started: a TokenReview in the background, at most
// confirmRate a second, so that a storm of connections costs it nothing at
// once. The recheck of open connections (recheck.go) hands it, in the same
// way, each token the hub cannot check again itself. A connection whose token the review refuses, or finds bound to
// another Pod, is closed, and that Pod's tokens are reviewed before they are
// accepted from then on (for deletedMemory). How long a connection waits
// for its review is bounded by the connections waiting ÷ confirmRate
// (10,000 nodes: about 8 minutes after a storm).

// confirmRate is how many TokenReviews a second confirm tokens the hub
// accepted itself.
const confirmRate = 20

// confirmWorkers is how many of those reviews are in flight at once.
const confirmWorkers = 2

// confirmer has the API server review, after the fact, the token of each
// connection the hub accepted without a review. It holds one per node, the
// node's current connection: a node that reconnects takes its place in the
// queue again, and a connection that ended costs nothing.
type confirmer struct {
	auth    *authenticator
	metrics *metrics
	queue   workqueue.TypedRateLimitingInterface[string] // by node; failed reviews back off per node
	pace    *rate.Limiter                                // confirmRate, across nodes
	clock   clock.WithTicker                             // the hub's, for the backoff and the pace

	mu      sync.Mutex
	pending map[string]pendingToken // by node
}

// pendingToken is a connection whose token waits for its review.
type pendingToken struct {
	s     *session
	token string
}

func newConfirmer(auth *authenticator, m *metrics, clk clock.WithTicker) *confirmer {
	return &confirmer{
		auth: auth, metrics: m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "edgehub_token_confirmations", Clock: clk}),
		pace:    rate.NewLimiter(confirmRate, 1),
		clock:   clk,
		pending: make(map[string]pendingToken),
	}
}

// add has s's token, which the hub accepted itself, reviewed in its turn.
func (c *confirmer) add(s *session, token string) {
	c.mu.Lock()
	c.pending[s.node] = pendingToken{s: s, token: token}
	c.mu.Unlock()
	c.queue.Add(s.node)
}

// forget lets s go: confirmed, refused, or ended.
func (c *confirmer) forget(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[s.node].s == s {
		delete(c.pending, s.node)
	}
}

// run reviews the waiting tokens until ctx is done.
func (c *confirmer) run(ctx context.Context) {
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
// confirmRate; false when ctx ends first.
func (c *confirmer) waitTurn(ctx context.Context) bool {
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
func (c *confirmer) confirmNode(ctx context.Context, node string) {
	c.mu.Lock()
	p, ok := c.pending[node]
	c.mu.Unlock()
	if !ok || p.s.ctx.Err() != nil {
		c.queue.Forget(node)
		return
	}
	if !c.waitTurn(ctx) {
		return
	}
	refusal := c.auth.confirm(ctx, p.s.id, p.token)
	switch {
	case refusal == nil:
		c.queue.Forget(node)
		c.forget(p.s)
		c.metrics.tokensConfirmed.WithLabelValues("confirmed").Inc()
	case refusal.metric == refusedReviewError:
		if ctx.Err() == nil {
			p.s.logger.V(2).Info("Confirming the token by a TokenReview failed; trying again later", "err", refusal.err)
			c.queue.AddRateLimited(node)
		}
	default:
		c.queue.Forget(node)
		c.forget(p.s)
		c.metrics.tokensConfirmed.WithLabelValues("refused").Inc()
		c.auth.reviewFirst(p.s.id.podUID)
		p.s.revoke(revokedTokenRefused, "a TokenReview refused the connection's token: "+refusal.reason)
	}
}

// confirm reviews token, which the hub accepted itself as id, and refuses it
// unless the API server finds it valid and bound to the same Pod of the same
// ServiceAccount on the same node. A refusal with metric refusedReviewError
// is the review failing, not the token.
func (a *authenticator) confirm(ctx context.Context, id *identity, token string) *authError {
	cl := tokenreview.ReadClaims(token)
	if cl == nil {
		cl = &tokenreview.Claims{} // the hub parsed it to accept it; its times are not read here
	}
	got, refusal := a.review(ctx, token, cl)
	if refusal != nil {
		return refusal
	}
	if got.node != id.node || got.pod != id.pod || got.podUID != id.podUID || got.serviceAccount != id.serviceAccount {
		return &authError{status: http.StatusUnauthorized, metric: refusedInvalidToken,
			reason: fmt.Sprintf("the TokenReview binds it to Pod %s (%s) of %s on node %s, not to Pod %s (%s) of %s on node %s",
				got.pod, got.podUID, got.serviceAccount, got.node, id.pod, id.podUID, id.serviceAccount, id.node)}
	}
	return nil
}
