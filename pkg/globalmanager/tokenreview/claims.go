package tokenreview

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// Claims are the fields of a ServiceAccount token's JWT payload a server
// reads. They are read without checking the signature: a review (or a
// verification of the signature) is what authenticates the token; the
// claims only say which audience a token has, and when it expires.
type Claims struct {
	Audience   Audience `json:"aud"`
	Expiry     int64    `json:"exp"`
	Kubernetes struct {
		WarnAfter int64 `json:"warnafter"`
	} `json:"kubernetes.io"`
}

// Expires is when the token stops being the one to use: the earlier of exp
// and warnafter (when the kubelet has rotated the projected token); zero if
// neither is set.
func (c *Claims) Expires() time.Time {
	t := c.Expiry
	if w := c.Kubernetes.WarnAfter; w > 0 && (t == 0 || w < t) {
		t = w
	}
	if t <= 0 {
		return time.Time{}
	}
	return time.Unix(t, 0)
}

// Audience is a JWT aud claim: a string or a list of strings.
type Audience []string

// UnmarshalJSON reads a string or a list of strings.
func (a *Audience) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*a = Audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// ReadClaims decodes a JWT's payload, or returns nil when token is not a
// JWT.
func ReadClaims(token string) *Claims {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[1]) > 64<<10 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil
	}
	var c Claims
	if json.Unmarshal(payload, &c) != nil {
		return nil
	}
	return &c
}

// Expires is when token stops being the one to use, as its claims say
// (Claims.Expires); zero for a token that is not a JWT or says nothing.
func Expires(token string) time.Time {
	if c := ReadClaims(token); c != nil {
		return c.Expires()
	}
	return time.Time{}
}
