package tokenreview

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	gojwt "github.com/go-jose/go-jose/v4/jwt"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// Ref is a bound object in a ServiceAccount token's kubernetes.io claim.
type Ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// BoundClaims are the kubernetes.io claim of a ServiceAccount token, as the
// API server writes them.
type BoundClaims struct {
	Kubernetes struct {
		Namespace      string             `json:"namespace"`
		ServiceAccount Ref                `json:"serviceaccount"`
		Pod            *Ref               `json:"pod"`
		Node           *Ref               `json:"node"`
		Secret         *Ref               `json:"secret"`
		WarnAfter      *gojwt.NumericDate `json:"warnafter"`
		// Tokens bound to webhook configurations carry more.
		Validating *Ref `json:"validatingwebhookconfiguration"`
		Mutating   *Ref `json:"mutatingwebhookconfiguration"`
	} `json:"kubernetes.io"`
}

// APIServerLeeway is how far the API server lets a token's times be off
// (go-jose's jwt.DefaultLeeway, which it uses).
const APIServerLeeway = gojwt.DefaultLeeway

// LegacyIssuer is the issuer of the ServiceAccount tokens kept in Secrets.
const LegacyIssuer = "kubernetes/serviceaccount"

// signingAlgorithms are those of the keys the API server signs
// ServiceAccount tokens with (RSA and ECDSA).
var signingAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// ErrUnverifiable is Verify's error when the keys cannot be used (not read,
// or not lately): a review decides.
var ErrUnverifiable = errors.New("the token cannot be verified here: the issuer's keys are not held")

// VerifyOptions are what Verify checks beyond the signature.
type VerifyOptions struct {
	// Audiences, when set: the token must name one of them.
	Audiences []string
	// AnyServiceAccountToken lets through every token the API server's
	// keys signed that its ServiceAccount authenticator may take, for a
	// server that reviews every token verified: any issuer (a Secret's
	// token says LegacyIssuer, a second --service-account-issuer another),
	// no expiry, and, with Audiences, no audience (such a token is taken
	// for the API server's own audiences: the review decides).
	AnyServiceAccountToken bool
}

// Verified is a token whose signature the issuer's keys verified: its
// claims are the API server's.
type Verified struct {
	gojwt.Claims
	BoundClaims
	signature *Signature
}

// Signature is what verified a token: the key, by its ID, under the issuer
// of the keys then, and the token's times. It is enough to verify the same
// token again later (IssuerKeys.Reverify) without checking its signature
// again, in about a hundred bytes.
type Signature struct {
	keyID, issuer string
	key           crypto.PublicKey
	times         gojwt.Claims // NotBefore, Expiry and IssuedAt alone
}

// Signature is what verified v.
func (v *Verified) Signature() *Signature { return v.signature }

// Times are the token's NotBefore, Expiry and IssuedAt.
func (s *Signature) Times() gojwt.Claims { return s.times }

// invalid is the error of a token Verify refuses, saying why; it wraps
// ErrInvalidToken, and ErrWrongAudience when that is why.
type invalid struct {
	why           string
	wrongAudience bool
}

func (e *invalid) Error() string { return ErrInvalidToken.Error() + ": " + e.why }

func (e *invalid) Unwrap() []error {
	if e.wrongAudience {
		return []error{ErrInvalidToken, ErrWrongAudience}
	}
	return []error{ErrInvalidToken}
}

// Why is what err, an error of Verify, says of the token, without the
// "the token is not valid" before it.
func Why(err error) string {
	if e, ok := errors.AsType[*invalid](err); ok {
		return e.why
	}
	return err.Error()
}

