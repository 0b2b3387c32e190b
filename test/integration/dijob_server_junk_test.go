package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/nereid-ml/nereid/test/framework"
)

// TestJunkTokensOnTheDIJobReplicasAPIsCostNoTokenReview sends the replicas
// API (v2) and the v1 replicas server tokens the API server never signed:
// not a JWT, a ServiceAccount token's claims under a made-up key ID, and
// under the API server's key ID signed by another key. Each is refused
// (401, then 429 once the address has been refused too often) and the API
// server serves no TokenReview meanwhile; a real token is still reviewed
// from that address.
//
// Not parallel: it counts the API server's TokenReviews, which every
// GlobalManager beside it would send.
func TestJunkTokensOnTheDIJobReplicasAPIsCostNoTokenReview(t *testing.T) {
	ns := framework.Namespace(t)
	gm := framework.StartGlobalManager(t, ns, "--edge-namespace", ns, "--di-server-address", "127.0.0.1:0",
		"--di-v1-server-address", "127.0.0.1:0", "--di-v1-server-url", "127.0.0.1:8080")
	v2URL := replicasAPIAddress(t, gm) + "/v2alpha1/job/" + ns + ".nothing/replicas"
	v1URL := v1ServerAddress(t, gm) + "/v1alpha1/replicas?namespace=" + ns + "&coordinator=nothing-coordinator"

	real := serviceAccountToken(t, ns, "caller", nil)
	parts := strings.Split(real, ".")
	var h struct {
		KeyID string `json:"kid"`
	}
	header, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || json.Unmarshal(header, &h) != nil {
		t.Fatalf("the API server's token header %q: %v", parts[0], err)
	}
	claims, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	junk := func(i int) string {
		switch i % 3 {
		case 0:
			return fmt.Sprintf("not-a-token-%d", i)
		case 1:
			return junkToken(t, claims, fmt.Sprintf("made-up-%d", i), "", nil)
		}
		return junkToken(t, claims, h.KeyID, jose.ES256, stranger)
	}

	before := apiTokenReviews(t)
	for name, url := range map[string]string{"v2": v2URL, "v1": v1URL} {
		method := map[string]string{"v2": http.MethodPost, "v1": http.MethodGet}[name]
		for i := range 100 {
			if code, r := callReplicasAPI(t, method, url, junk(i), `{"replicas": 1}`); code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
				t.Fatalf("%s: junk %d: %d %+v, want 401 or 429", name, i, code, r)
			}
		}
	}
	if n := apiTokenReviews(t) - before; n != 0 {
		t.Errorf("the API server served %v TokenReviews for junk sent to the replicas APIs, want none", n)
	}
	// The address is blocked by now, but for tokens the API server signed:
	// the caller may not touch DIJobs (403), which a review said it is.
	for name, url := range map[string]string{"v2": v2URL, "v1": v1URL} {
		method := map[string]string{"v2": http.MethodPost, "v1": http.MethodGet}[name]
		if code, r := callReplicasAPI(t, method, url, real, `{"replicas": 1}`); code != http.StatusForbidden {
			t.Errorf("%s: a real token from the junk's address: %d %+v, want 403", name, code, r)
		}
	}
	if n := apiTokenReviews(t) - before; n < 1 {
		t.Errorf("%v TokenReviews for a real token, want it reviewed", n)
	}
}
