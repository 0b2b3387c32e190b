package edgehub

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

const (
	testIssuer    = "https://kubernetes.default.svc.cluster.local"
	testAccountID = "sa-uid"
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
	case openIDConfigPath:
		return json.Marshal(map[string]string{"issuer": testIssuer, "jwks_uri": testIssuer + jwksPath})
	case jwksPath:
		ti.mu.Lock()
		defer ti.mu.Unlock()
		keys := append([]any(nil), ti.extra...)
		for kid, k := range ti.keys {
			alg := string(jose.ES256)
			if _, ok := k.(*rsa.PrivateKey); ok {
				alg = string(jose.RS256)
			}
			private := jose.JSONWebKey{Key: k, KeyID: kid, Use: "sig", Algorithm: cmp.Or(ti.alg[kid], alg)}
			keys = append(keys, private.Public())
		}
		return json.Marshal(map[string]any{"keys": keys})
	}
	return nil, fmt.Errorf("no %s", path)
}

// lcClaims are the claims of edge-0's LocalController token, valid now.
func lcClaims(now time.Time) (jwt.Claims, boundClaims) {
	public := jwt.Claims{
		Issuer: testIssuer, Subject: serviceAccountPrefix + hubNS + ":nereid-localcontroller",
		Audience: jwt.Audience{DefaultTokenAudience},
		IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)),
	}
	var private boundClaims
	k := &private.Kubernetes
	k.Namespace = hubNS
	k.ServiceAccount = ref{Name: "nereid-localcontroller", UID: testAccountID}
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

// localAuth is an authenticator that verifies ti's tokens itself, with
// edge-0's LocalController Pod and ServiceAccount cached, edge-0 an edge
// node and cloud-0 not; its TokenReviews are counted and refuse every token.
type localAuth struct {
	*authenticator
	reviews  atomic.Int64
	pods     cache.Store
	accounts cache.Store
	clock    time.Time
}

func newLocalAuth(t *testing.T, ti *tokenIssuer) *localAuth {
	t.Helper()
	cfg := testConfig.withDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	la := &localAuth{clock: time.Now()}
	kube := kubefake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(action clienttesting.Action) (bool, runtime.Object, error) {
		la.reviews.Add(1)
		return reviewTokens(action)
	})
	kube.PrependReactor("get", "nodes", getNodes)
	now := func() time.Time { return la.clock }
	la.authenticator = newAuthenticator(kube, cfg, now)
	la.keys = &issuerKeys{fetch: ti.fetch, now: now}
	if err := la.keys.load(t.Context()); err != nil {
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
		{la.pods, lcPod("edge-0")},
		{la.pods, lcPod("cloud-0")},
		{la.accounts, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "nereid-localcontroller", UID: testAccountID}}},
		{la.daemonSets, lcDaemonSet(testDaemonSetUID)},
		{nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-0", Labels: map[string]string{"node-role.kubernetes.io/edge": ""}}}},
	} {
		if err := o.store.Add(o.obj); err != nil {
			t.Fatal(err)
		}
	}
	la.podCache, la.accountCache, la.nodes = stores{la.pods}, stores{la.accounts}, nodes
	return la
}

func (la *localAuth) connect(t *testing.T, token string) (*identity, *authError) {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://hub/connect", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+token)
	return la.authenticate(t.Context(), r)
}