// Verify checks token against k, the API server's keys, without asking the
// API server: its signature (the key of its key ID, read again paced when
// not held, and that key's algorithm), its issuer (the keys'), its audience
// (opts.Audiences), its times (with the API server's leeway) and that it
// has an expiry; opts.AnyServiceAccountToken relaxes some. It returns the
// token's claims, ErrUnverifiable when k is nil or its keys cannot be used,
// or an error wrapping ErrInvalidToken (and ErrWrongAudience) saying why the
// token is not one the API server's ServiceAccount authenticator takes:
// such junk never needs a TokenReview.
func (k *IssuerKeys) Verify(ctx context.Context, token string, opts VerifyOptions, now time.Time) (*Verified, error) {
	if k == nil || !k.Usable(ctx) {
		return nil, ErrUnverifiable
	}
	parsed, err := gojwt.ParseSigned(token, signingAlgorithms)
	if err != nil || len(parsed.Headers) != 1 {
		return nil, &invalid{why: "not signed as the API server signs ServiceAccount tokens"}
	}
	header := parsed.Headers[0]
	issuer, key, found := k.lookup(ctx, header.KeyID)
	switch found {
	case keysUnusable:
		return nil, ErrUnverifiable
	case keyUnknown:
		return nil, &invalid{why: "signed with a key the API server does not publish"}
	}
	if key.Algorithm != "" && key.Algorithm != header.Algorithm {
		return nil, &invalid{why: "signed with another algorithm than its key's"}
	}
	var v Verified
	if err := parsed.Claims(key.Key, &v.Claims, &v.BoundClaims); err != nil {
		return nil, &invalid{why: "its signature does not verify"}
	}
	if v.Issuer != issuer && !opts.AnyServiceAccountToken {
		return nil, &invalid{why: fmt.Sprintf("issued by %q, not by the API server (%q)", clip(v.Issuer), issuer)}
	}
	if len(opts.Audiences) > 0 && !slices.ContainsFunc(opts.Audiences, v.Audience.Contains) &&
		(len(v.Audience) > 0 || !opts.AnyServiceAccountToken) {
		return nil, &invalid{wrongAudience: true, why: fmt.Sprintf("its audience %q is not one of %q",
			clip(strings.Join(v.Audience, ",")), strings.Join(opts.Audiences, ","))}
	}
	if v.Expiry == nil && !opts.AnyServiceAccountToken {
		return nil, &invalid{why: "it has no expiry"}
	}
	if err := validTimes(v.Claims, now); err != nil {
		return nil, err
	}
	v.signature = &Signature{keyID: header.KeyID, issuer: issuer, key: key.Key,
		times: gojwt.Claims{NotBefore: v.NotBefore, Expiry: v.Expiry, IssuedAt: v.IssuedAt}}
	return &v, nil
}

// validTimes checks a token's times at now, with the API server's leeway.
func validTimes(c gojwt.Claims, now time.Time) error {
	if c.ValidateWithLeeway(gojwt.Expected{Time: now}, APIServerLeeway) != nil {
		return &invalid{why: "expired, or not valid yet"}
	}
	return nil
}

// Reverify says whether the token sig verified still verifies at now,
// without checking its signature again: its claims are the token's own,
// and the checks on them that do not depend on time hold as they did. It
// returns
//   - true, nil when the key that verified it is still held (read again
//     within KeysMaxAge) under its key ID, the same key, and the issuer is
//     the same, and the token's times hold with the API server's leeway;
//   - true and an error wrapping ErrInvalidToken when the key holds and
//     the times do not;
//   - false, ErrUnverifiable when the keys cannot be used;
//   - false, nil when the key or the issuer changed: Verify decides.
//
// A signature check costs tens of microseconds (a 2048-bit RSA key's);
// 10,000 connections checked again every 30s spent a sixth of an idle
// edge hub's CPU on it.
func (k *IssuerKeys) Reverify(ctx context.Context, sig *Signature, now time.Time) (bool, error) {
	if k == nil || !k.Usable(ctx) {
		return false, ErrUnverifiable
	}
	k.mu.Lock()
	key, ok := k.keys[sig.keyID]
	same := ok && k.heldLocked() && k.issuer == sig.issuer && sameKey(key.Key, sig.key)
	k.mu.Unlock()
	if !same {
		return false, nil
	}
	return true, validTimes(sig.times, now)
}

// sameKey says whether public keys a and b are the same key.
func sameKey(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// clip bounds what a refusal repeats of a token's own words.
func clip(s string) string { return edgeproto.Clip(s, 256, "…") }
