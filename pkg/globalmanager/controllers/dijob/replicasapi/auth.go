package replicasapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// Authenticator says who holds a bearer token.
type Authenticator interface {
	// Authenticate returns the user of token. A token that is not valid is an
	// error wrapping ErrInvalidToken; any other error is a failure to tell
	// (ErrBusy when there is no turn for the review).
	Authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error)
}

// Authorizer says whether a user may act on a resource.
type Authorizer interface {
	// Authorize decides whether user may do attrs. An error is a failure to
	// decide (ErrBusy when there is no turn for the review).
	Authorize(ctx context.Context, user *authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (Decision, error)
}

// Decision is an Authorizer's answer.
type Decision struct {
	Allowed bool
	// Reason says why, when the authorizer says it.
	Reason string
}

var (
	// ErrInvalidToken is wrapped by the error of a token that does not
	// authenticate (tokenreview's, so either package's errors.Is holds).
	ErrInvalidToken = tokenreview.ErrInvalidToken
	// ErrBusy is the error of a review that found no turn in time.
	ErrBusy = errors.New("too many requests are being reviewed, try again later")
)

// reviewQueueTimeout bounds the wait for a turn to review: a flood of
// requests with made-up tokens is told to come back instead of piling up.
const reviewQueueTimeout = 5 * time.Second

// reviewSlots bounds the reviews in flight at the API server.
type reviewSlots chan struct{}

// reviewTurns bounds the API calls made for callers before they are
// authorized (TokenReviews, SubjectAccessReviews, reads of a token's pod): at
// most cap(slots) at a time, and at most limit's rate. The calls go through
// the GlobalManager's client, whose rate limit every controller shares: a
// flood of made-up tokens must not take it all.
type reviewTurns struct {
	slots reviewSlots
	limit *rate.Limiter
}

func newReviewTurns(concurrent int, perSecond float64) *reviewTurns {
	return &reviewTurns{slots: make(reviewSlots, concurrent), limit: rate.NewLimiter(rate.Limit(perSecond), burstOf(perSecond))}
}

// burstOf is the burst of a rate: two seconds' worth, at least 1.
func burstOf(perSecond float64) int {
	return max(1, int(2*perSecond))
}

// acquire waits for a turn, at most reviewQueueTimeout; release gives it
// back.
func (t *reviewTurns) acquire(ctx context.Context) error {
	waitCtx, cancel := context.WithTimeout(ctx, reviewQueueTimeout)
	defer cancel()
	select {
	case t.slots <- struct{}{}:
	case <-waitCtx.Done():
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for a turn to review: %w", ctx.Err())
		}
		return ErrBusy
	}
	if err := waitRate(ctx, waitCtx, t.limit); err != nil {
		<-t.slots
		return err
	}
	return nil
}

func (t *reviewTurns) release() { <-t.slots }

// waitRate waits for a token of limit while waitCtx lasts: ErrBusy when
// none comes in time, ctx's error when the request ended.
func waitRate(ctx, waitCtx context.Context, limit *rate.Limiter) error {
	if err := limit.Wait(waitCtx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("waiting for a turn: %w", ctx.Err())
		}
		return ErrBusy
	}
	return nil
}

// tokenReviewer authenticates tokens with TokenReviews, caching outcomes by
// the token's hash for a short time: a user no longer than the token's own
// expiry, a refusal for the TTL; a review that could not be made is not
// cached.
type tokenReviewer struct {
	client    kubernetes.Interface
	audiences []string
	turns     *reviewTurns
	cache     *tokenreview.Cache[reviewOutcome]
}

// reviewOutcome is a cached TokenReview: a user, or why the token is invalid.
type reviewOutcome struct {
	user    *authenticationv1.UserInfo
	invalid error
}

// Authenticate implements Authenticator.
func (a *tokenReviewer) Authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	if o, ok := a.cache.Get(token); ok {
		return o.user, o.invalid
	}
	if err := a.turns.acquire(ctx); err != nil {
		return nil, err
	}
	defer a.turns.release()
	// Another request with the same token may have been reviewed meanwhile.
	if o, ok := a.cache.Get(token); ok {
		return o.user, o.invalid
	}
	user, err := tokenreview.Review(ctx, a.client, token, a.audiences)
	switch {
	case errors.Is(err, ErrInvalidToken):
		a.cache.Put(token, reviewOutcome{invalid: err}, time.Time{})
		return nil, err
	case err != nil:
		return nil, err
	}
	a.cache.Put(token, reviewOutcome{user: user}, tokenreview.Expires(token))
	return user, nil
}

// accessReviewer authorizes with SubjectAccessReviews, never cached.
type accessReviewer struct {
	client kubernetes.Interface
	turns  *reviewTurns
}

// Authorize implements Authorizer.
func (a *accessReviewer) Authorize(ctx context.Context, user *authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (Decision, error) {
	if err := a.turns.acquire(ctx); err != nil {
		return Decision{}, err
	}
	defer a.turns.release()
	var extra map[string]authorizationv1.ExtraValue
	if len(user.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	review, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: &attrs,
			User:               user.Username,
			Groups:             user.Groups,
			UID:                user.UID,
			Extra:              extra,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return Decision{}, fmt.Errorf("creating subject access review: %w", err)
	}
	st := review.Status
	if st.EvaluationError != "" {
		// Told to the operator, not to the caller.
		klog.FromContext(ctx).V(2).Info("SubjectAccessReview had evaluation errors", "user", user.Username, "allowed", st.Allowed, "evaluationError", st.EvaluationError)
	}
	return Decision{Allowed: st.Allowed && !st.Denied, Reason: st.Reason}, nil
}
