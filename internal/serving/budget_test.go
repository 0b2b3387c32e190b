package serving

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nereid-ml/nereid/internal/testwait"
)

func TestABudgetHoldsNoMoreThanItsBytes(t *testing.T) {
	b := NewBudget(10)
	release6, err := b.Take(t.Context(), 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Take(t.Context(), 11); err == nil {
		t.Error("took 11 bytes of a budget of 10")
	}
	// 5 more do not fit while 6 are held: the taker waits until they are
	// given back.
	got := make(chan error, 1)
	go func() {
		release5, err := b.Take(t.Context(), 5)
		if err == nil {
			release5()
		}
		got <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Take(ctx, 5); err == nil {
		t.Fatal("took 5 bytes while 6 of 10 were held")
	}
	if used := b.Used(); used != 6 {
		t.Errorf("used %d, want 6 while the second taker waits", used)
	}
	release6()
	release6() // a second release gives nothing back twice
	if err := <-got; err != nil {
		t.Fatalf("the waiting taker: %v", err)
	}
	if used := b.Used(); used != 0 {
		t.Errorf("used %d after every release, want 0", used)
	}
}

func TestBodiesNeedALengthThatFitsAndRoomInTheBudget(t *testing.T) {
	const maxBody = 100
	b := NewBudget(150)
	var read []byte
	h := b.Bodies(maxBody, 50*time.Millisecond, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read, _ = io.ReadAll(r.Body)
	}))
	post := func(body io.Reader, length int64) int {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", body)
		r.ContentLength = length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	if code := post(strings.NewReader("x"), -1); code != http.StatusLengthRequired {
		t.Errorf("a body without a length: %d, want 411", code)
	}
	if code := post(strings.NewReader("x"), maxBody+1); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the bound: %d, want 413", code)
	}
	if code := post(bytes.NewReader(make([]byte, 80)), 80); code != http.StatusOK || len(read) != 80 {
		t.Errorf("a body that fits: %d, read %d bytes, want 200 and 80", code, len(read))
	}

	// A slow body of 100 bytes holds them: a second one of 100 finds no
	// room (503), one of 50 does.
	slow, feed := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- post(slow, maxBody) }()
	testwait.Eventually(t, 10*time.Second, "the slow body's bytes taken", func(context.Context) (bool, error) {
		return b.Used() == maxBody, nil
	})
	if code := post(bytes.NewReader(make([]byte, maxBody)), maxBody); code != http.StatusServiceUnavailable {
		t.Errorf("a second full body while one is read: %d, want 503", code)
	}
	if code := post(bytes.NewReader(make([]byte, 50)), 50); code != http.StatusOK {
		t.Errorf("a body that fits beside the slow one: %d, want 200", code)
	}
	if _, err := feed.Write(make([]byte, maxBody)); err != nil {
		t.Fatal(err)
	}
	_ = feed.Close()
	if code := <-done; code != http.StatusOK {
		t.Errorf("the slow body: %d, want 200", code)
	}
	if used := b.Used(); used != 0 {
		t.Errorf("used %d once every request ended, want 0", used)
	}
}
