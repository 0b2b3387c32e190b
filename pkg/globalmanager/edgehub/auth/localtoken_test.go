package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

const (
	testIssuer = "https://kubernetes.default.svc.cluster.local"
)

// tokenIssuer signs ServiceAccount tokens as the API server does, and
// serves its discovery document and key set.
type tokenIssuer struct {
	mu   sync.Mutex
	keys map[string]any // by key ID: the private keys
	// alg is what the key set says of a key's algorithm, by key ID, when
	// not the one the API server says (RS256 for RSA, ES256 for P-256).
	alg map[string]string
	// extra are served in the key set beside the keys.
	extra   []any
	fetches atomic.Int64
}

func newTokenIssuer(t *testing.T) *tokenIssuer {
	t.Helper()
	return &tokenIssuer{keys: map[string]any{"k1": newECKey(t)}, alg: map[string]string{}}
}

func newECKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (ti *tokenIssuer) addKey(kid string, key any) {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.keys[kid] = key
}

func (ti *tokenIssuer) fetch(_ context.Context, path string) ([]byte, error) {
	ti.fetches.Add(1)
	switch path {
	case tokenreview.OpenIDConfigPath:
		return json.Marshal(map[string]string{"issuer": testIssuer, "jwks_uri": testIssuer + tokenreview.JWKSPath})
	case tokenreview.JWKSPath:
		ti.mu.Lock()
		defer ti.mu.Unlock()
		keys := append([]any(nil), ti.extra...)
		for kid, k := range ti.keys {
			alg := string(jose.ES256)
			if _, ok := k.(*rsa.PrivateKey); ok {
				alg = string(jose.RS256)
			}
			if a, ok := ti.alg[kid]; ok {
				alg = a
			}
			private := jose.JSONWebKey{Key: k, KeyID: kid, Use: "sig", Algorithm: alg}
			keys = append(keys, private.Public())
		}
		return json.Marshal(map[string]any{"keys": keys})
	}
	return nil, fmt.Errorf("no %s", path)
}

// lcClaims are the claims of edge-0's LocalController token, valid now.
func lcClaims(now time.Time) (jwt.Claims, boundClaims) {
	public := jwt.Claims{
		Issuer: testIssuer, Subject: serviceAccountPrefix + edgehubtest.Namespace + ":nereid-localcontroller",
		Audience: jwt.Audience{edgehubtest.Audience},
		IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)),
	}
	var private boundClaims
	k := &private.Kubernetes
	k.Namespace = edgehubtest.Namespace
	k.ServiceAccount = ref{Name: "nereid-localcontroller", UID: edgehubtest.AccountUID}
	k.Pod = &ref{Name: "lc-edge-0", UID: "uid-edge-0"}
	k.Node = &ref{Name: "edge-0", UID: "node-uid"}
	return public, private
}

// sign signs the claims with key kid of ti, as alg.
func (ti *tokenIssuer) sign(t *testing.T, kid string, alg jose.SignatureAlgorithm, public jwt.Claims, private boundClaims) string {
	t.Helper()
	ti.mu.Lock()
	key := ti.keys[kid]
	ti.mu.Unlock()
	return signWith(t, key, kid, alg, public, private)
}

func signWith(t *testing.T, key any, kid string, alg jose.SignatureAlgorithm, public jwt.Claims, private boundClaims) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(public).Claims(private).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// localAuth is an Authenticator that verifies ti's tokens itself, with
// edge-0's LocalController Pod and ServiceAccount cached, edge-0 an edge
// node and cloud-0 not; its TokenReviews are counted and refuse every token.
type localAuth struct {
	*Authenticator
	reviews  atomic.Int64
	pods     cache.Store
	accounts cache.Store
	clock    *testingclock.FakeClock
}

