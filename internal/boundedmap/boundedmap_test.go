package boundedmap

import "testing"

func TestMakeRoomDropsStaleFirstThenWhatItMust(t *testing.T) {
	m := map[int]bool{1: true, 2: false, 3: true, 4: false} // true: stale
	MakeRoom(m, 4, func(stale bool) bool { return stale })
	if len(m) != 2 {
		t.Fatalf("after dropping the stale: %v, want the 2 fresh entries", m)
	}
	if _, ok := m[1]; ok {
		t.Errorf("a stale entry kept: %v", m)
	}
	m = map[int]bool{1: false, 2: false, 3: false}
	MakeRoom(m, 3, func(stale bool) bool { return stale })
	if len(m) != 2 {
		t.Errorf("a full map of fresh entries has %d after MakeRoom, want 2 (room for one)", len(m))
	}
	m = map[int]bool{1: true}
	MakeRoom(m, 3, func(stale bool) bool { return stale })
	if len(m) != 1 {
		t.Errorf("a map with room lost entries: %v", m)
	}
}
