package replicasapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/internal/boundedmap"
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
	// authenticate.
	ErrInvalidToken = errors.New("the token is not valid")
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
// the token's hash for a short time.
type tokenReviewer struct {
	client     kubernetes.Interface
	audiences  []string
	ttl        time.Duration
	maxEntries int
	turns      *reviewTurns
	now        func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]reviewOutcome
}

// reviewOutcome is a cached TokenReview: a user, or why the token is invalid.
type reviewOutcome struct {
	user    *authenticationv1.UserInfo
	invalid error
	until   time.Time
}

// Authenticate implements Authenticator.
func (a *tokenReviewer) Authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	if o, ok := a.cached(key); ok {
		return o.user, o.invalid
	}
	if err := a.turns.acquire(ctx); err != nil {
		return nil, err
	}
	defer a.turns.release()
	// Another request with the same token may have been reviewed meanwhile.
	if o, ok := a.cached(key); ok {
		return o.user, o.invalid
	}
	review, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating token review: %w", err)
	}
	o := a.outcome(review.Status)
	a.store(key, o)
	return o.user, o.invalid
}

// outcome reads a TokenReview's status.
func (a *tokenReviewer) outcome(st authenticationv1.TokenReviewStatus) reviewOutcome {
	if !st.Authenticated {
		if st.Error != "" {
			return reviewOutcome{invalid: fmt.Errorf("%w: %s", ErrInvalidToken, st.Error)}
		}
		return reviewOutcome{invalid: ErrInvalidToken}
	}
	// An audience-aware review says which of the audiences asked for it
	// checked; an empty list means the API server's own audience.
	if len(a.audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(aud string) bool { return slices.Contains(a.audiences, aud) }) {
		return reviewOutcome{invalid: fmt.Errorf("%w: it was not validated for the audiences %s", ErrInvalidToken, strings.Join(a.audiences, ", "))}
	}
	user := st.User
	return reviewOutcome{user: &user}
}

func (a *tokenReviewer) cached(key [sha256.Size]byte) (reviewOutcome, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.cache[key]
	if !ok || !a.now().Before(o.until) {
		return reviewOutcome{}, false
	}
	return o, true
}

// store caches o for the TTL. A full cache first drops what went stale,
// then, if need be, arbitrary entries: a dropped entry costs one more review,
// never a wrong answer.
func (a *tokenReviewer) store(key [sha256.Size]byte, o reviewOutcome) {
	if a.ttl <= 0 {
		return
	}
	now := a.now()
	o.until = now.Add(a.ttl)
	a.mu.Lock()
	defer a.mu.Unlock()
	boundedmap.MakeRoom(a.cache, a.maxEntries, func(v reviewOutcome) bool { return !now.Before(v.until) })
	a.cache[key] = o
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
