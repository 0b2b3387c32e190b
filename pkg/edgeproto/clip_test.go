package edgeproto

import (
	"testing"
	"unicode/utf8"
)

func TestClipCutsAtACharacterBoundaryWithinTheLimit(t *testing.T) {
	for _, tc := range []struct {
		s      string
		limit  int
		suffix string
		want   string
	}{
		{"short", 10, "…", "short"},
		{"exactly10!", 10, "…", "exactly10!"},
		{"abcdefghijkl", 10, "…", "abcdefg…"},  // 7 + 3 bytes
		{"abcdefghijkl", 10, "", "abcdefghij"}, // no suffix: the limit whole
		{"ééééé", 6, "", "ééé"},                // 2-byte runes: not half of one
		{"éééééé", 8, "…", "éé…"},              // 5 bytes left: 2 runes
		{"abcdefghijkl", 2, "…", "…"},          // no room but the suffix
		{"abcdefghijkl", 0, "…(truncated)", "…(truncated)"},
	} {
		got := Clip(tc.s, tc.limit, tc.suffix)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d, %q) = %q, want %q", tc.s, tc.limit, tc.suffix, got, tc.want)
		}
	}
}