func newLocalAuth(t *testing.T, ti *tokenIssuer) *localAuth {
	t.Helper()
	la := &localAuth{clock: testingclock.NewFakeClock(time.Now())}
	kube := kubefake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
		la.reviews.Add(1)
		return edgehubtest.ReviewTokens(action)
	})
	kube.PrependReactor("get", "nodes", edgehubtest.GetNodes)
	la.Authenticator = New(testConfig(t, kube, la.clock))
	la.keys = tokenreview.NewIssuerKeysFrom(ti.fetch, la.clock)
	if err := la.keys.ReadNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	la.pods = cache.NewStore(cache.MetaNamespaceKeyFunc)
	la.accounts = cache.NewStore(cache.MetaNamespaceKeyFunc)
	la.daemonSets = cache.NewStore(cache.MetaNamespaceKeyFunc)
	nodes := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, o := range []struct {
		store cache.Store
		obj   any
	}{
		{la.pods, edgehubtest.LCPod("edge-0")},
		{la.pods, edgehubtest.LCPod("cloud-0")},
		{la.accounts, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: edgehubtest.Namespace, Name: "nereid-localcontroller", UID: edgehubtest.AccountUID}}},
		{la.daemonSets, edgehubtest.LCDaemonSet(edgehubtest.DaemonSetUID)},
		{nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-0", Labels: map[string]string{"node-role.kubernetes.io/edge": ""}}}},
	} {
		if err := o.store.Add(o.obj); err != nil {
			t.Fatal(err)
		}
	}
	la.podCache, la.accountCache, la.nodes = stores{la.pods}, stores{la.accounts}, nodes
	return la
}

func (la *localAuth) connect(t *testing.T, token string) (*Identity, *Refusal) {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://hub/connect", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	return la.Authenticate(t.Context(), r, nil)
}

// verdict is what became of a token: accepted by the hub ("hub"), or
// refused with metric, after a review or not.
type verdict struct {
	By     string
	Status int
	Metric string
	Review bool
}

var (
	hub      = verdict{By: "hub"}
	junk     = verdict{Status: http.StatusUnauthorized, Metric: RefusedInvalidToken}
	reviewed = verdict{Status: http.StatusUnauthorized, Metric: RefusedInvalidToken, Review: true} // the test's reviews refuse all
)

// signers are the keys tokens are signed with: the issuer's, with an RSA
// key of two algorithms and a key for encryption in its key set, and a
// stranger's; and the time the tokens are issued.
type signers struct {
	ti               *tokenIssuer
	rsaKey           *rsa.PrivateKey
	stranger, encKey *ecdsa.PrivateKey
	now              time.Time
}

