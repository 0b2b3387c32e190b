package edgehub

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// The hub's own verification of a token (verifyLocally) trusts its caches
// of Pods and ServiceAccounts: a watch that stalls without an error would
// leave a deleted Pod's token acceptable until the deletion's event came.
// So the API server still checks every token the hub accepted itself, after
// the connection has started: a TokenReview in the background, at most
// confirmRate a second, so that a storm of connections costs it nothing at
// once. A connection whose token the review refuses, or finds bound to
// another Pod, is closed. How long a connection waits for its review is
// bounded by the connections waiting ÷ confirmRate (10,000 nodes: about 8
// minutes after a storm).

// confirmRate is how many TokenReviews a second confirm tokens the hub
// accepted itself.
const confirmRate = 20

// confirmWorkers is how many of those reviews are in flight at once.
const confirmWorkers = 2

// confirmer has the API server review, after the fact, the token of each
// connection the hub accepted without a review.
type confirmer struct {
	auth    *authenticator
	metrics *metrics
	queue   workqueue.TypedRateLimitingInterface[*session]

	mu     sync.Mutex
	tokens map[*session]string // the token each waiting session connected with
}

func newConfirmer(auth *authenticator, m *metrics) *confirmer {
	limiter := &workqueue.TypedBucketRateLimiter[*session]{Limiter: rate.NewLimiter(confirmRate, confirmRate)}
	return &confirmer{
		auth: auth, metrics: m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig[*session](limiter,
			workqueue.TypedRateLimitingQueueConfig[*session]{Name: "edgehub_token_confirmations"}),
		tokens: make(map[*session]string),
	}
}

// add has s's token, which the hub accepted itself, reviewed in its turn.
func (c *confirmer) add(s *session, token string) {
	c.mu.Lock()
	c.tokens[s] = token
	c.mu.Unlock()
	c.queue.AddRateLimited(s)
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
				s, shutdown := c.queue.Get()
				if shutdown {
					return
				}
				c.confirmOne(ctx, s)
				c.queue.Done(s)
			}
		})
	}
	wg.Wait()
}

// confirmOne reviews s's token: a refusal closes s, an error of the review
// has it tried again in a later turn, and a session that ended is let go.
func (c *confirmer) confirmOne(ctx context.Context, s *session) {
	c.mu.Lock()
	token := c.tokens[s]
	c.mu.Unlock()
	if s.ctx.Err() != nil || token == "" {
		c.forget(s)
		return
	}
	refusal := c.auth.confirm(ctx, s.id, token)
	switch {
	case refusal == nil:
		c.forget(s)
		c.metrics.tokensConfirmed.WithLabelValues("confirmed").Inc()
	case refusal.metric == refusedReviewError && ctx.Err() == nil:
		s.logger.V(2).Info("Confirming the token by a TokenReview failed; trying again later", "err", refusal.err)
		c.queue.AddRateLimited(s)
	default:
		c.forget(s)
		if ctx.Err() != nil {
			return
		}
		c.metrics.tokensConfirmed.WithLabelValues("refused").Inc()
		s.revoke(revokedTokenRefused, "a TokenReview refused the token the hub had accepted: "+refusal.reason)
	}
}

// forget lets s go: confirmed, refused, or ended.
func (c *confirmer) forget(s *session) {
	c.mu.Lock()
	delete(c.tokens, s)
	c.mu.Unlock()
}

// confirm reviews token, which the hub accepted itself as id, and refuses it
// unless the API server finds it valid and bound to the same Pod of the same
// ServiceAccount on the same node. A refusal with metric refusedReviewError
// is the review failing, not the token.
func (a *authenticator) confirm(ctx context.Context, id *identity, token string) *authError {
	cl := readClaims(token)
	if cl == nil {
		cl = &claims{} // the hub parsed it to accept it; its times are not read here
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
