package x

// six is one line over.
func six() {
	_ = 1
	_ = 2
	_ = 3
	_ = 4
}

// five is at the limit.
func five() {
	_ = 1
	_ = 2
	_ = 3
}

func (t *T) method() {
	_ = 1
	_ = 2
	_ = 3
	_ = 4
	_ = 5
}

func (g G[K]) generic() {
	_ = 1
	_ = 2
	_ = 3
	_ = 4
}

type T struct{}

type G[K any] struct{}