func newSigners(t *testing.T) signers {
	ti := newTokenIssuer(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ti.addKey("rsa", rsaKey)
	ti.addKey("rs384", rsaKey)
	ti.alg["rs384"] = string(jose.RS384)
	stranger, encKey := newECKey(t), newECKey(t)
	encJWK := jose.JSONWebKey{Key: encKey, KeyID: "enc", Use: "enc", Algorithm: string(jose.ES256)}
	ti.extra = append(ti.extra, encJWK.Public(), map[string]string{"kty": "nonsense", "kid": "bad"})
	return signers{ti: ti, rsaKey: rsaKey, stranger: stranger, encKey: encKey, now: time.Now()}
}

// localTokenCase is a token and what becomes of it.
type localTokenCase struct {
	token   func(t *testing.T, la *localAuth) string
	want    verdict
	expires time.Time // when accepted: when it expires, if not at exp
}

func localTokenCases(k signers) map[string]localTokenCase {
	cases := hubDecidesCases(k)
	maps.Copy(cases, reviewDecidesCases(k))
	return cases
}

// hubDecidesCases: tokens the hub accepts, or refuses as junk or for their
// claims, without a review.
func hubDecidesCases(k signers) map[string]localTokenCase {
	ti, rsaKey, stranger, encKey, now := k.ti, k.rsaKey, k.stranger, k.encKey, k.now
	return map[string]localTokenCase{
		"a valid ES256 token": {want: hub, token: keyed(ti.keys["k1"], "k1", jose.ES256, now)},
		"a valid RS256 token": {want: hub, token: keyed(rsaKey, "rsa", jose.RS256, now)},
		"a rotated token: it expires at warnafter": {want: hub, expires: now.Add(10 * time.Minute),
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) {
				b.Kubernetes.WarnAfter = jwt.NewNumericDate(now.Add(10 * time.Minute))
			})},

		// Junk: refused here, never reviewed.
		"signed by another key under a known key ID":    {want: junk, token: keyed(stranger, "k1", jose.ES256, now)},
		"signed by another key under an unknown key ID": {want: junk, token: keyed(stranger, "made-up", jose.ES256, now)},
		"random bytes for a signature": {want: junk, token: func(t *testing.T, la *localAuth) string {
			parts := strings.Split(keyed(ti.keys["k1"], "k1", jose.ES256, now)(t, la), ".")
			return parts[0] + "." + parts[1] + ".c2lnbmF0dXJlIG9mIG5vdGhpbmc"
		}},
		"no key ID": {want: junk, token: keyed(ti.keys["k1"], "", jose.ES256, now)},
		"a key the key set gives another algorithm": {want: junk, token: keyed(rsaKey, "rs384", jose.RS256, now)},
		"a key the key set has for encryption":      {want: junk, token: keyed(encKey, "enc", jose.ES256, now)},
		"an HMAC signature (keyed with the public key's bytes)": {want: junk,
			token: func(t *testing.T, _ *localAuth) string {
				p, b := lcClaims(now)
				pub, err := json.Marshal(jose.JSONWebKey{Key: &rsaKey.PublicKey, KeyID: "rsa"})
				if err != nil {
					t.Fatal(err)
				}
				return signWith(t, pub, "rsa", jose.HS256, p, b)
			}},
		"another issuer": {want: junk,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.Issuer = "https://elsewhere" })},
		"no audience": {want: verdict{Status: http.StatusUnauthorized, Metric: RefusedWrongAudience},
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.Audience = nil })},
		"not valid for another 10 minutes": {want: junk,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.NotBefore = jwt.NewNumericDate(now.Add(10 * time.Minute)) })},
		"no expiry": {want: junk, token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.Expiry = nil })},
		"another subject": {want: junk,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) {
				p.Subject = serviceAccountPrefix + edgehubtest.Namespace + ":other"
			})},
		"a ServiceAccount not accepted": {want: verdict{Status: http.StatusForbidden, Metric: RefusedNotLocalController},
			token: withClaims(ti, now, func(p *jwt.Claims, b *boundClaims) {
				p.Subject = serviceAccountPrefix + "default:default"
				b.Kubernetes.Namespace, b.Kubernetes.ServiceAccount.Name = "default", "default"
			})},
		"bound to no node": {want: verdict{Status: http.StatusForbidden, Metric: RefusedNoNode},
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Node = nil })},
		"bound to no Pod": {want: verdict{Status: http.StatusForbidden, Metric: RefusedNoNode},
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Pod = nil })},
		"bound to a Secret": {want: verdict{Status: http.StatusForbidden, Metric: RefusedNoNode},
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Secret = &ref{Name: "s", UID: "s"} })},
		"bound to a webhook configuration": {want: verdict{Status: http.StatusForbidden, Metric: RefusedNoNode},
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Validating = &ref{Name: "w", UID: "w"} })},
	}
}

