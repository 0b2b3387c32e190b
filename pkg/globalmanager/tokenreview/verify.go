package tokenreview

import (
	"context"
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
}

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
	if v.ValidateWithLeeway(gojwt.Expected{Time: now}, APIServerLeeway) != nil {
		return nil, &invalid{why: "expired, or not valid yet"}
	}
	return &v, nil
}

// clip bounds what a refusal repeats of a token's own words.
func clip(s string) string { return edgeproto.Clip(s, 256, "…") }
