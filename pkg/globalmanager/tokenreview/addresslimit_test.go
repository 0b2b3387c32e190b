package tokenreview

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

// An address is blocked once it has been refused more than its share in a
// minute, for RefusalBlock; other addresses, and an IPv6 host's other
// /64s, are not.
func TestAnAddressRefusedTooOftenIsBlockedForAWhile(t *testing.T) {
	type blocked struct {
		After   int
		Blocked bool
	}
	cases := map[string]struct {
		perMinute int
		refused   []string      // refusals, in order, each from this remote address
		wait      time.Duration // then this long passes
		ask       string        // then: is this address blocked?
		want      blocked
	}{
		"within the limit": {perMinute: 3, refused: []string{"10.0.0.1:1", "10.0.0.1:2"}, ask: "10.0.0.1:4"},
		"at the limit, any port": {perMinute: 3, refused: []string{"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3"},
			ask: "10.0.0.1:5", want: blocked{After: 60, Blocked: true}},
		"at the limit, later in the block": {perMinute: 3, refused: []string{"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3"},
			wait: 45 * time.Second, ask: "10.0.0.1:5", want: blocked{After: 15, Blocked: true}},
		"at the limit, after the block": {perMinute: 3, refused: []string{"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3"},
			wait: RefusalBlock, ask: "10.0.0.1:5"},
		"another address": {perMinute: 3, refused: []string{"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3"}, ask: "10.0.0.2:1"},
		"the same IPv6 /64": {perMinute: 2, refused: []string{"[2001:db8:0:1::1]:1", "[2001:db8:0:1::2]:1"},
			ask: "[2001:db8:0:1:ffff::9]:7", want: blocked{After: 60, Blocked: true}},
		"another IPv6 /64": {perMinute: 2, refused: []string{"[2001:db8:0:1::1]:1", "[2001:db8:0:1::2]:1"}, ask: "[2001:db8:0:2::1]:1"},
		"an IPv4 address as IPv6": {perMinute: 2, refused: []string{"10.0.0.1:1", "[::ffff:10.0.0.1]:2"},
			ask: "10.0.0.1:3", want: blocked{After: 60, Blocked: true}},
		"no limit": {perMinute: -1, refused: []string{"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3"}, ask: "10.0.0.1:4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
			l := NewAddressLimiter(tc.perMinute, clk)
			for _, a := range tc.refused {
				l.Refused(a)
			}
			clk.SetTime(clk.Now().Add(tc.wait))
			var got blocked
			got.After, got.Blocked = l.Blocked(tc.ask)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
