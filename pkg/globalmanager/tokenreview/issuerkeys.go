package tokenreview

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// The API server's OpenID discovery document and key set (served to every
// ServiceAccount by the default binding system:service-account-issuer-discovery).
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// IssuerKeys are the API server's ServiceAccount token issuer and the public
// keys its tokens are verified with, read from its discovery document and
// key set: again every KeysRefreshPeriod, and at most every
// KeysRetryPeriod when a token names a key not held. Keys not read again
// successfully within KeysMaxAge are not used: a key the API server has
// dropped verifies nothing here for long.
type IssuerKeys struct {
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
	KeysRefreshPeriod = time.Minute
	KeysMaxAge        = 3 * KeysRefreshPeriod
	KeysRetryPeriod   = 10 * time.Second
	// keysReadTimeout bounds one read of both documents.
	keysReadTimeout = 30 * time.Second
	// maxKeySetBytes bounds what is read of either document.
	maxKeySetBytes = 1 << 20
)

// NewIssuerKeys are the keys of the API server client talks to; nil when
// client cannot read them (a fake clientset's). Run reads them.
func NewIssuerKeys(client rest.Interface, clk clock.Clock) *IssuerKeys {
	if rc, ok := client.(*rest.RESTClient); !ok || rc == nil {
		return nil
	}
	return NewIssuerKeysFrom(func(ctx context.Context, path string) ([]byte, error) {
		// The client may ask for protobuf; these are JSON documents.
		body, err := client.Get().AbsPath(path).SetHeader("Accept", "application/json, application/jwk-set+json").Stream(ctx)
		if err != nil {
			return nil, err
		}
		defer body.Close()
		return io.ReadAll(io.LimitReader(body, maxKeySetBytes+1))
	}, clk)
}

// NewIssuerKeysFrom are the keys fetch reads (a path of the API server).
func NewIssuerKeysFrom(fetch func(ctx context.Context, path string) ([]byte, error), clk clock.Clock) *IssuerKeys {
	return &IssuerKeys{fetch: fetch, clock: clk, firstRead: make(chan struct{})}
}

// load reads the discovery document and the key set. A key that cannot be
// parsed is left out, not the others.
func (k *IssuerKeys) load(ctx context.Context) error {
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
	if err := get(OpenIDConfigPath, &config); err != nil {
		return err
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := get(JWKSPath, &set); err != nil {
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

// Run reads the keys now and every KeysRefreshPeriod until ctx ends. A
// failure is logged: tokens are then reviewed by the API server.
func (k *IssuerKeys) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for {
		if done, mine := k.begin(); mine {
			err := k.load(ctx)
			k.end(done, err)
			if err != nil && ctx.Err() == nil {
				logger.Info("Cannot verify ServiceAccount tokens here; each is sent to a TokenReview", "err", err)
			} else if err == nil {
				logger.V(2).Info("Read the ServiceAccount token issuer's keys", "issuer", k.Issuer())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(KeysRefreshPeriod):
		}
	}
}

// ReadNow reads the keys, or waits for the read in flight.
func (k *IssuerKeys) ReadNow(ctx context.Context) error {
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
func (k *IssuerKeys) begin() (done chan struct{}, mine bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.beginLocked()
}

func (k *IssuerKeys) beginLocked() (chan struct{}, bool) {
	if k.reading != nil {
		return k.reading, false
	}
	k.reading = make(chan struct{})
	return k.reading, true
}

// end marks the read begun with done ended with err.
func (k *IssuerKeys) end(done chan struct{}, err error) {
	k.mu.Lock()
	k.failed = err != nil
	if k.reading == done {
		k.reading = nil
	}
	k.mu.Unlock()
	close(done)
	k.firstReadOnce.Do(func() { close(k.firstRead) })
}

// Issuer is the issuer the discovery document names, "" until read.
func (k *IssuerKeys) Issuer() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.issuer
}

// heldLocked says whether the keys may be used (read successfully within
// KeysMaxAge); k.mu is held.
func (k *IssuerKeys) heldLocked() bool {
	return len(k.keys) > 0 && k.clock.Now().Sub(k.read) < KeysMaxAge
}

// Count is how many keys are held, 0 when they may not be used.
func (k *IssuerKeys) Count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.heldLocked() {
		return 0
	}
	return len(k.keys)
}

// Usable waits for the first read of the keys to end, and says whether they
// may be used to verify, and to refuse, tokens: they were read
// successfully within KeysMaxAge.
func (k *IssuerKeys) Usable(ctx context.Context) bool {
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
// KeysRetryPeriod, and lookup waits for that read or the one in flight;
// while reads are paced, a key not held is unknown at once. So tokens
// naming made-up keys cost the API server two reads every
// KeysRetryPeriod, however many there are.
func (k *IssuerKeys) lookup(ctx context.Context, kid string) (string, jose.JSONWebKey, keyLookup) {
	for waited := false; ; waited = true {
		k.mu.Lock()
		held := k.heldLocked()
		key, ok := k.keys[kid]
		issuer, failed := k.issuer, k.failed
		var done chan struct{}
		mine := false
		if !(ok && held) && !waited && (k.reading != nil || k.clock.Now().Sub(k.tried) >= KeysRetryPeriod) {
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
