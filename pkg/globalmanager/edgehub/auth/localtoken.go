package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/nereid-ml/nereid/internal/cached"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// The API server's OpenID discovery document and key set (served to every
// ServiceAccount by the default binding system:service-account-issuer-discovery).
const (
	openIDConfigPath = "/.well-known/openid-configuration"
	jwksPath         = "/openid/v1/jwks"
)

// issuerKeys are the API server's ServiceAccount token issuer and the public
// keys its tokens are verified with, read from its discovery document and
// key set: again every keysRefreshPeriod, and at most every
// keysRetryPeriod when a token names a key not held. Keys not read again
// successfully within keysMaxAge are not used: a key the API server has
// dropped verifies nothing here for long.
type issuerKeys struct {
	// fetch reads a path of the API server.
	fetch func(ctx context.Context, path string) ([]byte, error)
	clock clock.Clock

	mu     sync.Mutex
	issuer string
	keys   map[string]jose.JSONWebKey // by key ID
	read   time.Time                  // the last successful read
	tried  time.Time                  // the last read begun, successful or not
	failed bool                       // whether the last read ended in an error
	// reading is closed when the read in flight ends; nil when none is.
	reading chan struct{}
	// firstRead is closed once the first read has ended.
	firstRead     chan struct{}
	firstReadOnce sync.Once
}

const (
	keysRefreshPeriod = time.Minute
	keysMaxAge        = 3 * keysRefreshPeriod
	keysRetryPeriod   = 10 * time.Second
	// keysReadTimeout bounds one read of both documents.
	keysReadTimeout = 30 * time.Second
	// maxKeySetBytes bounds what is read of either document.
	maxKeySetBytes = 1 << 20
)

// newIssuerKeys are the keys of the API server client talks to; nil when
// client cannot read them (a fake clientset's).
func newIssuerKeys(client rest.Interface, clk clock.Clock) *issuerKeys {
	if rc, ok := client.(*rest.RESTClient); !ok || rc == nil {
		return nil
	}
	return newKeys(func(ctx context.Context, path string) ([]byte, error) {
		// The client may ask for protobuf; these are JSON documents.
		body, err := client.Get().AbsPath(path).SetHeader("Accept", "application/json, application/jwk-set+json").Stream(ctx)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		return io.ReadAll(io.LimitReader(body, maxKeySetBytes+1))
	}, clk)
}

// newKeys are the keys fetch reads.
func newKeys(fetch func(ctx context.Context, path string) ([]byte, error), clk clock.Clock) *issuerKeys {
	return &issuerKeys{fetch: fetch, clock: clk, firstRead: make(chan struct{})}
}

// signingAlgorithms are those of the keys the API server signs
// ServiceAccount tokens with (RSA and ECDSA).
var signingAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// load reads the discovery document and the key set. A key that cannot be
// parsed is left out, not the others.
func (k *issuerKeys) load(ctx context.Context) error {
	k.mu.Lock()
	k.tried = k.clock.Now()
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, keysReadTimeout)
	defer cancel()
	get := func(path string, into any) error {
		body, err := k.fetch(ctx, path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if len(body) > maxKeySetBytes {
			return fmt.Errorf("reading %s: %d bytes, more than %d", path, len(body), maxKeySetBytes)
		}
		if err := json.Unmarshal(body, into); err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		return nil
	}
	var config struct {
		Issuer string `json:"issuer"`
	}
	if err := get(openIDConfigPath, &config); err != nil {
		return err
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := get(jwksPath, &set); err != nil {
		return err
	}
	keys := make(map[string]jose.JSONWebKey, len(set.Keys))
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) == nil && key.KeyID != "" && key.Valid() && key.IsPublic() && (key.Use == "" || key.Use == "sig") {
			keys[key.KeyID] = key
		}
	}
	if config.Issuer == "" || len(keys) == 0 {
		return fmt.Errorf("the API server's discovery document names no issuer or its key set no usable key (%d keys)", len(set.Keys))
	}
	k.mu.Lock()
	k.issuer, k.keys, k.read = config.Issuer, keys, k.clock.Now()
	k.mu.Unlock()
	return nil
}

// run reads the keys now and every keysRefreshPeriod until ctx ends. A
// failure is logged: tokens are then reviewed by the API server.
func (k *issuerKeys) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		if done, mine := k.begin(); mine {
			err := k.load(ctx)
			k.end(done, err)
			if err != nil && ctx.Err() == nil {
				logger.Info("Cannot verify LocalController tokens here; each is sent to a TokenReview", "err", err)
			} else if err == nil {
				logger.V(2).Info("Read the ServiceAccount token issuer's keys", "issuer", k.issuerName())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(keysRefreshPeriod):
		}
	}
}

// readNow reads the keys, or waits for the read in flight.
func (k *issuerKeys) readNow(ctx context.Context) error {
	done, mine := k.begin()
	if !mine {
		<-done
		return nil
	}
	err := k.load(ctx)
	k.end(done, err)
	return err
}

