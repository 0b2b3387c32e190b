package x

import "testing"

func TestLong(t *testing.T) {
	_ = 1
	_ = 2
	_ = 3
	_ = 4
}
