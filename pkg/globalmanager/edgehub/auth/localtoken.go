package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/nereid-ml/nereid/internal/cached"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// The issuer's keys and what verifies a token against them are
// tokenreview's, which the DIJob replicas APIs use too; what makes a
// verified token a LocalController's is the hub's, here.
type (
	boundClaims = tokenreview.BoundClaims
	ref         = tokenreview.Ref
)

// VerifyLocally authenticates token as the API server's TokenReview would,
// without asking it, once the hub holds the issuer's keys (until then, or
// when it cannot read them, it returns nil, nil: the token is reviewed). It
// returns:
//
//   - the identity, when everything checks: the signature against the
//     issuer's keys, the issuer, the hub's audience, the times (without the
//     API server's leeway), and, as the API server does for a token bound to
//     a Pod, that its ServiceAccount and its Pod still exist with the UIDs it
//     names and are not being deleted, here from the hub's caches;
//   - a refusal, when the token cannot be one the API server issued to a
//     LocalController Pod for the hub's audience, or was but is not valid
//     beyond doubt: not signed as the API server signs, signed with a key ID
//     it does not publish (after the keys are read again, paced) or by
//     another key, another issuer or audience, times wrong past the API
//     server's leeway, no Pod and node bound, a subject that is not its
//     ServiceAccount, a ServiceAccount not accepted. Such junk never reaches
//     a TokenReview: anyone who reaches the hub can send it;
//   - nil, nil whenever its answer could differ from the API server's: a
//     token near its times, a ServiceAccount or Pod its caches do not hold as
//     the token names them (the caches may lag). Only tokens the API server
//     signed get there, and a review decides.
func (a *Authenticator) VerifyLocally(ctx context.Context, token string) (*Identity, *Refusal) {
	v, err := a.keys.Verify(ctx, token, tokenreview.VerifyOptions{Audiences: []string{a.audience}}, a.clock.Now())
	switch {
	case errors.Is(err, tokenreview.ErrUnverifiable):
		return nil, nil
	case errors.Is(err, tokenreview.ErrWrongAudience):
		return nil, &Refusal{Status: http.StatusUnauthorized, Metric: RefusedWrongAudience,
			Reason: fmt.Sprintf("the token is not for the edge hub: the hub takes only tokens with audience %q (a projected ServiceAccount token)", a.audience)}
	case err != nil:
		return nil, invalidToken(tokenreview.Why(err))
	}
	now := a.clock.Now()
	public := v.Claims
	k := v.Kubernetes
	subject := serviceAccountPrefix + k.Namespace + ":" + k.ServiceAccount.Name
	if k.Pod == nil || k.Node == nil || k.Secret != nil || k.Validating != nil || k.Mutating != nil ||
		k.Node.Name == "" || k.Pod.Name == "" || k.Pod.UID == "" {
		return nil, notBoundToPod(public.Subject)
	}
	if k.Namespace == "" || k.ServiceAccount.Name == "" || public.Subject != subject {
		return nil, invalidToken("its subject is not its ServiceAccount")
	}
	sa := k.Namespace + "/" + k.ServiceAccount.Name
	if !a.serviceAccounts[sa] {
		return nil, a.notLocalController(subject)
	}
	id := &Identity{
		Node: k.Node.Name, ServiceAccount: sa,
		Pod:               types.NamespacedName{Namespace: k.Namespace, Name: k.Pod.Name},
		PodUID:            types.UID(k.Pod.UID),
		ServiceAccountUID: types.UID(k.ServiceAccount.UID),
		ByHub:             true,
		signature:         v.Signature(),
	}
	// The earlier of exp and warnafter, as verified.
	id.Expires = public.Expiry.Time()
	if w := k.WarnAfter; w != nil && w.Time().Before(id.Expires) {
		id.Expires = w.Time()
	}
	if !a.boundStill(id, public, now) {
		return nil, nil
	}
	return id, nil
}

// VerifyLocallyAgain is VerifyLocally of token, which id was admitted with,
// later. When the hub verified it itself, its signature is not checked
// again as long as the key that verified it is the issuer's
// (tokenreview.IssuerKeys.Reverify): the claims are the token's own, and id
// says what they bound. The times and the bound ServiceAccount and Pod are
// checked as VerifyLocally checks them.
func (a *Authenticator) VerifyLocallyAgain(ctx context.Context, token string, id *Identity) (*Identity, *Refusal) {
	if id.signature == nil {
		return a.VerifyLocally(ctx, token)
	}
	now := a.clock.Now()
	decided, err := a.keys.Reverify(ctx, id.signature, now)
	switch {
	case !decided && err == nil:
		return a.VerifyLocally(ctx, token)
	case errors.Is(err, tokenreview.ErrUnverifiable):
		return nil, nil
	case err != nil:
		return nil, invalidToken(tokenreview.Why(err))
	}
	if !a.boundStill(id, id.signature.Times(), now) {
		return nil, nil
	}
	again := *id
	return &again, nil
}

// boundStill says whether the hub can vouch for id's token at now, from its
// caches: its times hold without leeway (a token near its times, or a
// clock apart from the API server's, is reviewed), and, stricter than the
// API server, its ServiceAccount and Pod exist with the UIDs it names and
// are not being deleted (else it is reviewed).
func (a *Authenticator) boundStill(id *Identity, times jwt.Claims, now time.Time) bool {
	if times.ValidateWithLeeway(jwt.Expected{Time: now}, 0) != nil {
		return false
	}
	account, ok := get[*corev1.ServiceAccount](a.accountCache, id.ServiceAccount)
	if !ok || account.UID != id.ServiceAccountUID || account.DeletionTimestamp != nil {
		return false
	}
	pod, ok := get[*corev1.Pod](a.podCache, id.Pod.String())
	return ok && pod.UID == id.PodUID && pod.DeletionTimestamp == nil
}

// stores are caches of one kind, split by what each watches: an object is
// in one of them.
type stores []cache.Store

// get is the object of key in any of s, if it is of type T.
func get[T any](s stores, key string) (T, bool) {
	for _, store := range s {
		if t, ok := cached.Get[T](store, key); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}
