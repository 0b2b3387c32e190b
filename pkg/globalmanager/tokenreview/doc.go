// Package tokenreview asks the API server who holds a bearer token, and
// keeps the answers briefly, for every server of the GlobalManager that
// takes ServiceAccount tokens from callers: the edge hub (LocalControllers)
// and the DIJob replicas API (DI-engine's workers).
//
// Review makes one TokenReview naming the audiences the server takes and
// says why a token is refused: not valid (ErrInvalidToken), or valid but
// not for those audiences (ErrWrongAudience too).
//
// Cache keeps outcomes by the SHA-256 of the token, never the token
// itself, for a TTL, and an accepted token no longer than its own expiry
// (Claims.Expires): a token revoked by the API server is let in for at most
// the TTL, an expired one not at all. It holds a bounded number of entries:
// when full it drops the stale ones first, then arbitrary ones, so a flood
// of made-up tokens costs the cache its hits, never its bound, and a dropped
// entry costs one more review, never a wrong answer. What is cached, and
// for which outcomes, is the caller's: each server caches its own idea of
// who a token is (the hub an edge node's identity, the replicas API a
// user), and neither caches a review that failed to be made.
//
// Claims reads what a token says of itself, unverified: enough to refuse
// junk without a review, and to know when an accepted token expires.
//
// IssuerKeys are the API server's ServiceAccount token issuer and keys
// (its discovery document and /openid/v1/jwks, read again paced), and
// IssuerKeys.Verify checks a token against them as the API server's
// ServiceAccount authenticator would (signature, issuer, audience, times):
// what it refuses never needs a TokenReview. What makes a verified token
// acceptable is each server's: the edge hub accepts a LocalController's
// without a review when its caches hold its Pod and ServiceAccount; the
// replicas APIs review every token verified (AnyServiceAccountToken).
//
// AddressLimiter counts by client address the requests refused for their
// token; an address past its share is blocked for a minute, during which
// a server still reads its tokens but lets on only those the keys verify.
package tokenreview
