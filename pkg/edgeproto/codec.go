package edgeproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Version is the protocol version this package speaks.
const Version = 1

// MaxFrameBytes is the largest frame a LocalController sends, and so the most
// the GlobalManager reads from one (edge nodes are the less trusted end), and
// the largest frame of any type but Upsert.
const MaxFrameBytes = 1 << 20

// MaxObjectFrameBytes is the largest Upsert, the most a LocalController reads
// from the GlobalManager: an object of any size the API server stores (etcd's
// default request limit is 1.5 MiB) fits, as JSON, with room to spare.
const MaxObjectFrameBytes = 4 << 20

// maxFrame is the largest frame of type t.
func maxFrame(t Type) int {
	if t == TypeUpsert {
		return MaxObjectFrameBytes
	}
	return MaxFrameBytes
}

// The kinds of error Decode and Encode return; test with errors.Is. The
// error's text says what was wrong, clipped so it can be logged as is.
var (
	// ErrTooLarge: the frame is over MaxFrameBytes (MaxObjectFrameBytes for
	// an Upsert).
	ErrTooLarge = errors.New("frame too large")
	// ErrUnknownVersion: the envelope's v is not Version. The text has the
	// version seen.
	ErrUnknownVersion = errors.New("unknown protocol version")
	// ErrUnknownType: the envelope's type is not one of this package's Types.
	ErrUnknownType = errors.New("unknown message type")
	// ErrMalformed: not UTF-8 JSON, not an envelope, or a payload that is not
	// an object, has a field of the wrong JSON type, or lacks or contradicts a
	// required field.
	ErrMalformed = errors.New("malformed message")
)