// The hub accepts a token it can verify as a TokenReview would, without
// one; every other token goes to a review, which decides.
func TestTheHubVerifiesATokenItselfOnlyWhenEverythingChecks(t *testing.T) {
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
	now := time.Now()
	cases := []struct {
		name    string
		token   func(t *testing.T, la *localAuth) string
		local   bool      // accepted without a review
		expires time.Time // then: when it expires, if not at exp
		status  int       // else: refused so, after a review when reviewed
		review  bool
	}{
		{name: "a valid ES256 token", local: true,
			token: keyed(ti.keys["k1"], "k1", jose.ES256, now)},
		{name: "a valid RS256 token", local: true,
			token: keyed(rsaKey, "rsa", jose.RS256, now)},
		{name: "signed by another key under a known key ID", status: http.StatusUnauthorized, review: true,
			token: keyed(stranger, "k1", jose.ES256, now)},
		{name: "a key the key set gives another algorithm", status: http.StatusUnauthorized, review: true,
			token: keyed(rsaKey, "rs384", jose.RS256, now)},
		{name: "a key the key set has for encryption", status: http.StatusUnauthorized, review: true,
			token: keyed(encKey, "enc", jose.ES256, now)},
		{name: "an HMAC signature (keyed with the public key's bytes)", status: http.StatusUnauthorized, review: true,
			token: func(t *testing.T, _ *localAuth) string {
				p, b := lcClaims(now)
				pub, err := json.Marshal(jose.JSONWebKey{Key: &rsaKey.PublicKey, KeyID: "rsa"})
				if err != nil {
					t.Fatal(err)
				}
				return signWith(t, pub, "rsa", jose.HS256, p, b)
			}},
		{name: "keys not read again for too long", status: http.StatusUnauthorized, review: true,
			token: func(t *testing.T, la *localAuth) string {
				la.keys.mu.Lock()
				la.keys.read, la.keys.tried = now.Add(-keysMaxAge), now // no read again in the test
				la.keys.mu.Unlock()
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
		{name: "no audience", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.Audience = nil })},
		{name: "issued in the future", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.IssuedAt = jwt.NewNumericDate(now.Add(30 * time.Second)) })},
		{name: "not valid for another 30s (within the API server's leeway)", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) {
				p.IssuedAt, p.NotBefore = nil, jwt.NewNumericDate(now.Add(30*time.Second))
			})},
		{name: "bound to no node", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Node = nil })},
		{name: "bound to a webhook configuration", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Validating = &ref{Name: "w", UID: "w"} })},
		{name: "its ServiceAccount being deleted", status: http.StatusUnauthorized, review: true,
			token: func(t *testing.T, la *localAuth) string {
				gone := metav1.NewTime(now)
				if err := la.accounts.Update(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "nereid-localcontroller", UID: testAccountID, DeletionTimestamp: &gone}}); err != nil {
					t.Fatal(err)
				}
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
		{name: "a rotated token: it expires at warnafter", local: true, expires: now.Add(10 * time.Minute),
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) {
				b.Kubernetes.WarnAfter = jwt.NewNumericDate(now.Add(10 * time.Minute))
			})},
		{name: "another issuer", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.Issuer = "https://elsewhere" })},
		{name: "not valid yet", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.NotBefore = jwt.NewNumericDate(now.Add(10 * time.Minute)) })},
		{name: "no expiry", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.Expiry = nil })},
		{name: "another subject", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(p *jwt.Claims, _ *boundClaims) { p.Subject = serviceAccountPrefix + hubNS + ":other" })},
		{name: "a ServiceAccount not accepted", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(p *jwt.Claims, b *boundClaims) {
				p.Subject = serviceAccountPrefix + "default:default"
				b.Kubernetes.Namespace, b.Kubernetes.ServiceAccount.Name = "default", "default"
			})},
		{name: "its ServiceAccount made again (another UID)", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.ServiceAccount.UID = "old-sa-uid" })},
		{name: "its Pod made again (another UID)", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Pod.UID = "old-uid" })},
		{name: "a Pod not cached", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Pod = &ref{Name: "lc-edge-9", UID: "uid-edge-9"} })},
		{name: "its Pod being deleted", status: http.StatusUnauthorized, review: true,
			token: func(t *testing.T, la *localAuth) string {
				gone := metav1.NewTime(now)
				if err := la.pods.Update(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: hubNS, Name: "lc-edge-0", UID: "uid-edge-0", DeletionTimestamp: &gone}}); err != nil {
					t.Fatal(err)
				}
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
		{name: "its ServiceAccount not cached yet", status: http.StatusUnauthorized, review: true,
			token: func(t *testing.T, la *localAuth) string {
				if err := la.accounts.Replace(nil, ""); err != nil {
					t.Fatal(err)
				}
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
		{name: "bound to no Pod", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Pod = nil })},
		{name: "bound to a Secret", status: http.StatusUnauthorized, review: true,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) { b.Kubernetes.Secret = &ref{Name: "s", UID: "s"} })},
		{name: "a Pod on a node that is not an edge node", status: http.StatusForbidden,
			token: withClaims(ti, now, func(_ *jwt.Claims, b *boundClaims) {
				b.Kubernetes.Pod, b.Kubernetes.Node = &ref{Name: "lc-cloud-0", UID: "uid-cloud-0"}, &ref{Name: "cloud-0"}
			})},
		{name: "its Pod deleted lately", status: http.StatusUnauthorized,
			token: func(t *testing.T, la *localAuth) string {
				la.forgetPod("uid-edge-0")
				p, b := lcClaims(now)
				return ti.sign(t, "k1", jose.ES256, p, b)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			la := newLocalAuth(t, ti)
			la.clock = now
			id, refusal := la.connect(t, tc.token(t, la))
			if reviews := la.reviews.Load(); (reviews > 0) != tc.review {
				t.Errorf("%d TokenReviews; want a review: %v", reviews, tc.review)
			}
			if tc.local {
				if refusal != nil {
					t.Fatalf("refused: %s (%v)", refusal.reason, refusal.err)
				}
				wantExpires := time.Unix(cmp.Or(tc.expires, now.Add(time.Hour)).Unix(), 0)
				if id.node != "edge-0" || id.pod.Name != "lc-edge-0" || id.podUID != "uid-edge-0" || id.serviceAccount != DefaultServiceAccount ||
					!id.expires.Equal(wantExpires) {
					t.Errorf("identity %+v", id)
				}
				return
			}
			if refusal == nil || refusal.status != tc.status {
				t.Fatalf("identity %+v, refusal %+v; want status %d", id, refusal, tc.status)
			}
		})
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

