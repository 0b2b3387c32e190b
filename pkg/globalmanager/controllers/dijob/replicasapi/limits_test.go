package replicasapi

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReviewsForCallersNotYetAuthorizedAreRateLimited: a flood of made-up
// tokens costs the GlobalManager's client, which every controller shares, at
// most the reviews' rate; a token reviewed already is still answered from
// the cache.
func TestReviewsForCallersNotYetAuthorizedAreRateLimited(t *testing.T) {
	// One review at once, then one per 10 s: longer than a request waits.
	f := newFixture(t, Config{MaxReviewsPerSecond: 0.1}, newJob(testJob))
	if a := f.do(http.MethodGet, replicasPath(testJob), "made-up-1", ""); a.status != http.StatusUnauthorized {
		t.Fatalf("the first made-up token: %d, want 401", a.status)
	}
	start := time.Now()
	a := f.do(http.MethodGet, replicasPath(testJob), "made-up-2", "")
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Errorf("a second made-up token past the rate: %d (Retry-After %q), want 503 with Retry-After", a.status, a.header.Get("Retry-After"))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refusal took %s: a turn that cannot come in time is refused at once", took)
	}
	if a := f.do(http.MethodGet, replicasPath(testJob), "made-up-1", ""); a.status != http.StatusUnauthorized {
		t.Errorf("the first token again, from the cache: %d, want 401", a.status)
	}
	if n := f.reviewCount(); n != 1 {
		t.Errorf("%d TokenReviews, want 1", n)
	}
}

// TestAWorkersPodReadIsRateLimited: any pod's token may name a pod that the
// lister (Nereid's pods only) does not have; reading it from the API server
// takes a turn, and without one the answer is 503, not 403.
func TestAWorkersPodReadIsRateLimited(t *testing.T) {
	job := newJob(testJob)
	worker := newPod(job, "collector", 0, 1, "10.0.0.2")
	f := newFixture(t, Config{MaxReviewsPerSecond: 0.1}, job) // the pod is not in the lister
	if _, err := f.kube.CoreV1().Pods(testNS).Create(t.Context(), worker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The TokenReview takes the one turn; the pod's read finds none.
	a := f.do(http.MethodGet, replicasPath(testJob), podToken(worker), "")
	if a.status != http.StatusServiceUnavailable {
		t.Errorf("a worker whose pod cannot be read for want of a turn: %d %q, want 503", a.status, a.body.Message)
	}
	if n := f.sarCount(); n != 0 {
		t.Errorf("%d SubjectAccessReviews, want none: the worker is not decided on without its pod", n)
	}
}

func TestWritesAreRateLimited(t *testing.T) {
	f := newFixture(t, Config{MaxWritesPerSecond: 0.1}, newJob(testJob))
	if a := f.do(http.MethodPost, replicasPath(testJob), "admin", `{"replicas": 1}`); a.status != http.StatusOK {
		t.Fatalf("the first scale: %d %q", a.status, a.body.Message)
	}
	if a := f.do(http.MethodPost, profilingsPath(testJob), "admin", `{"data": {"a": 1}}`); a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Errorf("a write past the rate: %d (Retry-After %q), want 503 with Retry-After", a.status, a.header.Get("Retry-After"))
	}
	if got := f.job(testJob).Status.Profilings; got != nil {
		t.Errorf("profilings written past the rate: %s", got.Raw)
	}
	if a := f.do(http.MethodGet, replicasPath(testJob), "admin", ""); a.status != http.StatusOK {
		t.Errorf("a read past the rate of writes: %d, want 200", a.status)
	}
}

// blockingAuthenticator holds every request until released.
type blockingAuthenticator struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingAuthenticator) Authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &authenticationv1.UserInfo{Username: "alice"}, nil
}

// TestRequestsInFlightAreBoundedOverHTTP2: over TLS, one connection carries
// many HTTP/2 requests at once, which the bound on connections does not
// bound; past MaxRequestsInFlight a request is answered 503 at once.
func TestRequestsInFlightAreBoundedOverHTTP2(t *testing.T) {
	authn := &blockingAuthenticator{entered: make(chan struct{}, 8), release: make(chan struct{})}
	f := newFixture(t, Config{MaxRequestsInFlight: 2, Authenticator: authn}, newJob(testJob))
	cert, pool := selfSigned(t)
	addr, _, _ := serve(t, f, &tls.Config{Certificates: []tls.Certificate{cert}})
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true, MaxConnsPerHost: 1,
	}}
	get := func() (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+replicasPath(testJob), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer admin")
		return client.Do(req)
	}
	var wg sync.WaitGroup
	held := make(chan int, 2)
	for range 2 {
		wg.Go(func() {
			resp, err := get()
			if err != nil {
				t.Errorf("a request in flight: %v", err)
				return
			}
			resp.Body.Close()
			held <- resp.ProtoMajor
		})
	}
	for range 2 {
		select {
		case <-authn.entered:
		case <-time.After(5 * time.Second):
			t.Fatal("two requests did not reach the handler")
		}
	}
	resp, err := get()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a third request while two are in flight: HTTP/%d %d, want HTTP/2 503", resp.ProtoMajor, resp.StatusCode)
	}
	close(authn.release)
	wg.Wait()
	close(held)
	for proto := range held {
		if proto != 2 {
			t.Errorf("a request in flight went over HTTP/%d, want HTTP/2 (one connection)", proto)
		}
	}
}
