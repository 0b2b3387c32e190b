package replicasapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/globalmanager/tokenreview"
)

// issuerKeys are the keys of a test API server that signs with one ES256
// key, k1, which it returns.
func issuerKeys(t *testing.T) (*tokenreview.IssuerKeys, *ecdsa.PrivateKey) {
	t.Helper()
	key := newTestKey(t)
	keys := tokenreview.NewIssuerKeysFrom(func(_ context.Context, path string) ([]byte, error) {
		switch path {
		case tokenreview.OpenIDConfigPath:
			return json.Marshal(map[string]string{"issuer": apiAudience})
		case tokenreview.JWKSPath:
			jwk := jose.JSONWebKey{Key: key, KeyID: "k1", Use: "sig", Algorithm: string(jose.ES256)}
			return json.Marshal(map[string]any{"keys": []any{jwk.Public()}})
		}
		return nil, fmt.Errorf("no %s", path)
	}, clock.RealClock{})
	if err := keys.ReadNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	return keys, key
}

func newTestKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// signedToken is a ServiceAccount token of rl:default for the API server,
// signed by key under kid.
func signedToken(t *testing.T, key *ecdsa.PrivateKey, kid string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	token, err := jwt.Signed(signer).Claims(jwt.Claims{
		Issuer: apiAudience, Subject: "system:serviceaccount:" + testNS + ":default", Audience: jwt.Audience{apiAudience},
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour)),
	}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// Junk tokens, anything the API server's keys do not verify, cost the
// replicas API and the v1 server no TokenReview: each is refused (401),
// then, past Config.MaxRefusalsPerAddress, its address is told to come
// back (429, Retry-After). A token the keys verify is still reviewed from
// that address.
func TestJunkTokensCostTheReplicasAPIsNoTokenReview(t *testing.T) {
	keys, key := issuerKeys(t)
	junk := []string{"not-a-token", "a.b.c", signedToken(t, newTestKey(t), "k1"), signedToken(t, key, "made-up"), signedToken(t, newTestKey(t), "made-up")}
	const limit = 6
	cfg := Config{Keys: keys, MaxRefusalsPerAddress: limit}
	valid := signedToken(t, key, "k1")

	v2 := newFixture(t, cfg, newJob(testJob))
	v1 := newV1Fixture(t, cfg, newV1Job(t, testV1Job))
	for name, send := range map[string]func(token string) answer{
		"v2": func(token string) answer {
			return v2.do(http.MethodPost, replicasPath(testJob), token, `{"replicas": 1}`)
		},
		"v1": func(token string) answer {
			return v1.call(v1Request{method: http.MethodGet, path: "/v1alpha1/replicas?namespace=" + testNS + "&coordinator=" + coordinatorName,
				from: strangerIP, token: token})
		},
	} {
		f := map[string]*fixture{"v2": v2, "v1": v1.fixture}[name]
		for i := range 2 * limit {
			a := send(junk[i%len(junk)])
			want := http.StatusUnauthorized
			if i >= limit {
				want = http.StatusTooManyRequests
			}
			if a.status != want || (want == http.StatusTooManyRequests && a.header.Get("Retry-After") == "") {
				t.Fatalf("%s: junk %d: %d %q (Retry-After %q), want %d", name, i, a.status, a.body.Message, a.header.Get("Retry-After"), want)
			}
		}
		if n := f.reviewCount(); n != 0 {
			t.Errorf("%s: %d TokenReviews for junk, want none", name, n)
		}
		// The fixture's reviews know no such token: reviewed, then refused.
		if a := send(valid); a.status != http.StatusUnauthorized || f.reviewCount() != 1 {
			t.Errorf("%s: a token the keys verify, from a blocked address: %d after %d reviews; want it reviewed", name, a.status, f.reviewCount())
		}
	}
}