// begin marks a read begun unless one is in flight: it returns the channel
// closed when the read in flight ends, and whether the caller is to make
// the read (and then call end).
func (k *issuerKeys) begin() (done chan struct{}, mine bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.beginLocked()
}

func (k *issuerKeys) beginLocked() (chan struct{}, bool) {
	if k.reading != nil {
		return k.reading, false
	}
	k.reading = make(chan struct{})
	return k.reading, true
}

// end marks the read begun with done ended with err.
func (k *issuerKeys) end(done chan struct{}, err error) {
	k.mu.Lock()
	k.failed = err != nil
	if k.reading == done {
		k.reading = nil
	}
	k.mu.Unlock()
	close(done)
	k.firstReadOnce.Do(func() { close(k.firstRead) })
}

func (k *issuerKeys) issuerName() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.issuer
}

// held says whether the keys may be used (read successfully within
// keysMaxAge) and how many there are; k.mu is held.
func (k *issuerKeys) heldLocked() bool {
	return len(k.keys) > 0 && k.clock.Now().Sub(k.read) < keysMaxAge
}

// count is how many keys are held, 0 when they may not be used.
func (k *issuerKeys) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.heldLocked() {
		return 0
	}
	return len(k.keys)
}

// usable waits for the first read of the keys to end, and says whether they
// may be used to verify, and to refuse, tokens: they were read
// successfully within keysMaxAge.
func (k *issuerKeys) usable(ctx context.Context) bool {
	select {
	case <-k.firstRead:
	case <-ctx.Done():
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.heldLocked()
}

// keyLookup is what the keys say of a key ID.
type keyLookup int

const (
	// keysUnusable: the keys could not be read; a review decides.
	keysUnusable keyLookup = iota
	// keyFound: the key is the API server's.
	keyFound
	// keyUnknown: the keys, read again lately and successfully, do not
	// have it: the token is not the API server's.
	keyUnknown
)

// lookup is the issuer and the key of ID kid. A key not held has the keys
// read again (the API server may have a new one), at most every
// keysRetryPeriod, and lookup waits for that read or the one in flight;
// while reads are paced, a key not held is unknown at once. So tokens
// naming made-up keys cost the API server two reads every
// keysRetryPeriod, however many there are.
func (k *issuerKeys) lookup(ctx context.Context, kid string) (string, jose.JSONWebKey, keyLookup) {
	for waited := false; ; waited = true {
		k.mu.Lock()
		held := k.heldLocked()
		key, ok := k.keys[kid]
		issuer, failed := k.issuer, k.failed
		var done chan struct{}
		mine := false
		if !(ok && held) && !waited && (k.reading != nil || k.clock.Now().Sub(k.tried) >= keysRetryPeriod) {
			done, mine = k.beginLocked()
		}
		k.mu.Unlock()
		switch {
		case ok && held:
			return issuer, key, keyFound
		case done != nil:
			if mine {
				go func() {
					k.end(done, k.load(context.WithoutCancel(ctx))) // bounded by keysReadTimeout
				}()
			}
			select {
			case <-done:
			case <-ctx.Done():
				return "", jose.JSONWebKey{}, keysUnusable
			}
		case held && !failed:
			return issuer, jose.JSONWebKey{}, keyUnknown
		default:
			return "", jose.JSONWebKey{}, keysUnusable
		}
	}
}

// ref is a bound object in a ServiceAccount token's kubernetes.io claim.
type ref struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// boundClaims are the kubernetes.io claim of a ServiceAccount token, as the
// API server writes them.
type boundClaims struct {
	Kubernetes struct {
		Namespace      string           `json:"namespace"`
		ServiceAccount ref              `json:"serviceaccount"`
		Pod            *ref             `json:"pod"`
		Node           *ref             `json:"node"`
		Secret         *ref             `json:"secret"`
		WarnAfter      *jwt.NumericDate `json:"warnafter"`
		// Tokens bound to webhook configurations carry more; a token with
		// any other bound object is reviewed.
		Validating *ref `json:"validatingwebhookconfiguration"`
		Mutating   *ref `json:"mutatingwebhookconfiguration"`
	} `json:"kubernetes.io"`
}

// apiServerLeeway is how far the API server lets a token's times be off
// (go-jose's jwt.DefaultLeeway, which it uses).
const apiServerLeeway = jwt.DefaultLeeway

// VerifyLocally authenticates token as the API server's TokenReview would,
// without asking it, once the hub holds the issuer's keys (until then, or
// when it cannot read them, it returns nil, nil: the token is reviewed). It
// returns:
//
//   - the identity, when everything checks: the signature against the
//     issuer's keys, the issuer, the hub's audience, the times (without the
//     API server's leeway), and, as the API server does for a token bound to
//     a Pod, that its ServiceAccount and its Pod still exist with the UIDs it
//     names and are not being deleted, here from the hub's caches;
//   - a refusal, when the token cannot be one the API server issued to a
//     LocalController Pod for the hub's audience, or was but is not valid
//     beyond doubt: not signed as the API server signs, signed with a key ID
//     it does not publish (after the keys are read again, paced) or by
//     another key, another issuer or audience, times wrong past the API
//     server's leeway, no Pod and node bound, a subject that is not its
//     ServiceAccount, a ServiceAccount not accepted. Such junk never reaches
//     a TokenReview: anyone who reaches the hub can send it;
//   - nil, nil whenever its answer could differ from the API server's: a
//     token near its times, a ServiceAccount or Pod its caches do not hold as
//     the token names them (the caches may lag). Only tokens the API server
//     signed get there, and a review decides.
func (a *Authenticator) VerifyLocally(ctx context.Context, token string) (*Identity, *Refusal) {
	if a.keys == nil || !a.keys.usable(ctx) {
		return nil, nil
	}
	parsed, err := jwt.ParseSigned(token, signingAlgorithms)
	if err != nil || len(parsed.Headers) != 1 {
		return nil, invalidToken("not signed as the API server signs ServiceAccount tokens")
	}
	header := parsed.Headers[0]
	issuer, key, found := a.keys.lookup(ctx, header.KeyID)
	switch found {
	case keysUnusable:
		return nil, nil
	case keyUnknown:
		return nil, invalidToken("signed with a key the API server does not publish")
	}
	if key.Algorithm != "" && key.Algorithm != header.Algorithm {
		return nil, invalidToken("signed with another algorithm than its key's")
	}
	var public jwt.Claims
	var private boundClaims
	if err := parsed.Claims(key.Key, &public, &private); err != nil {
		return nil, invalidToken("its signature does not verify")
	}
	if public.Issuer != issuer {
		return nil, invalidToken(fmt.Sprintf("issued by %q, not by the API server (%q)", edgeproto.Clip(public.Issuer, 256, "…"), issuer))
	}
	if !public.Audience.Contains(a.audience) {
		return nil, &Refusal{Status: http.StatusUnauthorized, Metric: RefusedWrongAudience,
			Reason: fmt.Sprintf("the token is not for the edge hub: the hub takes only tokens with audience %q (a projected ServiceAccount token)", a.audience)}
	}
	now := a.clock.Now()
	if public.Expiry == nil {
		return nil, invalidToken("it has no expiry")
	}
	if public.ValidateWithLeeway(jwt.Expected{Time: now}, apiServerLeeway) != nil {
		return nil, invalidToken("expired, or not valid yet")
	}
	k := private.Kubernetes
	subject := serviceAccountPrefix + k.Namespace + ":" + k.ServiceAccount.Name
	if k.Pod == nil || k.Node == nil || k.Secret != nil || k.Validating != nil || k.Mutating != nil ||
		k.Node.Name == "" || k.Pod.Name == "" || k.Pod.UID == "" {
		return nil, notBoundToPod(public.Subject)
	}
	if k.Namespace == "" || k.ServiceAccount.Name == "" || public.Subject != subject {
		return nil, invalidToken("its subject is not its ServiceAccount")
	}
	sa := k.Namespace + "/" + k.ServiceAccount.Name
	if !a.serviceAccounts[sa] {
		return nil, a.notLocalController(subject)
	}
	// No leeway here: a token near its times, or a clock apart from the API
	// server's, is reviewed.
	if public.ValidateWithLeeway(jwt.Expected{Time: now}, 0) != nil {
		return nil, nil
	}
	// Stricter than the API server: a ServiceAccount or Pod being deleted
	// is reviewed.
	account, ok := get[*corev1.ServiceAccount](a.accountCache, sa)
	if !ok || string(account.UID) != k.ServiceAccount.UID || account.DeletionTimestamp != nil {
		return nil, nil
	}
	pod, ok := get[*corev1.Pod](a.podCache, k.Namespace+"/"+k.Pod.Name)
	if !ok || string(pod.UID) != k.Pod.UID || pod.DeletionTimestamp != nil {
		return nil, nil
	}
	id := &Identity{
		Node: k.Node.Name, ServiceAccount: sa,
		Pod:               types.NamespacedName{Namespace: k.Namespace, Name: k.Pod.Name},
		PodUID:            types.UID(k.Pod.UID),
		ServiceAccountUID: account.UID,
		ByHub:             true,
	}
	// The earlier of exp and warnafter, as verified.
	id.Expires = public.Expiry.Time()
	if w := k.WarnAfter; w != nil && w.Time().Before(id.Expires) {
		id.Expires = w.Time()
	}
	return id, nil
}

// stores are caches of one kind, split by what each watches: an object is
// in one of them.
type stores []cache.Store

// get is the object of key in any of s, if it is of type T.
func get[T any](s stores, key string) (T, bool) {
	for _, store := range s {
		if t, ok := cached.Get[T](store, key); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}
