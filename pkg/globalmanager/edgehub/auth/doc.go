// Package auth decides who may connect to the edge hub, and for how long:
// LocalControllers, and nothing else.
//
// # What it guarantees
//
// Authenticate admits a request only with a bearer token that is a
// projected ServiceAccount token with the hub's audience (Config.Audience),
// of one of Config.ServiceAccounts, bound to a Pod on a node that
// Config.NodeSelector picks, whose controller is the LocalControllers'
// DaemonSet, Config.DaemonSet, with the UID it has now (daemonset.go: a bare
// Pod of the ServiceAccount, or one of another controller, is refused with
// 403). The Identity it returns names the node the token's Pod runs on
// (NodeNameExtra), never one the caller names. Every refusal is a Refusal:
// an HTTP status, a reason for the caller and a reason label (Refused…).
//
// Junk costs the sender, not the API server: what a token says of itself
// refuses a token no review would accept (not a JWT, too long, another
// audience, expired); while the Authenticator holds the issuer's keys
// (/openid/v1/jwks, read again paced when a token names a key it does not
// know) it verifies a token itself as the review would (localtoken.go) and
// refuses every token they do not verify. Outcomes are cached briefly by
// the token's hash (tokenreview.Cache) and TokenReviews run
// Config.MaxConcurrentReviews at a time; past a bounded queue a connection
// is told when to come back (Retry-After), turns spread over the time the
// reviews take. A token the hub verified itself is reviewed after the
// connection starts, 20 a second across nodes (Confirmer): a review that
// disagrees ends the connection, and that Pod's tokens are reviewed first
// for ten minutes. The issuer's keys, the signature and claims checks
// (tokenreview.IssuerKeys.Verify) and the count of refusals by address
// (tokenreview.AddressLimiter) are pkg/globalmanager/tokenreview's, shared
// with the DIJob replicas APIs. Authenticate, given the refusal of an
// address blocked for its refusals, still reads its token: one the hub
// verifies itself goes on, any other gets that refusal without a review.
// Refusals are logged at a bounded rate (RefusalLog).
//
// Revocation: the watches Watch makes (watch.go) tell the hub, through
// Hooks, as soon as their event comes, when a LocalController's Pod is
// deleted or released by the DaemonSet, its ServiceAccount or the DaemonSet
// is deleted or made again, or its node is deleted or no longer an edge
// node; the Authenticator has dropped what it cached of them by then.
// ServiceAccountGone, DaemonSetGone and GoneFromCaches say whether what
// admitted an Identity went, and why; the hub ends the connections.
package auth