// A token signed with a key the hub does not hold yet is reviewed, and has
// the keys read again (at most every keysRetryPeriod): the next token of
// that key is verified here.
func TestANewSigningKeyIsReadAgainAndThenVerifiedHere(t *testing.T) {
	ti := newTokenIssuer(t)
	la := newLocalAuth(t, ti)
	ti.addKey("k2", newECKey(t))
	p, b := lcClaims(la.clock)
	token := ti.sign(t, "k2", jose.ES256, p, b)
	fetched := ti.fetches.Load()
	// Within keysRetryPeriod of the last read, the keys are not read again.
	if _, refusal := la.connect(t, token); refusal == nil || la.reviews.Load() != 1 {
		t.Fatalf("refusal %v after %d reviews; want one review (that refuses)", refusal, la.reviews.Load())
	}
	if n := ti.fetches.Load(); n != fetched {
		t.Fatalf("the keys were read again %d times within %s", n-fetched, keysRetryPeriod)
	}
	// Past it, the next such token has them read again (it is still
	// reviewed). ECDSA signatures differ each time: each token is new to
	// the cache of outcomes.
	la.clock = la.clock.Add(keysRetryPeriod)
	if _, refusal := la.connect(t, ti.sign(t, "k2", jose.ES256, p, b)); refusal == nil {
		t.Fatal("a token of a key not read yet was accepted")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, _, ok := la.keys.key(t.Context(), "k2"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the keys were not read again within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	reviews := la.reviews.Load()
	if _, refusal := la.connect(t, ti.sign(t, "k2", jose.ES256, p, b)); refusal != nil {
		t.Fatalf("refused after the keys were read again: %s", refusal.reason)
	}
	if la.reviews.Load() != reviews {
		t.Error("a token of the new key was reviewed")
	}
}

// The keys' documents are read with bounds, and a key set with no usable
// key leaves the hub reviewing every token.
func TestIssuerKeysRefuseWhatCannotServe(t *testing.T) {
	ti := newTokenIssuer(t)
	keySet, err := ti.fetch(t.Context(), jwksPath)
	if err != nil {
		t.Fatal(err)
	}
	valid := string(keySet)
	for name, docs := range map[string]map[string]string{
		"no issuer":          {openIDConfigPath: `{}`, jwksPath: valid},
		"no key":             {openIDConfigPath: `{"issuer":"x"}`, jwksPath: `{"keys":[]}`},
		"only unusable keys": {openIDConfigPath: `{"issuer":"x"}`, jwksPath: `{"keys":[{"kty":"nonsense","kid":"k1"}]}`},
		"not JSON":           {openIDConfigPath: `{"issuer":"x"}`, jwksPath: `<html>`},
		"over the bound":     {openIDConfigPath: `{"issuer":"` + strings.Repeat("a", maxKeySetBytes) + `"}`, jwksPath: valid},
	} {
		t.Run(name, func(t *testing.T) {
			k := &issuerKeys{now: time.Now, fetch: func(_ context.Context, path string) ([]byte, error) {
				if d, ok := docs[path]; ok {
					return []byte(d), nil
				}
				return nil, fmt.Errorf("no %s", path)
			}}
			if err := k.load(t.Context()); err == nil {
				t.Fatal("load: no error")
			}
			if len(k.keys) != 0 {
				t.Errorf("keys held: %v", k.keys)
			}
		})
	}
}

// A token the hub accepted itself is then reviewed: the review confirms it
// only when it binds the token to the same Pod, ServiceAccount and node.
func TestATokenTheHubAcceptedIsConfirmedOnlyByAReviewThatAgrees(t *testing.T) {
	ti := newTokenIssuer(t)
	la := newLocalAuth(t, ti)
	p, b := lcClaims(la.clock)
	token := ti.sign(t, "k1", jose.ES256, p, b)
	id, refusal := la.connect(t, token)
	if refusal != nil || !id.byHub || la.reviews.Load() != 0 {
		t.Fatalf("identity %+v, refusal %v, %d reviews; want the hub's own acceptance", id, refusal, la.reviews.Load())
	}
	const lcUser = "system:serviceaccount:nereid-system:nereid-localcontroller"
	userAs := func(username, node, pod, uid string) *authenticationv1.TokenReviewStatus {
		return &authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: []string{DefaultTokenAudience},
			User: authenticationv1.UserInfo{Username: username, Extra: map[string]authenticationv1.ExtraValue{
				NodeNameExtra: {node}, PodNameExtra: {pod}, PodUIDExtra: {uid}}}}
	}
	user := func(node, pod, uid string) *authenticationv1.TokenReviewStatus { return userAs(lcUser, node, pod, uid) }
	for name, tc := range map[string]struct {
		status *authenticationv1.TokenReviewStatus // nil: the review fails
		want   string                              // the refusal's metric, "" for confirmed
	}{
		"the same Pod":       {status: user("edge-0", "lc-edge-0", "uid-edge-0")},
		"the Pod made again": {status: user("edge-0", "lc-edge-0", "uid-new"), want: refusedInvalidToken},
		"another node":       {status: user("edge-1", "lc-edge-0", "uid-edge-0"), want: refusedInvalidToken},
		"another ServiceAccount": {status: userAs("system:serviceaccount:nereid-system:default", "edge-0", "lc-edge-0", "uid-edge-0"),
			want: refusedNotLocalController},
		"not valid (the Pod is gone)": {status: &authenticationv1.TokenReviewStatus{Error: "pod not found"}, want: refusedInvalidToken},
		"the review fails":            {want: refusedReviewError},
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
				t.Errorf("refused (%s: %s); want confirmed", got.metric, got.reason)
			case tc.want != "" && got == nil:
				t.Errorf("confirmed; want refused as %s", tc.want)
			case tc.want != "" && got.metric != tc.want:
				t.Errorf("refused as %s (%s); want %s", got.metric, got.reason, tc.want)
			}
		})
	}
	// After a refusal, the Pod's tokens go to a review, whatever it says.
	la.reviewFirst(id.podUID)
	if again, _ := la.connect(t, ti.sign(t, "k1", jose.ES256, p, b)); again != nil && again.byHub {
		t.Error("the hub accepted a token of a Pod whose token a review refused")
	}
}