// reviewDecidesCases: what the hub cannot say goes to a review; and tokens
// verified, then refused for what is not in them.
func reviewDecidesCases(k signers) map[string]localTokenCase {
	ti, now := k.ti, k.now
	return map[string]localTokenCase{
		// What the hub cannot say: reviewed.
		"keys not read again for too long": {want: reviewed,
			token: func(t *testing.T, la *localAuth) string {
				// Read once, then never again.
				var unreachable atomic.Bool
				la.keys = tokenreview.NewIssuerKeysFrom(func(ctx context.Context, path string) ([]byte, error) {
					if unreachable.Load() {
						return nil, errors.New("the API server is unreachable")
					}
					return ti.fetch(ctx, path)
				}, la.clock)
				if err := la.keys.ReadNow(t.Context()); err != nil {
					t.Fatal(err)
				}
				unreachable.Store(true)
				la.clock.Step(tokenreview.KeysMaxAge)
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
		"issued in the future (within the API server's leeway)": {want: reviewed,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.IssuedAt = jwt.NewNumericDate(now.Add(30 * time.Second)) })},
		"not valid for another 30s (within the API server's leeway)": {want: reviewed,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) {
				p.IssuedAt, p.NotBefore = nil, jwt.NewNumericDate(now.Add(30*time.Second))
			})},
		"its ServiceAccount being deleted": {want: reviewed,
			token: func(t *testing.T, la *localAuth) string {
				gone := metav1.NewTime(now)
				if err := la.accounts.Update(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: edgehubtest.Namespace, Name: "nereid-localcontroller", UID: edgehubtest.AccountUID, DeletionTimestamp: &gone}}); err != nil {
					t.Fatal(err)
				}
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
		"its ServiceAccount made again (another UID)": {want: reviewed,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.ServiceAccount.UID = "old-sa-uid" })},
		"its ServiceAccount not cached yet": {want: reviewed,
			token: func(t *testing.T, la *localAuth) string {
				if err := la.accounts.Replace(nil, ""); err != nil {
					t.Fatal(err)
				}
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
		"its Pod made again (another UID)": {want: reviewed,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Pod.UID = "old-uid" })},
		"a Pod not cached": {want: reviewed,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Pod = &ref{Name: "lc-edge-9", UID: "uid-edge-9"} })},
		"its Pod being deleted": {want: reviewed,
			token: func(t *testing.T, la *localAuth) string {
				gone := metav1.NewTime(now)
				p := edgehubtest.LCPod("edge-0")
				p.DeletionTimestamp = &gone
				if err := la.pods.Update(p); err != nil {
					t.Fatal(err)
				}
				pc, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, pc, b)
			}},

		// Verified, then refused for what is not in the token.
		"a Pod on a node that is not an edge node": {want: verdict{Status: http.StatusForbidden, Metric: RefusedNotEdgeNode},
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) {
				b.Kubernetes.Pod, b.Kubernetes.Node = &ref{Name: "lc-cloud-0", UID: "uid-cloud-0"}, &ref{Name: "cloud-0"}
			})},
		"its Pod deleted lately": {want: junk,
			token: func(t *testing.T, la *localAuth) string {
				la.ForgetPod("uid-edge-0")
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
	}
}

// The hub accepts a token it can verify as a TokenReview would, without
// one; it refuses junk, any token the API server did not sign for the hub's
// audience to a LocalController Pod, without one; only what it cannot say
// (a token near its times, a ServiceAccount or Pod its caches do not hold as
// the token names them, keys it cannot use) goes to a review, which decides.
func TestTheHubVerifiesATokenItselfOnlyWhenEverythingChecks(t *testing.T) {
	k := newSigners(t)
	ti, now := k.ti, k.now
	cases := localTokenCases(k)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			la := newLocalAuth(t, ti)
			la.clock.SetTime(now)
			id, refusal := la.connect(t, tc.token(t, la))
			got := verdict{Review: la.reviews.Load() > 0}
			if refusal != nil {
				got.Status, got.Metric = refusal.Status, refusal.Metric
			} else if id.ByHub {
				got.By = "hub"
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want,+got):\n%s\nrefusal: %+v", diff, refusal)
			}
			if refusal != nil {
				return
			}
			wantExpires := time.Unix(cmpOrTime(tc.expires, now.Add(time.Hour)).Unix(), 0)
			if id.Node != "edge-0" || id.Pod.Name != "lc-edge-0" || id.PodUID != "uid-edge-0" || id.ServiceAccount != edgehubtest.Namespace+"/nereid-localcontroller" ||
				id.ServiceAccountUID != edgehubtest.AccountUID || id.DaemonSet != edgehubtest.DaemonSetUID || !id.Expires.Equal(wantExpires) {
				t.Errorf("identity %+v", id)
			}
		})
	}
}

