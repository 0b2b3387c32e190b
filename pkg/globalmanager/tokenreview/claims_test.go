package tokenreview

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// jwt is a token whose payload holds claims; its header and signature are
// not read.
func jwt(claims map[string]any) string {
	payload, _ := json.Marshal(claims)
	return "e30." + base64.RawURLEncoding.EncodeToString(payload) + ".sig"
}

func TestReadClaims(t *testing.T) {
	cases := map[string]struct {
		token        string
		wantNil      bool
		wantAudience Audience
		wantExpires  time.Time
	}{
		"one audience, exp":               {token: jwt(map[string]any{"aud": "hub", "exp": 2000}), wantAudience: Audience{"hub"}, wantExpires: time.Unix(2000, 0)},
		"audiences, warnafter before exp": {token: jwt(map[string]any{"aud": []string{"a", "b"}, "exp": 2000, "kubernetes.io": map[string]any{"warnafter": 1500}}), wantAudience: Audience{"a", "b"}, wantExpires: time.Unix(1500, 0)},
		"warnafter alone":                 {token: jwt(map[string]any{"kubernetes.io": map[string]any{"warnafter": 1500}}), wantExpires: time.Unix(1500, 0)},
		"no times":                        {token: jwt(map[string]any{"aud": "hub"}), wantAudience: Audience{"hub"}},
		"not a JWT":                       {token: "admin", wantNil: true},
		"a payload that is not base64":    {token: "e30.!!!.sig", wantNil: true},
		"a payload that is not JSON":      {token: "e30." + base64.RawURLEncoding.EncodeToString([]byte("[")) + ".sig", wantNil: true},
		"an audience that is a number":    {token: jwt(map[string]any{"aud": 7}), wantNil: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := ReadClaims(tc.token)
			if tc.wantNil {
				if c != nil {
					t.Fatalf("claims %+v, want none", c)
				}
				if got := Expires(tc.token); !got.IsZero() {
					t.Errorf("Expires = %s, want zero", got)
				}
				return
			}
			if c == nil {
				t.Fatal("no claims")
			}
			if diff := cmp.Diff(tc.wantAudience, c.Audience); diff != "" {
				t.Errorf("audience (-want,+got):\n%s", diff)
			}
			if got := c.Expires(); !got.Equal(tc.wantExpires) {
				t.Errorf("Expires() = %s, want %s", got, tc.wantExpires)
			}
			if got := Expires(tc.token); !got.Equal(tc.wantExpires) {
				t.Errorf("Expires(token) = %s, want %s", got, tc.wantExpires)
			}
		})
	}
}
