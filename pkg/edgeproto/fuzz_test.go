package edgeproto

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecode checks that Decode never panics, that each of its errors is of
// exactly one kind and short enough to log, and that a frame it accepts
// survives Encode and Decode again unchanged: what one end decodes, it can
// forward or resend.
func FuzzDecode(f *testing.F) {
	for _, tc := range goldenMessages {
		f.Add([]byte(tc.frame))
	}
	for _, frame := range []string{
		``,
		`null`,
		`{}`,
		`{"v":2,"type":"synced","payload":{}}`,
		`{"v":1,"type":"bogus","payload":{}}`,
		`{"v":1,"type":"hello","payload":[]}`,
		`{"v":1,"type":"hello","payload":{"node":"n","store":"s","inventory":[{"kind":"K","namespace":"ns","name":"a","resourceVersion":"1"},{"kind":"K","namespace":"ns","name":"a","resourceVersion":"2"}]}}`,
		`{"v":1,"type":"hello","payload":{"node":"n","store":"\u2028"}}`,
		`{"v":1,"type":"hello","payload":{"node":"n"}}`,
		`{"v":1,"type":"hello","payload":{"node":"n","store":"s","more":true}}`,
		`{"v":1,"type":"inventory","payload":{"inventory":[{"kind":"K","namespace":"ns","name":"a","resourceVersion":"1"}],"more":false}}`,
		`{"v":1,"type":"inventory","payload":{"inventory":null,"more":true}}`,
		`{"v":1,"type":"upsert","payload":{"kind":"K","namespace":"ns","name":"n","resourceVersion":"1","object":{"metadata":{"name":"n","namespace":"ns","resourceVersion":"1"},"s":"\u003c\u2028\ud800"}}}`,
		`{"v":1,"type":"report","payload":{"id":1,"worker":"w","body":{"a":[1e400]},"receivedAt":"2025-03-01T12:00:00+23:59"}}`,
		`{"v":1,"type":"reportAck","payload":{"ids":[1],"refused":[{"id":1,"reason":"\xff"}]}}`,
		`{"V":1,"TYPE":"heartbeat","Payload":{"Time":"0000-01-01T00:00:00+01:00"}}`,
	} {
		f.Add([]byte(frame))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := Decode(frame)
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned a message with its error %v", err)
			}
			kinds := 0
			for _, kind := range errKinds {
				if errors.Is(err, kind) {
					kinds++
				}
			}
			if kinds != 1 {
				t.Fatalf("Decode error %q is of %d of the error kinds, want exactly 1", err, kinds)
			}
			if len(err.Error()) > 1024 {
				t.Fatalf("Decode error is %d bytes long", len(err.Error()))
			}
			return
		}
		again, err := Encode(m)
		if errors.Is(err, ErrTooLarge) && len(frame) > MaxFrameBytes/8 {
			// Re-encoding may lengthen strings (U+2028 becomes \u2028), so a
			// large frame may outgrow the limit; a small one may not.
			return
		}
		if err != nil {
			t.Fatalf("Encode(Decode(%q)): %v", frame, err)
		}
		got, err := Decode(again)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %q: %v", frame, again, err)
		}
		if diff := cmp.Diff(m, got); diff != "" {
			t.Fatalf("Decode(Encode(Decode(%q))) (-want,+got):\n%s", frame, diff)
		}
	})
}

// FuzzHelloStream feeds a HelloStream the frames of its input (one a line),
// as the GM's reader does, and checks that it never panics, that each of its
// errors is of exactly one of the kinds it documents, and that a Hello it
// puts together survives EncodeHello and HelloStream again unchanged.
func FuzzHelloStream(f *testing.F) {
	for _, frames := range []string{
		`{"v":1,"type":"hello","payload":{"node":"n"}}`,
		`{"v":1,"type":"hello","payload":{"node":"n","inventory":[{"kind":"K","namespace":"ns","name":"a","resourceVersion":"1"}],"more":true}}` + "\n" +
			`{"v":1,"type":"inventory","payload":{"inventory":[{"kind":"K","namespace":"ns","name":"b","resourceVersion":"1"}],"more":true}}` + "\n" +
			`{"v":1,"type":"inventory","payload":{"inventory":[{"kind":"K","namespace":"ns","name":"c","resourceVersion":"2"}]}}`,
		`{"v":1,"type":"hello","payload":{"node":"n","more":true}}` + "\n" +
			`{"v":1,"type":"inventory","payload":{"inventory":[{"kind":"K","namespace":"ns","name":"a","resourceVersion":"1"},{"kind":"K","namespace":"ns","name":"a","resourceVersion":"1"}]}}`,
		`{"v":1,"type":"inventory","payload":{"inventory":[{"kind":"K","namespace":"ns","name":"a","resourceVersion":"1"}]}}`,
		`{"v":1,"type":"hello","payload":{"node":"n"}}` + "\n" + `{"v":1,"type":"heartbeat","payload":{"time":"2025-03-01T12:00:00Z"}}`,
	} {
		f.Add([]byte(frames))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		var (
			s     HelloStream
			hello *Hello
		)
		for _, frame := range bytes.Split(input, []byte("\n")) {
			m, err := Decode(frame)
			if err != nil {
				return // FuzzDecode's business
			}
			h, err := s.Add(m)
			if err != nil {
				if h != nil {
					t.Fatalf("Add returned a hello with its error %v", err)
				}
				kinds := 0
				for _, kind := range []error{ErrUnexpected, ErrMalformed, ErrTooLarge} {
					if errors.Is(err, kind) {
						kinds++
					}
				}
				if kinds != 1 {
					t.Fatalf("Add error %q is of %d of the error kinds, want exactly 1", err, kinds)
				}
				return
			}
			if h != nil {
				hello = h
			}
		}
		if hello == nil {
			return
		}
		frames, err := EncodeHello(hello)
		if err != nil {
			t.Fatalf("EncodeHello(%+v): %v", hello, err)
		}
		var again HelloStream
		var got *Hello
		for _, frame := range frames {
			m, err := Decode(frame)
			if err != nil {
				t.Fatalf("Decode(EncodeHello(…)): %v", err)
			}
			if got, err = again.Add(m); err != nil {
				t.Fatalf("Add(EncodeHello(…)): %v", err)
			}
		}
		if diff := cmp.Diff(hello, got); diff != "" {
			t.Fatalf("the hello after EncodeHello and HelloStream (-want,+got):\n%s", diff)
		}
	})
}