// From an address blocked for its refusals (a NAT, a node, where someone
// sends junk), a token the hub verifies itself still connects; every other
// token, junk or one only a review could decide, gets the block's 429,
// without a review.
func TestABlockedAddressStillTakesATokenTheHubVerifies(t *testing.T) {
	k := newSigners(t)
	blocked := &Refusal{Status: http.StatusTooManyRequests, Metric: RefusedTooManyRefusals, RetryAfter: 60, Reason: "blocked"}
	for name, tc := range localTokenCases(k) {
		t.Run(name, func(t *testing.T) {
			la := newLocalAuth(t, k.ti)
			la.clock.SetTime(k.now)
			r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://hub/connect", nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Authorization", "Bearer "+tc.token(t, la))
			id, refusal := la.Authenticate(t.Context(), r, blocked)
			switch {
			case la.reviews.Load() != 0:
				t.Fatalf("%d reviews for a blocked address", la.reviews.Load())
			case tc.want == hub && (refusal != nil || !id.ByHub):
				t.Fatalf("refused %+v; want the hub's own acceptance through the block", refusal)
			case tc.want != hub && refusal != blocked:
				t.Fatalf("identity %+v, refusal %+v; want the block's refusal", id, refusal)
			}
		})
	}
}

// cmpOrTime is t, or def when t is zero.
func cmpOrTime(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// With --edge-review-every-token the hub still refuses junk itself, and has
// every token it verified reviewed before it accepts it.
func TestEveryTokenReviewedStillCostsJunkNoReview(t *testing.T) {
	ti := newTokenIssuer(t)
	la := newLocalAuth(t, ti)
	la.reviewEvery = true
	if _, refusal := la.connect(t, keyed(newECKey(t), "made-up", jose.ES256, la.clock.Now())(t, la)); refusal == nil || la.reviews.Load() != 0 {
		t.Fatalf("junk: refusal %v after %d reviews; want refused without a review", refusal, la.reviews.Load())
	}
	p, b := lcClaims(la.clock.Now())
	if _, refusal := la.connect(t, ti.sign(t, "k1", jose.ES256, p, b)); refusal == nil || la.reviews.Load() != 1 {
		t.Fatalf("a valid token: refusal %v after %d reviews; want it reviewed (the test's reviews refuse it)", refusal, la.reviews.Load())
	}
}

// keyed is edge-0's LocalController token, signed with key as kid and alg.
func keyed(key any, kid string, alg jose.SignatureAlgorithm, now time.Time) func(*testing.T, *localAuth) string {
	return func(t *testing.T, _ *localAuth) string {
		p, b := lcClaims(now)
		return signWith(t, key, kid, alg, p, b)
	}
}

// withClaims is a token of edge-0's LocalController, as change makes it.
func withClaims(ti *tokenIssuer, now time.Time, change func(*jwt.Claims, *boundClaims)) func(*testing.T, *localAuth) string {
	return func(t *testing.T, _ *localAuth) string {
		p, b := lcClaims(now)
		change(&p, &b)
		return ti.sign(t, "k1", jose.ES256, p, b)
	}
}

// A token naming a key the hub does not hold has the keys read again, at
// most every tokenreview.KeysRetryPeriod, and waits for that read: a key the API server
// has just added verifies at once, and a made-up one is refused without a
// review. Between reads, a key not held is refused without reading.
func TestANewSigningKeyIsReadAgainAndMadeUpOnesCostOneRead(t *testing.T) {
	ti := newTokenIssuer(t)
	la := newLocalAuth(t, ti)
	ti.addKey("k2", newECKey(t))
	p, b := lcClaims(la.clock.Now())
	fetched := ti.fetches.Load()
	// Within tokenreview.KeysRetryPeriod of the last read, the keys are not read again:
	// k2 is not known yet, and its token is refused.
	if _, refusal := la.connect(t, ti.sign(t, "k2", jose.ES256, p, b)); refusal == nil || refusal.Metric != RefusedInvalidToken {
		t.Fatalf("refusal %+v; want the token refused as invalid", refusal)
	}
	if n := ti.fetches.Load(); n != fetched {
		t.Fatalf("the keys were read again %d times within %s", n-fetched, tokenreview.KeysRetryPeriod)
	}
	// Past it, the next such token has them read again, and is verified
	// here with the new key. ECDSA signatures differ each time: each token
	// is new to the cache of outcomes.
	la.clock.Step(tokenreview.KeysRetryPeriod)
	if _, refusal := la.connect(t, ti.sign(t, "k2", jose.ES256, p, b)); refusal != nil {
		t.Fatalf("refused after the keys were read again: %s", refusal.Reason)
	}
	if n := ti.fetches.Load(); n != fetched+2 {
		t.Errorf("%d reads of the two documents, want 2", n-fetched)
	}
	// Tokens of made-up keys, many: one more read of the keys once the
	// period is past again, and no review.
	la.clock.Step(tokenreview.KeysRetryPeriod)
	for i := range 50 {
		if _, refusal := la.connect(t, keyed(newECKey(t), fmt.Sprintf("made-up-%d", i), jose.ES256, la.clock.Now())(t, la)); refusal == nil {
			t.Fatal("a token of a made-up key was accepted")
		}
	}
	if n := ti.fetches.Load(); n != fetched+4 {
		t.Errorf("50 tokens of made-up keys read the documents %d times, want 2", n-fetched-2)
	}
	if n := la.reviews.Load(); n != 0 {
		t.Errorf("%d TokenReviews, want none", n)
	}
}

// A token the hub accepted itself is then reviewed: the review confirms it
// only when it binds the token to the same Pod, ServiceAccount and node.
func TestATokenTheHubAcceptedIsConfirmedOnlyByAReviewThatAgrees(t *testing.T) {
	ti := newTokenIssuer(t)
	la := newLocalAuth(t, ti)
	p, b := lcClaims(la.clock.Now())
	token := ti.sign(t, "k1", jose.ES256, p, b)
	id, refusal := la.connect(t, token)
	if refusal != nil || !id.ByHub || la.reviews.Load() != 0 {
		t.Fatalf("identity %+v, refusal %v, %d reviews; want the hub's own acceptance", id, refusal, la.reviews.Load())
	}
	const lcUser = "system:serviceaccount:nereid-system:nereid-localcontroller"
	userAs := func(username, node, pod, uid string) *authenticationv1.TokenReviewStatus {
		return &authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{edgehubtest.Audience},
			User: authenticationv1.UserInfo{Username: username, Extra: map[string]authenticationv1.ExtraValue{
				NodeNameExtra: {node}, PodNameExtra: {pod}, PodUIDExtra: {uid}}}}
	}
	user := func(node, pod, uid string) *authenticationv1.TokenReviewStatus { return userAs(lcUser, node, pod, uid) }
	for name, tc := range map[string]struct {
		status *authenticationv1.TokenReviewStatus // nil: the review fails
		want   string                              // the refusal's metric, "" for confirmed
	}{
		"the same Pod":       {status: user("edge-0", "lc-edge-0", "uid-edge-0")},
		"the Pod made again": {status: user("edge-0", "lc-edge-0", "uid-new"), want: RefusedInvalidToken},
		"another node":       {status: user("edge-1", "lc-edge-0", "uid-edge-0"), want: RefusedInvalidToken},
		"another ServiceAccount": {status: userAs("system:serviceaccount:nereid-system:default", "edge-0", "lc-edge-0", "uid-edge-0"),
			want: RefusedNotLocalController},
		"not valid (the Pod is gone)": {status: &authenticationv1.TokenReviewStatus{Error: "pod not found"}, want: RefusedInvalidToken},
		"the review fails":            {want: RefusedReviewError},
	} {
		t.Run(name, func(t *testing.T) {
			kube := la.client.(*kubefake.Clientset)
			kube.PrependReactor("create", "tokenreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
				if tc.status == nil {
					return true, nil, errors.New("the API server is restarting")
				}
				review := action.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
				review.Status = *tc.status
				return true, review, nil
			})
			got := la.confirm(t.Context(), id, token)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("refused (%s: %s); want confirmed", got.Metric, got.Reason)
			case tc.want != "" && got == nil:
				t.Errorf("confirmed; want refused as %s", tc.want)
			case tc.want != "" && got.Metric != tc.want:
				t.Errorf("refused as %s (%s); want %s", got.Metric, got.Reason, tc.want)
			}
		})
	}
	// After a refusal, the Pod's tokens go to a review, whatever it says.
	la.reviewFirst(id.PodUID)
	if again, _ := la.connect(t, ti.sign(t, "k1", jose.ES256, p, b)); again != nil && again.ByHub {
		t.Error("the hub accepted a token of a Pod whose token a review refused")
	}
}

