package tokenreview

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	gojwt "github.com/go-jose/go-jose/v4/jwt"
	"k8s.io/utils/clock"
)

const verifyIssuer = "https://kubernetes.default.svc"

// testKeys serves the discovery document and a key set of one key, k1.
func testKeys(t *testing.T) (*ecdsa.PrivateKey, func(context.Context, string) ([]byte, error)) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key, func(_ context.Context, path string) ([]byte, error) {
		switch path {
		case OpenIDConfigPath:
			return json.Marshal(map[string]string{"issuer": verifyIssuer})
		case JWKSPath:
			jwk := jose.JSONWebKey{Key: key, KeyID: "k1", Use: "sig", Algorithm: string(jose.ES256)}
			return json.Marshal(map[string]any{"keys": []any{jwk.Public()}})
		}
		return nil, fmt.Errorf("no %s", path)
	}
}

func signTest(t *testing.T, key any, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	token, err := gojwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// Verify refuses what the API server's ServiceAccount authenticator would
// refuse, and, for a server that reviews what it verifies
// (AnyServiceAccountToken), lets through every token the API server signed
// that it may take: a Secret's legacy token, another issuer of its keys.
func TestVerifyRefusesOnlyWhatTheAPIServerRefuses(t *testing.T) {
	key, fetch := testKeys(t)
	stranger, _ := testKeys(t)
	now := time.Now()
	k := NewIssuerKeysFrom(fetch, clock.RealClock{})
	if err := k.ReadNow(t.Context()); err != nil {
		t.Fatal(err)
	}
	bound := func(change func(map[string]any)) map[string]any {
		c := map[string]any{"iss": verifyIssuer, "sub": "system:serviceaccount:ns:sa", "aud": []string{"di"},
			"exp": now.Add(time.Hour).Unix(), "iat": now.Add(-time.Minute).Unix()}
		if change != nil {
			change(c)
		}
		return c
	}
	legacy := map[string]any{"iss": LegacyIssuer, "sub": "system:serviceaccount:ns:sa"}
	strict := VerifyOptions{Audiences: []string{"di"}}
	reviewed := VerifyOptions{Audiences: []string{"di"}, AnyServiceAccountToken: true}
	for name, tc := range map[string]struct {
		token string
		opts  VerifyOptions
		want  string // "" verified, else what the refusal says
	}{
		"a bound token":                     {token: signTest(t, key, "k1", bound(nil)), opts: strict},
		"a bound token, reviewed after":     {token: signTest(t, key, "k1", bound(nil)), opts: reviewed},
		"not a JWT":                         {token: "not-a-token", opts: reviewed, want: "not signed as the API server signs"},
		"a made-up key ID":                  {token: signTest(t, key, "made-up", bound(nil)), opts: reviewed, want: "a key the API server does not publish"},
		"another key":                       {token: signTest(t, stranger, "k1", bound(nil)), opts: reviewed, want: "its signature does not verify"},
		"another audience":                  {token: signTest(t, key, "k1", bound(func(c map[string]any) { c["aud"] = "api" })), opts: reviewed, want: "its audience"},
		"expired":                           {token: signTest(t, key, "k1", bound(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() })), opts: reviewed, want: "expired"},
		"a legacy token":                    {token: signTest(t, key, "k1", legacy), opts: strict, want: "issued by"},
		"a legacy token, reviewed after":    {token: signTest(t, key, "k1", legacy), opts: reviewed},
		"no expiry":                         {token: signTest(t, key, "k1", bound(func(c map[string]any) { delete(c, "exp") })), opts: strict, want: "no expiry"},
		"another issuer, reviewed after":    {token: signTest(t, key, "k1", bound(func(c map[string]any) { c["iss"] = "https://old" })), opts: reviewed},
		"no audience, for the API server's": {token: signTest(t, key, "k1", bound(func(c map[string]any) { delete(c, "aud") })), opts: VerifyOptions{AnyServiceAccountToken: true}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := k.Verify(t.Context(), tc.token, tc.opts, now)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v; want refused, saying %q", err, tc.want)
			}
		})
	}
	var none *IssuerKeys
	if _, err := none.Verify(t.Context(), "x", VerifyOptions{}, now); !errors.Is(err, ErrUnverifiable) {
		t.Errorf("no keys: %v, want ErrUnverifiable", err)
	}
}

// The keys' documents are read with bounds, and a key set with no usable
// key leaves every token to a review.
func TestIssuerKeysRefuseWhatCannotServe(t *testing.T) {
	_, fetch := testKeys(t)
	keySet, err := fetch(t.Context(), JWKSPath)
	if err != nil {
		t.Fatal(err)
	}
	valid := string(keySet)
	for name, docs := range map[string]map[string]string{
		"no issuer":          {OpenIDConfigPath: `{}`, JWKSPath: valid},
		"no key":             {OpenIDConfigPath: `{"issuer":"x"}`, JWKSPath: `{"keys":[]}`},
		"only unusable keys": {OpenIDConfigPath: `{"issuer":"x"}`, JWKSPath: `{"keys":[{"kty":"nonsense","kid":"k1"}]}`},
		"not JSON":           {OpenIDConfigPath: `{"issuer":"x"}`, JWKSPath: `<html>`},
		"over the bound":     {OpenIDConfigPath: `{"issuer":"` + strings.Repeat("a", maxKeySetBytes) + `"}`, JWKSPath: valid},
	} {
		t.Run(name, func(t *testing.T) {
			k := NewIssuerKeysFrom(func(_ context.Context, path string) ([]byte, error) {
				if d, ok := docs[path]; ok {
					return []byte(d), nil
				}
				return nil, fmt.Errorf("no %s", path)
			}, clock.RealClock{})
			if err := k.load(t.Context()); err == nil {
				t.Fatal("load: no error")
			}
			if len(k.keys) != 0 {
				t.Errorf("keys held: %v", k.keys)
			}
		})
	}
}
