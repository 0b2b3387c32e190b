package serving

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// A Budget bounds the bytes of request bodies a server holds at once, so
// that many clients each sending a body of the largest size allowed cannot
// together take more memory than the process has. A request declares its
// size (Content-Length) and waits for that many bytes to be free before its
// body is read.
type Budget struct {
	max int64

	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed, and replaced, whenever bytes are given back
}

// NewBudget is a Budget of max bytes.
func NewBudget(max int64) *Budget {
	return &Budget{max: max, freed: make(chan struct{})}
}

// Take waits until n bytes are free and takes them; release gives them
// back. It fails at once for n over the whole budget, and when ctx ends
// before the bytes are free.
func (b *Budget) Take(ctx context.Context, n int64) (release func(), err error) {
	if n > b.max {
		return nil, fmt.Errorf("%d bytes is more than the whole budget of %d", n, b.max)
	}
	for {
		b.mu.Lock()
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { b.give(n) }) }, nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %d bytes of %d held by other requests: %w", n, b.max, context.Cause(ctx))
		}
	}
}

// Used is how many bytes are taken now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *Budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// Bodies serves next only requests whose declared body fits maxBody and,
// waiting at most wait, the budget: a request without a Content-Length is
// answered 411, one over maxBody 413, one that finds no room in time 503
// with Retry-After. The body next reads is cut at maxBody.
func (b *Budget) Bodies(maxBody int64, wait time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ContentLength < 0:
			http.Error(w, "a body needs a Content-Length here", http.StatusLengthRequired)
			return
		case r.ContentLength > maxBody:
			http.Error(w, fmt.Sprintf("a body of %d bytes is over the %d allowed", r.ContentLength, maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		release, err := b.Take(ctx, r.ContentLength)
		cancel()
		if err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(wait/time.Second))))
			http.Error(w, "too many bodies being read at once: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer release()
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}
