package edgehub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
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
	now   func() time.Time

	mu      sync.Mutex
	issuer  string
	keys    map[string]jose.JSONWebKey // by key ID
	read    time.Time                  // the last successful read
	tried   time.Time                  // the last read begun, successful or not
	reading bool
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
func newIssuerKeys(client rest.Interface, now func() time.Time) *issuerKeys {
	if rc, ok := client.(*rest.RESTClient); !ok || rc == nil {
		return nil
	}
	return &issuerKeys{now: now, fetch: func(ctx context.Context, path string) ([]byte, error) {
		// The client may ask for protobuf; these are JSON documents.
		body, err := client.Get().AbsPath(path).SetHeader("Accept", "application/json, application/jwk-set+json").Stream(ctx)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		return io.ReadAll(io.LimitReader(body, maxKeySetBytes+1))
	}}
}

// signingAlgorithms are those of the keys the API server signs
// ServiceAccount tokens with (RSA and ECDSA).
var signingAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.ES256, jose.ES384, jose.ES512}

// load reads the discovery document and the key set. A key that cannot be
// parsed is left out, not the others.
func (k *issuerKeys) load(ctx context.Context) error {
	k.mu.Lock()
	k.tried = k.now()
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
	k.issuer, k.keys, k.read = config.Issuer, keys, k.now()
	k.mu.Unlock()
	return nil
}

// run reads the keys now and every keysRefreshPeriod until ctx ends. A
// failure is logged: tokens are then reviewed by the API server.
func (k *issuerKeys) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		if k.start() {
			err := k.load(ctx)
			k.done()
			if err != nil && ctx.Err() == nil {
				logger.Info("Cannot verify LocalController tokens here; each is sent to a TokenReview", "err", err)
			} else if err == nil {
				logger.V(2).Info("Read the ServiceAccount token issuer's keys", "issuer", k.issuerName())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(keysRefreshPeriod):
		}
	}
}

// start marks a read begun, unless one is.
func (k *issuerKeys) start() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.reading {
		return false
	}
	k.reading = true
	return true
}

func (k *issuerKeys) done() {
	k.mu.Lock()
	k.reading = false
	k.mu.Unlock()
}

func (k *issuerKeys) issuerName() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.issuer
}

// key is the issuer and the key of ID kid. A key not held has them read
// again in the background (the API server may have a new one), at most
// every keysRetryPeriod; keys older than keysMaxAge are not held.
func (k *issuerKeys) key(ctx context.Context, kid string) (string, jose.JSONWebKey, bool) {
	k.mu.Lock()
	key, ok := k.keys[kid]
	ok = ok && k.now().Sub(k.read) < keysMaxAge
	issuer := k.issuer
	stale := !ok && !k.reading && k.now().Sub(k.tried) >= keysRetryPeriod
	k.mu.Unlock()
	if stale && k.start() {
		go func() {
			defer k.done()
			_ = k.load(context.WithoutCancel(ctx)) // bounded by keysReadTimeout
		}()
	}
	return issuer, key, ok
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

// verifyLocally authenticates token as the API server's TokenReview would,
// without asking it: the signature against the issuer's keys, the issuer,
// the hub's audience, the times (without the API server's leeway), and, as the
// API server does for a token bound to a Pod, that its ServiceAccount and
// its Pod still exist with the UIDs it names and are not being deleted,
// here from the hub's caches. It returns nil whenever it cannot say yes (a
// key, ServiceAccount or Pod it does not hold, or anything that does not
// check): the token then goes to a TokenReview, which decides. So it only
// ever saves the review of a token the review would accept.
func (a *authenticator) verifyLocally(ctx context.Context, token string) *identity {
	if a.keys == nil {
		return nil
	}
	parsed, err := jwt.ParseSigned(token, signingAlgorithms)
	if err != nil || len(parsed.Headers) != 1 || parsed.Headers[0].KeyID == "" {
		return nil
	}
	issuer, key, ok := a.keys.key(ctx, parsed.Headers[0].KeyID)
	if !ok || (key.Algorithm != "" && key.Algorithm != parsed.Headers[0].Algorithm) {
		return nil
	}
	var public jwt.Claims
	var private boundClaims
	if err := parsed.Claims(key.Key, &public, &private); err != nil {
		return nil
	}
	// No leeway: a token near its times, or a clock apart from the API
	// server's, is reviewed.
	now := a.now()
	if public.Expiry == nil ||
		public.ValidateWithLeeway(jwt.Expected{Issuer: issuer, AnyAudience: jwt.Audience{a.audience}, Time: now}, 0) != nil {
		return nil
	}
	k := private.Kubernetes
	if k.Pod == nil || k.Node == nil || k.Secret != nil || k.Validating != nil || k.Mutating != nil ||
		k.Node.Name == "" || k.Pod.Name == "" || k.Pod.UID == "" {
		return nil
	}
	sa := k.Namespace + "/" + k.ServiceAccount.Name
	if !a.serviceAccounts[sa] || public.Subject != serviceAccountPrefix+k.Namespace+":"+k.ServiceAccount.Name {
		return nil
	}
	// Stricter than the API server: a ServiceAccount or Pod being deleted
	// is reviewed.
	account, ok := get[*corev1.ServiceAccount](a.accountCache, sa)
	if !ok || string(account.UID) != k.ServiceAccount.UID || account.DeletionTimestamp != nil {
		return nil
	}
	pod, ok := get[*corev1.Pod](a.podCache, k.Namespace+"/"+k.Pod.Name)
	if !ok || string(pod.UID) != k.Pod.UID || pod.DeletionTimestamp != nil {
		return nil
	}
	id := &identity{
		node: k.Node.Name, serviceAccount: sa,
		pod:               types.NamespacedName{Namespace: k.Namespace, Name: k.Pod.Name},
		podUID:            types.UID(k.Pod.UID),
		serviceAccountUID: account.UID,
		byHub:             true,
	}
	// The earlier of exp and warnafter, as verified.
	id.expires = public.Expiry.Time()
	if w := k.WarnAfter; w != nil && w.Time().Before(id.expires) {
		id.expires = w.Time()
	}
	return id
}

// cachedObject is the object of key in store, if it holds one of type T.
func cachedObject[T any](store cache.Store, key string) (T, bool) {
	var zero T
	o, ok, err := store.GetByKey(key)
	if err != nil || !ok {
		return zero, false
	}
	t, ok := o.(T)
	if !ok {
		return zero, false
	}
	return t, true
}

// stores are caches of one kind, split by what each watches: an object is
// in one of them.
type stores []cache.Store

// get is the object of key in any of s, if it is of type T.
func get[T any](s stores, key string) (T, bool) {
	for _, store := range s {
		if t, ok := cachedObject[T](store, key); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}
