package edgeproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// MaxInventory is the most entries a Hello and its Inventory messages may
// list together: twice the 100,000 objects with the longest names a node has
// been tested with. The GM holds the whole inventory in memory (about half a
// KiB an entry with the longest names) until it has computed the difference,
// so it refuses a longer one instead of growing without bound.
const MaxInventory = 200_000

// ErrUnexpected: a message that is well formed but comes where the
// conversation does not allow it (an Inventory that continues no Hello, a
// Hello whose inventory is not followed by its continuation).
var ErrUnexpected = errors.New("unexpected message")

// EncodeHello returns the frames that say h: one frame when h fits in one,
// the usual case. Otherwise the first frame is a Hello with the first part
// of h.Inventory and More set, and Inventory frames with the rest follow,
// each as full as MaxFrameBytes allows, the last with More unset. The caller
// sends them in order with nothing in between. h.More is ignored; h is not
// changed. An inventory of more than MaxInventory entries, or one entry that
// does not fit in a frame on its own, is refused with ErrTooLarge.
func EncodeHello(h *Hello) ([][]byte, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil message", ErrMalformed)
	}
	if len(h.Inventory) > MaxInventory {
		return nil, fmt.Errorf("%w: an inventory of %d entries, the limit is %d", ErrTooLarge, len(h.Inventory), MaxInventory)
	}
	// One check of the whole inventory: the per-frame checks of Encode
	// cannot see a ref listed in two frames.
	if err := h.validate(); err != nil {
		return nil, malformed(TypeHello, err)
	}
	whole := *h
	whole.More = false
	if len(h.Inventory) == 0 {
		frame, err := Encode(&whole)
		if err != nil {
			return nil, err
		}
		return [][]byte{frame}, nil
	}

	// An entry's bytes on the wire are its JSON as Encode writes it, and
	// entries are separated by a comma; the rest of a frame is the same
	// whatever entries it carries, so it is measured once with a stand-in.
	sizes := make([]int, len(h.Inventory))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i, v := range h.Inventory {
		buf.Reset()
		if err := enc.Encode(v); err != nil {
			return nil, fmt.Errorf("encoding inventory[%d]: %w", i, err)
		}
		sizes[i] = buf.Len() - 1 // Encode's newline
	}
	standIn := ObjectVersion{ObjectRef: ObjectRef{"K", "n", "n"}, ResourceVersion: "1"}
	const standInSize = len(`{"kind":"K","namespace":"n","name":"n","resourceVersion":"1"}`)
	overhead := func(m Message) (int, error) {
		frame, err := Encode(m)
		if err != nil {
			return 0, err
		}
		return len(frame) - standInSize, nil
	}
	// Measured with More set, which only makes a frame longer: a frame that
	// turns out to be the last is a few bytes short of full.
	first := whole
	first.Inventory, first.More = []ObjectVersion{standIn}, true
	helloOverhead, err := overhead(&first)
	if err != nil {
		return nil, err
	}
	inventoryOverhead, err := overhead(&Inventory{Inventory: []ObjectVersion{standIn}, More: true})
	if err != nil {
		return nil, err
	}

	var frames [][]byte
	for start := 0; start < len(h.Inventory); {
		size := inventoryOverhead
		if start == 0 {
			size = helloOverhead
		}
		end := start
		for end < len(h.Inventory) {
			next := size + sizes[end]
			if end > start {
				next++ // the comma
			}
			if next > MaxFrameBytes {
				break
			}
			size = next
			end++
		}
		if end == start {
			return nil, fmt.Errorf("%w: inventory[%d] %s does not fit in a frame", ErrTooLarge, start, clip(h.Inventory[start].String()))
		}
		more := end < len(h.Inventory)
		var m Message = &Inventory{Inventory: h.Inventory[start:end], More: more}
		if start == 0 {
			part := whole
			part.Inventory, part.More = h.Inventory[start:end], more
			m = &part
		}
		frame, err := Encode(m)
		if err != nil {
			return nil, err
		}
		frames = append(frames, frame)
		start = end
	}
	return frames, nil
}

// HelloStream puts together a Hello sent in several frames. The receiver of
// a connection hands it every message from the first on, until Add returns
// the whole Hello; the zero value is ready to use.
type HelloStream struct {
	hello *Hello
	seen  map[ObjectRef]struct{}
	done  bool
}

// Add takes the next message of the connection. It returns the Hello, with
// the inventory of all its parts and More unset, once the last part is in;
// nil while more is to come. Its errors wrap ErrUnexpected (a first message
// that is not a Hello, anything but an Inventory while one is due, any
// message after the Hello is whole), ErrMalformed (a ref listed in two
// parts) or ErrTooLarge (more than MaxInventory entries); the connection
// cannot go on after any of them.
func (s *HelloStream) Add(m Message) (*Hello, error) {
	switch {
	case s.done:
		return nil, fmt.Errorf("%w: %s after the hello was whole", ErrUnexpected, m.Type())
	case s.hello == nil:
		h, ok := m.(*Hello)
		if !ok {
			return nil, fmt.Errorf("%w: the first message must be hello, not %s", ErrUnexpected, m.Type())
		}
		if len(h.Inventory) > MaxInventory {
			return nil, fmt.Errorf("%w: an inventory of more than %d entries", ErrTooLarge, MaxInventory)
		}
		if !h.More {
			s.done = true
			return h, nil
		}
		// The parts are appended to a copy: the caller's Hello stays as
		// it was.
		s.hello = &Hello{}
		*s.hello = *h
		s.hello.Inventory = slices.Clip(h.Inventory)
		// Decode has checked the Hello's own entries.
		s.seen = make(map[ObjectRef]struct{}, 2*len(h.Inventory))
		for _, v := range h.Inventory {
			s.seen[v.ObjectRef] = struct{}{}
		}
		return nil, nil
	}
	inv, ok := m.(*Inventory)
	if !ok {
		return nil, fmt.Errorf("%w: %s while the hello's inventory was due", ErrUnexpected, m.Type())
	}
	if len(s.hello.Inventory)+len(inv.Inventory) > MaxInventory {
		return nil, fmt.Errorf("%w: an inventory of more than %d entries", ErrTooLarge, MaxInventory)
	}
	if err := checkInventory(inv.Inventory, s.seen); err != nil {
		return nil, malformed(TypeInventory, err)
	}
	s.hello.Inventory = append(s.hello.Inventory, inv.Inventory...)
	if inv.More {
		return nil, nil
	}
	s.done, s.seen = true, nil
	s.hello.More = false
	return s.hello, nil
}