// envelope is the outer object of every frame. Decode reads its fields as raw
// JSON so that a frame of another version is reported as such even when the
// rest of its shape has changed.
type envelope struct {
	V       json.RawMessage `json:"v"`
	Type    json.RawMessage `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// Encode validates m as Decode would and returns its frame.
func Encode(m Message) ([]byte, error) {
	if m == nil || reflect.ValueOf(m).IsNil() {
		return nil, fmt.Errorf("%w: nil message", ErrMalformed)
	}
	t := m.Type()
	if err := m.validate(); err != nil {
		return nil, malformed(t, err)
	}
	frame, err := Marshal(struct {
		V       int     `json:"v"`
		Type    Type    `json:"type"`
		Payload Message `json:"payload"`
	}{Version, t, m})
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", t, err)
	}
	if limit := maxFrame(t); len(frame) > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, t, len(frame), limit)
	}
	return frame, nil
}

// Marshal is json.Marshal without escaping <, > and &: frames carry objects
// and worker bodies as they are, and the escapes (six bytes for one) only
// make them longer.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Decode parses one frame. It checks, in order, the size, the encoding
// (UTF-8), the JSON, the version, the type, and the payload's required fields,
// and returns the first problem as an error wrapping ErrTooLarge, ErrMalformed,
// ErrUnknownVersion or ErrUnknownType. Unknown fields are ignored; field names match as in
// encoding/json (case-insensitively).
//
// The message it returns is canonical: raw JSON (Upsert.Object, Report.Body)
// is compacted and empty optional lists are nil, so Decode(Encode(m)) equals m
// for any m Decode returned.
func Decode(frame []byte) (Message, error) {
	if len(frame) > MaxObjectFrameBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(frame), MaxObjectFrameBytes)
	}
	// JSON text is UTF-8 (RFC 8259), which also lets frames go as websocket
	// text messages; encoding/json would otherwise pass invalid bytes through
	// inside Upsert.Object and Report.Body.
	if !utf8.Valid(frame) {
		return nil, fmt.Errorf("%w: frame is not valid UTF-8", ErrMalformed)
	}
	var env envelope
	if err := json.Unmarshal(frame, &env); err != nil {
		if _, ok := err.(*json.UnmarshalTypeError); ok {
			return nil, fmt.Errorf("%w: frame is not a JSON object", ErrMalformed)
		}
		return nil, fmt.Errorf("%w: %s", ErrMalformed, clip(err.Error()))
	}
	if !isObject(frame) { // null unmarshals into a struct without error
		return nil, fmt.Errorf("%w: frame is not a JSON object", ErrMalformed)
	}

	if env.V == nil {
		return nil, fmt.Errorf("%w: v is required", ErrMalformed)
	}
	v, err := strconv.ParseInt(string(env.V), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: v %s is not an integer", ErrMalformed, clip(string(env.V)))
	}
	if v != Version {
		return nil, fmt.Errorf("%w %d (this end speaks %d)", ErrUnknownVersion, v, Version)
	}

	var t Type
	if env.Type == nil {
		return nil, fmt.Errorf("%w: type is required", ErrMalformed)
	}
	if err := json.Unmarshal(env.Type, &t); err != nil {
		return nil, fmt.Errorf("%w: type %s is not a string", ErrMalformed, clip(string(env.Type)))
	}
	if t == "" {
		return nil, fmt.Errorf("%w: type is required", ErrMalformed)
	}
	m := newMessage(t)
	if m == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownType, clip(string(t)))
	}
	if limit := maxFrame(t); len(frame) > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, t, len(frame), limit)
	}

	if env.Payload == nil {
		return nil, malformed(t, errors.New("payload is required"))
	}
	if !isObject(env.Payload) {
		return nil, malformed(t, errors.New("payload is not a JSON object"))
	}
	if err := json.Unmarshal(env.Payload, m); err != nil {
		return nil, malformed(t, errors.New(describeJSONError(err)))
	}
	if err := m.validate(); err != nil {
		return nil, malformed(t, err)
	}
	if n, ok := m.(interface{ normalize() }); ok {
		n.normalize()
	}
	return m, nil
}

// malformed wraps a payload problem of a message of type t in ErrMalformed.
// The problem's text is already clipped where it repeats the peer's input.
func malformed(t Type, err error) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, t, err.Error())
}

// describeJSONError says what a json.Unmarshal error says, naming the field by
// its JSON path instead of the Go type that holds it.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// Field is a dotted path that also names the embedded structs, which
		// are not on the wire.
		var path []string
		for _, p := range strings.Split(te.Field, ".") {
			if p != "" && p != "ObjectRef" && p != "ObjectVersion" {
				path = append(path, p)
			}
		}
		if len(path) == 0 {
			return fmt.Sprintf("cannot use a JSON %s here", clip(te.Value))
		}
		return fmt.Sprintf("%s: cannot use a JSON %s here", clip(strings.Join(path, ".")), clip(te.Value))
	}
	return clip(err.Error())
}

// checkObject checks that raw, the field named field, is a JSON object.
func checkObject(field string, raw json.RawMessage) error {
	if len(raw) == 0 {
		return fmt.Errorf("%s is required", field)
	}
	if !json.Valid(raw) || !isObject(raw) {
		return fmt.Errorf("%s is not a JSON object", field)
	}
	if !utf8.Valid(raw) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	return nil
}

// isObject reports whether valid JSON text is an object.
func isObject(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}

// compact returns valid JSON text without insignificant white space.
func compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw // not reached: Decode has validated raw
	}
	return buf.Bytes()
}

// maxDetail bounds how much of the peer's input an error repeats.
const maxDetail = 128

// clip shortens s to at most maxDetail bytes, so an error naming a field of
// a 1 MiB frame stays a line in a log.
func clip(s string) string { return Clip(s, maxDetail, "…") }

// ClipName bounds a name the other side sent (a worker's, a node's) to the
// longest a Kubernetes object's name may be, MaxNameBytes, for a log line or
// an answer that repeats it.
func ClipName(s string) string { return Clip(s, MaxNameBytes, "…") }

// Clip returns s, or when it is longer than limit bytes, its beginning cut
// at a character boundary and followed by suffix, limit bytes at most in all
// (suffix too, when limit leaves it room): text from one side of the
// channel that the other repeats in a bounded field, frame or log line.
func Clip(s string, limit int, suffix string) string {
	if len(s) <= limit {
		return s
	}
	cut := max(limit-len(suffix), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}