// A connection's token, verified by the hub, is verified again without its
// signature while the key that verified it is the issuer's (the same token
// is not even parsed again: junk in its place still passes, which shows the
// signature is not checked); its times and its ServiceAccount and Pod are
// checked again each time, and a key changed under its key ID has the token
// verified in full.
func TestTheHubVerifiesATokenAgainWithoutItsSignatureWhileItsKeyHolds(t *testing.T) {
	k := newSigners(t)
	la := newLocalAuth(t, k.ti)
	la.clock.SetTime(k.now)
	token := keyed(k.rsaKey, "rsa", jose.RS256, k.now)(t, la)
	id, refusal := la.connect(t, token)
	if refusal != nil || !id.ByHub {
		t.Fatalf("the token was not accepted by the hub: %+v, %+v", id, refusal)
	}
	again := func(token string) (*Identity, *Refusal) {
		t.Helper()
		reviews := la.reviews.Load()
		got, refusal := la.VerifyLocallyAgain(t.Context(), token, id)
		if la.reviews.Load() != reviews {
			t.Fatalf("verifying again made a TokenReview")
		}
		return got, refusal
	}
	if got, refusal := again("not a token"); refusal != nil || got == nil || *got != *id {
		t.Errorf("verified again while the key holds: %+v, %+v; want %+v", got, refusal, id)
	}

	at := func(now time.Time) {
		t.Helper()
		la.clock.SetTime(now)
		if err := la.keys.ReadNow(t.Context()); err != nil { // held, read within KeysMaxAge
			t.Fatal(err)
		}
	}
	at(k.now.Add(time.Hour + time.Second))
	if got, refusal := again(token); got != nil || refusal != nil {
		t.Errorf("just past its expiry: %+v, %+v; want a review to decide", got, refusal)
	}
	at(k.now.Add(time.Hour + tokenreview.APIServerLeeway + time.Second))
	if _, refusal := again(token); refusal == nil || refusal.Metric != RefusedInvalidToken {
		t.Errorf("past its expiry and the leeway: %+v; want it refused as invalid", refusal)
	}
	at(k.now)

	pod, _, _ := la.pods.GetByKey(id.Pod.String())
	if err := la.pods.Delete(pod); err != nil {
		t.Fatal(err)
	}
	if got, refusal := again(token); got != nil || refusal != nil {
		t.Errorf("its Pod gone from the cache: %+v, %+v; want a review to decide", got, refusal)
	}
	if err := la.pods.Add(pod); err != nil {
		t.Fatal(err)
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	k.ti.addKey("rsa", other)
	if err := la.keys.ReadNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, refusal := again("not a token"); got != nil || refusal == nil || refusal.Metric != RefusedInvalidToken {
		t.Errorf("another key under its key ID: %+v, %+v; want the token verified in full, and junk refused", got, refusal)
	}
	if _, refusal := again(token); refusal == nil || refusal.Metric != RefusedInvalidToken {
		t.Errorf("another key under its key ID: %+v; want the token, no longer verified by it, refused", refusal)
	}
}
