package tokenreview

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func newClock() *clocktesting.FakePassiveClock {
	return clocktesting.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
}

func TestAnOutcomeIsKeptForTheTTL(t *testing.T) {
	clk := newClock()
	c := NewCache[string](10*time.Second, 10, clk)
	c.Put("token", "alice", time.Time{})
	clk.SetTime(clk.Now().Add(10*time.Second - time.Nanosecond))
	if got, ok := c.Get("token"); !ok || got != "alice" {
		t.Errorf("just before the TTL: %q, %v; want alice", got, ok)
	}
	if _, ok := c.Get("other"); ok {
		t.Error("a token never put is found")
	}
	clk.SetTime(clk.Now().Add(time.Nanosecond))
	if got, ok := c.Get("token"); ok {
		t.Errorf("at the TTL: %q is still found", got)
	}
}

func TestAnOutcomeIsKeptNoLongerThanItsTokensExpiry(t *testing.T) {
	none := time.Duration(-1 << 63)
	cases := map[string]struct {
		expires   time.Duration // from when it is put; none: no expiry
		wantUntil time.Duration // found before it, not at it; 0: not kept
	}{
		"no expiry":              {expires: none, wantUntil: 10 * time.Second},
		"expires after the TTL":  {expires: time.Hour, wantUntil: 10 * time.Second},
		"expires within the TTL": {expires: 3 * time.Second, wantUntil: 3 * time.Second},
		"expires as it is put":   {expires: 0},
		"expired already":        {expires: -time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := newClock()
			start := clk.Now()
			c := NewCache[string](10*time.Second, 10, clk)
			var expires time.Time
			if tc.expires != none {
				expires = start.Add(tc.expires)
			}
			c.Put("token", "alice", expires)
			if tc.wantUntil == 0 {
				if _, ok := c.Get("token"); ok || c.Len() != 0 {
					t.Errorf("an outcome stale when put is kept (%d entries)", c.Len())
				}
				return
			}
			clk.SetTime(start.Add(tc.wantUntil - time.Nanosecond))
			if _, ok := c.Get("token"); !ok {
				t.Errorf("not found %s after it was put, want it until %s", tc.wantUntil-time.Nanosecond, tc.wantUntil)
			}
			clk.SetTime(start.Add(tc.wantUntil))
			if _, ok := c.Get("token"); ok {
				t.Errorf("found %s after it was put, want it gone then", tc.wantUntil)
			}
		})
	}
}

func TestACacheWithoutTTLKeepsNothing(t *testing.T) {
	for _, ttl := range []time.Duration{0, -1} {
		c := NewCache[string](ttl, 10, nil)
		c.Put("token", "alice", time.Time{})
		if _, ok := c.Get("token"); ok || c.Len() != 0 {
			t.Errorf("TTL %s: the outcome was kept", ttl)
		}
	}
}

// A flood of new tokens costs the cache its hits, never its bound; the
// stale entries go first.
func TestTheCacheKeepsItsBoundDroppingStaleEntriesFirst(t *testing.T) {
	clk := newClock()
	c := NewCache[int](10*time.Second, 3, clk)
	c.Put("old", 0, time.Time{})
	clk.SetTime(clk.Now().Add(5 * time.Second))
	c.Put("a", 1, time.Time{})
	c.Put("b", 2, time.Time{})
	clk.SetTime(clk.Now().Add(6 * time.Second)) // "old" is stale, a and b are not
	c.Put("c", 3, time.Time{})
	for _, token := range []string{"a", "b", "c"} {
		if _, ok := c.Get(token); !ok {
			t.Errorf("fresh token %s was dropped while a stale one could go", token)
		}
	}
	for i := range 100 {
		c.Put(fmt.Sprint("flood-", i), i, time.Time{})
		if n := c.Len(); n > 3 {
			t.Fatalf("the cache holds %d entries, more than its bound 3", n)
		}
	}
}

func TestDeleteFuncAndClearDropOutcomes(t *testing.T) {
	c := NewCache[string](time.Minute, 10, nil)
	for _, who := range []string{"alice", "bob", "carol"} {
		c.Put("token-"+who, who, time.Time{})
	}
	c.DeleteFunc(func(who string) bool { return who == "bob" })
	if _, ok := c.Get("token-bob"); ok {
		t.Error("bob's outcome is kept after DeleteFunc chose it")
	}
	if _, ok := c.Get("token-alice"); !ok {
		t.Error("alice's outcome was dropped by a DeleteFunc that did not choose it")
	}
	c.Clear()
	if n := c.Len(); n != 0 {
		t.Errorf("%d outcomes after Clear", n)
	}
}
