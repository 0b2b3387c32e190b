package edgeproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)

// jobObject is an object as the GM would send it: no TypeMeta, as in an
// informer's cache, and characters HTML-escaping would change.
const jobObject = `{"metadata":{"name":"fl","namespace":"ns","resourceVersion":"42"},"spec":{"note":"a<b && c>d"}}`

// storeID is a LocalController store's identity.
var storeID = StoreIdentity(storeKey)

// storeKey is that store's key.
const storeKey = "5f0c7a529a4e4d0b8a392c1e6b7d9f105f0c7a529a4e4d0b8a392c1e6b7d9f10"

var jobVersion = ObjectVersion{ObjectRef: ObjectRef{"FederatedLearningJob", "ns", "fl"}, ResourceVersion: "42"}

// upsertWithWorkers is jobVersion's Upsert naming workers, with their digest.
func upsertWithWorkers(workers ...Worker) *Upsert {
	v := jobVersion
	v.Workers = WorkersDigest(workers)
	return &Upsert{ObjectVersion: v, Object: json.RawMessage(jobObject), WorkerPods: workers}
}

// goldenMessages is one message of every type with its frame, byte for byte:
// the wire format both ends agree on.
var goldenMessages = map[string]struct {
	msg   Message
	frame string
}{
	"hello": {
		msg: &Hello{Node: "edge-1", Store: storeID, StoreKey: storeKey, Inventory: []ObjectVersion{jobVersion, {ObjectRef: ObjectRef{"Model", "ns", "m"}, ResourceVersion: "7"}}},
		frame: `{"v":1,"type":"hello","payload":{"node":"edge-1","store":"` + storeID + `","storeKey":"` + storeKey + `","inventory":[` +
			`{"kind":"FederatedLearningJob","namespace":"ns","name":"fl","resourceVersion":"42"},` +
			`{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"7"}]}}`,
	},
	"hello with more to come": {
		msg: &Hello{Node: "edge-1", Store: storeID, StoreKey: storeKey, Inventory: []ObjectVersion{jobVersion}, More: true},
		frame: `{"v":1,"type":"hello","payload":{"node":"edge-1","store":"` + storeID + `","storeKey":"` + storeKey + `","inventory":[` +
			`{"kind":"FederatedLearningJob","namespace":"ns","name":"fl","resourceVersion":"42"}],"more":true}}`,
	},
	"inventory": {
		msg: &Inventory{Inventory: []ObjectVersion{{ObjectRef: ObjectRef{"Model", "ns", "m"}, ResourceVersion: "7"}}, More: true},
		frame: `{"v":1,"type":"inventory","payload":{"inventory":[` +
			`{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"7"}],"more":true}}`,
	},
	"the last inventory": {
		msg:   &Inventory{Inventory: []ObjectVersion{{ObjectRef: ObjectRef{"Model", "ns", "m"}, ResourceVersion: "7"}}},
		frame: `{"v":1,"type":"inventory","payload":{"inventory":[{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"7"}]}}`,
	},
	"hello with an empty store": {
		msg:   &Hello{Node: "edge-1", Store: storeID, StoreKey: storeKey},
		frame: `{"v":1,"type":"hello","payload":{"node":"edge-1","store":"` + storeID + `","storeKey":"` + storeKey + `"}}`,
	},
	"upsert": {
		msg: &Upsert{ObjectVersion: jobVersion, Object: json.RawMessage(jobObject)},
		frame: `{"v":1,"type":"upsert","payload":{"kind":"FederatedLearningJob","namespace":"ns","name":"fl",` +
			`"resourceVersion":"42","object":` + jobObject + `}}`,
	},
	"upsert of an object with its kind": {
		msg: &Upsert{ObjectVersion: ObjectVersion{ObjectRef: ObjectRef{"Model", "ns", "m"}, ResourceVersion: "7"},
			Object: json.RawMessage(`{"apiVersion":"sedna.io/v1alpha1","kind":"Model","metadata":{"name":"m","namespace":"ns","resourceVersion":"7"}}`)},
		frame: `{"v":1,"type":"upsert","payload":{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"7",` +
			`"object":{"apiVersion":"sedna.io/v1alpha1","kind":"Model","metadata":{"name":"m","namespace":"ns","resourceVersion":"7"}}}}`,
	},
	"delete": {
		msg:   &Delete{ObjectVersion: jobVersion},
		frame: `{"v":1,"type":"delete","payload":{"kind":"FederatedLearningJob","namespace":"ns","name":"fl","resourceVersion":"42"}}`,
	},
	"synced": {
		msg:   &Synced{},
		frame: `{"v":1,"type":"synced","payload":{}}`,
	},
	"ack": {
		msg: &Ack{Objects: []ObjectVersion{jobVersion, {ObjectRef: jobVersion.ObjectRef, ResourceVersion: "43"}}},
		frame: `{"v":1,"type":"ack","payload":{"objects":[` +
			`{"kind":"FederatedLearningJob","namespace":"ns","name":"fl","resourceVersion":"42"},` +
			`{"kind":"FederatedLearningJob","namespace":"ns","name":"fl","resourceVersion":"43"}]}}`,
	},
	"report": {
		msg: &Report{ID: 17, Worker: "fl-trainworker-0", ReceivedAt: t0,
			Body: json.RawMessage(`{"name":"fl-trainworker-0","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob","kind":"train","status":"completed","results":[{"url":"s3://m/1"}]}`)},
		frame: `{"v":1,"type":"report","payload":{"id":17,"worker":"fl-trainworker-0","body":` +
			`{"name":"fl-trainworker-0","namespace":"ns","ownerName":"fl","ownerKind":"federatedlearningjob","kind":"train","status":"completed","results":[{"url":"s3://m/1"}]},` +
			`"receivedAt":"2025-03-01T12:00:00.123456789Z"}}`,
	},
	"reportAck": {
		msg:   &ReportAck{IDs: []uint64{17, 18}},
		frame: `{"v":1,"type":"reportAck","payload":{"ids":[17,18]}}`,
	},
	"reportAck with a refusal": {
		msg:   &ReportAck{IDs: []uint64{17, 18}, Refused: []RefusedReport{{ID: 18, Reason: `ownerKind "x" is not one of …`}}},
		frame: `{"v":1,"type":"reportAck","payload":{"ids":[17,18],"refused":[{"id":18,"reason":"ownerKind \"x\" is not one of …"}]}}`,
	},
	"heartbeat": {
		msg:   &Heartbeat{Time: t0},
		frame: `{"v":1,"type":"heartbeat","payload":{"time":"2025-03-01T12:00:00.123456789Z"}}`,
	},
}

func TestEncodeWritesTheDocumentedFrame(t *testing.T) {
	for name, tc := range goldenMessages {
		t.Run(name, func(t *testing.T) {
			got, err := Encode(tc.msg)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if diff := cmp.Diff(tc.frame, string(got)); diff != "" {
				t.Errorf("frame (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDecodeRoundTripsEveryMessageType(t *testing.T) {
	seen := map[Type]bool{}
	for name, tc := range goldenMessages {
		t.Run(name, func(t *testing.T) {
			got, err := Decode([]byte(tc.frame))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tc.msg, got); diff != "" {
				t.Errorf("Decode(frame) (-want,+got):\n%s", diff)
			}
			frame, err := Encode(got)
			if err != nil {
				t.Fatalf("Encode(Decode(frame)): %v", err)
			}
			again, err := Decode(frame)
			if err != nil {
				t.Fatalf("Decode(Encode(Decode(frame))): %v", err)
			}
			if diff := cmp.Diff(tc.msg, again); diff != "" {
				t.Errorf("after a round trip (-want,+got):\n%s", diff)
			}
		})
		seen[tc.msg.Type()] = true
	}
	for _, typ := range []Type{TypeHello, TypeInventory, TypeUpsert, TypeDelete, TypeSynced, TypeAck, TypeReport, TypeReportAck, TypeHeartbeat} {
		if !seen[typ] {
			t.Errorf("no golden message of type %s", typ)
		}
	}
}

func TestDecodeAcceptsAndCanonicalizes(t *testing.T) {
	cases := map[string]struct {
		frame string
		want  Message
	}{
		"unknown fields in the envelope and the payload are ignored": {
			frame: `{"v":1,"type":"heartbeat","trace":"x","payload":{"time":"2025-03-01T12:00:00.123456789Z","seq":9}}`,
			want:  &Heartbeat{Time: t0},
		},
		"white space around and inside": {
			frame: " \n{ \"v\" : 1 , \"payload\" : { \"node\" : \"edge-1\" , \"store\" : \"" + storeID + "\" , \"storeKey\" : \"" + storeKey + "\" } , \"type\" : \"hello\" }\n ",
			want:  &Hello{Node: "edge-1", Store: storeID, StoreKey: storeKey},
		},
		"an empty inventory is nil": {
			frame: `{"v":1,"type":"hello","payload":{"node":"edge-1","store":"` + storeID + `","storeKey":"` + storeKey + `","inventory":[]}}`,
			want:  &Hello{Node: "edge-1", Store: storeID, StoreKey: storeKey},
		},
		"an empty refused list is nil": {
			frame: `{"v":1,"type":"reportAck","payload":{"ids":[3],"refused":[]}}`,
			want:  &ReportAck{IDs: []uint64{3}},
		},
		"the object is compacted and keeps its characters": {
			frame: `{"v":1,"type":"upsert","payload":{"kind":"FederatedLearningJob","namespace":"ns","name":"fl","resourceVersion":"42",` +
				`"object":{ "metadata" : {"name":"fl","namespace":"ns","resourceVersion":"42"},` + "\n\t" + `"spec":{"note":"a<b && c>d"}}}}`,
			want: &Upsert{ObjectVersion: jobVersion, Object: json.RawMessage(jobObject)},
		},
		"the report body is compacted": {
			frame: `{"v":1,"type":"report","payload":{"id":1,"worker":"w","body":{ "name" : "w" },"receivedAt":"2025-03-01T12:00:00.123456789Z"}}`,
			want:  &Report{ID: 1, Worker: "w", Body: json.RawMessage(`{"name":"w"}`), ReceivedAt: t0},
		},
		"a time in another zone is the same instant": {
			frame: `{"v":1,"type":"heartbeat","payload":{"time":"2025-03-01T13:00:00.123456789+01:00"}}`,
			want:  &Heartbeat{Time: t0},
		},
		"a frame of exactly MaxFrameBytes": {
			frame: padTo(`{"v":1,"type":"synced","payload":{}}`, MaxFrameBytes),
			want:  &Synced{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decode([]byte(tc.frame))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decode (-want,+got):\n%s", diff)
			}
		})
	}
}

// padTo appends spaces to frame up to n bytes.
func padTo(frame string, n int) string {
	return frame + strings.Repeat(" ", n-len(frame))
}

var errKinds = []error{ErrTooLarge, ErrUnknownVersion, ErrUnknownType, ErrMalformed}

// checkErr checks that err is of exactly the kind want and says what is wrong.
func checkErr(t *testing.T, err, want error, wantText string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want %v", want)
	}
	for _, kind := range errKinds {
		if got := errors.Is(err, kind); got != (kind == want) {
			t.Errorf("errors.Is(%q, %v) = %v, want %v", err, kind, got, !got)
		}
	}
	if !strings.Contains(err.Error(), wantText) {
		t.Errorf("err = %q, want it to contain %q", err, wantText)
	}
}

// rejectCase is a frame Decode rejects, and the error it names.
type rejectCase struct {
	frame    string
	want     error
	wantText string
}

func decodeRejectsCases() map[string]rejectCase {
	cases := decodeRejectsFrameCases()
	maps.Copy(cases, decodeRejectsMessageCases())
	return cases
}

// decodeRejectsFrameCases: frames whose size, encoding or envelope is wrong.
func decodeRejectsFrameCases() map[string]rejectCase {
	const okTime = `"2025-03-01T12:00:00Z"`
	frame := func(typ, payload string) string {
		return `{"v":1,"type":"` + typ + `","payload":` + payload + `}`
	}
	return map[string]rejectCase{
		// Size.
		"one byte over MaxFrameBytes": {padTo(`{"v":1,"type":"synced","payload":{}}`, MaxFrameBytes+1), ErrTooLarge, "1048577 bytes"},

		// Encoding.
		"invalid UTF-8 in a string": {"{\"v\":1,\"type\":\"hello\",\"payload\":{\"node\":\"\xff\"}}", ErrMalformed, "frame is not valid UTF-8"},

		// Envelope.
		"empty frame":           {``, ErrMalformed, "unexpected end of JSON input"},
		"truncated JSON":        {`{"v":1,"type":"synced","payload":{}`, ErrMalformed, "unexpected end"},
		"trailing garbage":      {`{"v":1,"type":"synced","payload":{}}x`, ErrMalformed, "invalid character"},
		"not JSON":              {`hello`, ErrMalformed, "invalid character"},
		"an array":              {`[1]`, ErrMalformed, "frame is not a JSON object"},
		"null":                  {`null`, ErrMalformed, "frame is not a JSON object"},
		"a string":              {`"x"`, ErrMalformed, "frame is not a JSON object"},
		"no version":            {`{"type":"synced","payload":{}}`, ErrMalformed, "v is required"},
		"version null":          {`{"v":null,"type":"synced","payload":{}}`, ErrMalformed, "v null is not an integer"},
		"version as a string":   {`{"v":"1","type":"synced","payload":{}}`, ErrMalformed, `v "1" is not an integer`},
		"fractional version":    {`{"v":1.5,"type":"synced","payload":{}}`, ErrMalformed, "v 1.5 is not an integer"},
		"version 2":             {`{"v":2,"type":"synced","payload":{}}`, ErrUnknownVersion, "unknown protocol version 2 (this end speaks 1)"},
		"version 0":             {`{"v":0,"type":"synced","payload":{}}`, ErrUnknownVersion, "version 0"},
		"version 2, new shape":  {`{"v":2,"type":{"name":"synced"},"payload":[]}`, ErrUnknownVersion, "version 2"},
		"no type":               {`{"v":1,"payload":{}}`, ErrMalformed, "type is required"},
		"empty type":            {`{"v":1,"type":"","payload":{}}`, ErrMalformed, "type is required"},
		"type not a string":     {`{"v":1,"type":7,"payload":{}}`, ErrMalformed, "type 7 is not a string"},
		"unknown type":          {frame("bogus", `{}`), ErrUnknownType, `unknown message type "bogus"`},
		"type in another case":  {frame("Hello", `{"node":"n"}`), ErrUnknownType, `"Hello"`},
		"no payload":            {`{"v":1,"type":"synced"}`, ErrMalformed, "synced: payload is required"},
		"payload null":          {frame("synced", `null`), ErrMalformed, "synced: payload is not a JSON object"},
		"payload an array":      {frame("hello", `[{"node":"n"}]`), ErrMalformed, "hello: payload is not a JSON object"},
		"payload a string":      {frame("heartbeat", `"now"`), ErrMalformed, "heartbeat: payload is not a JSON object"},
		"field of another type": {frame("report", `{"id":"1","worker":"w","body":{},"receivedAt":`+okTime+`}`), ErrMalformed, "report: id: cannot use a JSON string here"},
		"negative id":           {frame("report", `{"id":-1,"worker":"w","body":{},"receivedAt":`+okTime+`}`), ErrMalformed, "report: id: cannot use a JSON number -1 here"},
		"nested field of another type": {frame("hello", `{"node":"n","store":"s","inventory":[{"kind":1}]}`), ErrMalformed,
			"hello: inventory.kind: cannot use a JSON number here"},

		// Hello.
	}
}

// decodeRejectsMessageCases: messages of each type that break its rules.
func decodeRejectsMessageCases() map[string]rejectCase {
	const okTime = `"2025-03-01T12:00:00Z"`
	const okObject = `{"metadata":{"name":"fl","namespace":"ns","resourceVersion":"42"}}`
	upsert := func(ref, object string) string {
		return `{"v":1,"type":"upsert","payload":{` + ref + `,"object":` + object + `}}`
	}
	const okRef = `"kind":"FederatedLearningJob","namespace":"ns","name":"fl","resourceVersion":"42"`
	frame := func(typ, payload string) string {
		return `{"v":1,"type":"` + typ + `","payload":` + payload + `}`
	}
	return map[string]rejectCase{
		"hello without node":         {frame("hello", `{"store":"s","inventory":[]}`), ErrMalformed, "hello: node is required"},
		"hello without store":        {frame("hello", `{"node":"n","inventory":[]}`), ErrMalformed, "hello: store is required"},
		"hello with a long store":    {frame("hello", `{"node":"n","store":"`+strings.Repeat("s", MaxStoreIdentityBytes+1)+`"}`), ErrMalformed, "hello: store is 65 bytes, the limit is 64"},
		"hello inventory without rv": {frame("hello", `{"node":"n","store":"s","inventory":[{"kind":"Model","namespace":"ns","name":"m"}]}`), ErrMalformed, "hello: inventory[0]: resourceVersion is required"},
		"hello inventory without kind": {frame("hello", `{"node":"n","store":"s","inventory":[{"namespace":"ns","name":"m","resourceVersion":"1"}]}`), ErrMalformed,
			"hello: inventory[0]: kind is required"},
		"hello inventory listing a ref twice": {frame("hello", `{"node":"n","store":"s","inventory":[{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"1"},{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"2"}]}`),
			ErrMalformed, "hello: inventory[1]: Model ns/m is listed twice"},

		// Inventory.
		"inventory of nothing":      {frame("inventory", `{"inventory":[],"more":true}`), ErrMalformed, "inventory: inventory is required (at least one entry)"},
		"inventory without entries": {frame("inventory", `{}`), ErrMalformed, "inventory: inventory is required"},
		"inventory entry without name": {frame("inventory", `{"inventory":[{"kind":"Model","namespace":"ns","resourceVersion":"1"}]}`), ErrMalformed,
			"inventory: inventory[0]: name is required"},
		"inventory listing a ref twice": {frame("inventory", `{"inventory":[{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"1"},{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"1"}]}`),
			ErrMalformed, "inventory: inventory[1]: Model ns/m is listed twice"},
		"inventory with more as a string": {frame("inventory", `{"inventory":[{"kind":"Model","namespace":"ns","name":"m","resourceVersion":"1"}],"more":"yes"}`),
			ErrMalformed, "inventory: more: cannot use a JSON string here"},
		"hello with more as a number": {frame("hello", `{"node":"n","more":1}`), ErrMalformed, "hello: more: cannot use a JSON number here"},

		// Upsert.
		"upsert without kind":            {upsert(`"namespace":"ns","name":"fl","resourceVersion":"42"`, okObject), ErrMalformed, "upsert: kind is required"},
		"upsert without namespace":       {upsert(`"kind":"FederatedLearningJob","name":"fl","resourceVersion":"42"`, okObject), ErrMalformed, "upsert: namespace is required"},
		"upsert without name":            {upsert(`"kind":"FederatedLearningJob","namespace":"ns","resourceVersion":"42"`, okObject), ErrMalformed, "upsert: name is required"},
		"upsert without resourceVersion": {upsert(`"kind":"FederatedLearningJob","namespace":"ns","name":"fl"`, okObject), ErrMalformed, "upsert: resourceVersion is required"},
		"upsert without object":          {frame("upsert", `{`+okRef+`}`), ErrMalformed, "upsert: object is required"},
		"upsert object null":             {upsert(okRef, `null`), ErrMalformed, "upsert: object is not a JSON object"},
		"upsert object an array":         {upsert(okRef, `[]`), ErrMalformed, "upsert: object is not a JSON object"},
		"upsert object of another name": {upsert(okRef, `{"metadata":{"name":"other","namespace":"ns","resourceVersion":"42"}}`), ErrMalformed,
			`upsert: object metadata.name "other" does not match name "fl"`},
		"upsert object of another namespace": {upsert(okRef, `{"metadata":{"name":"fl","namespace":"x","resourceVersion":"42"}}`), ErrMalformed,
			`upsert: object metadata.namespace "x" does not match namespace "ns"`},
		"upsert object at another version": {upsert(okRef, `{"metadata":{"name":"fl","namespace":"ns","resourceVersion":"41"}}`), ErrMalformed,
			`upsert: object metadata.resourceVersion "41" does not match resourceVersion "42"`},
		"upsert object of another kind": {upsert(okRef, `{"kind":"Model","metadata":{"name":"fl","namespace":"ns","resourceVersion":"42"}}`), ErrMalformed,
			`upsert: object kind "Model" does not match kind "FederatedLearningJob"`},
		"upsert object without metadata":  {upsert(okRef, `{"spec":{}}`), ErrMalformed, `upsert: object metadata.namespace "" does not match`},
		"upsert object with bad metadata": {upsert(okRef, `{"metadata":[]}`), ErrMalformed, `upsert: object: metadata: cannot use a JSON array here`},

		// Delete.
		"delete without name":            {frame("delete", `{"kind":"Model","namespace":"ns","resourceVersion":"1"}`), ErrMalformed, "delete: name is required"},
		"delete without resourceVersion": {frame("delete", `{"kind":"Model","namespace":"ns","name":"m"}`), ErrMalformed, "delete: resourceVersion is required"},

		// Ack.
		"ack of nothing":         {frame("ack", `{"objects":[]}`), ErrMalformed, "ack: objects is required"},
		"ack without objects":    {frame("ack", `{}`), ErrMalformed, "ack: objects is required"},
		"ack entry without name": {frame("ack", `{"objects":[{"kind":"Model","namespace":"ns","resourceVersion":"1"}]}`), ErrMalformed, "ack: objects[0]: name is required"},
		"ack entry without rv":   {frame("ack", `{"objects":[{"kind":"Model","namespace":"ns","name":"m"}]}`), ErrMalformed, "ack: objects[0]: resourceVersion is required"},

		// Report.
		"report id 0":            {frame("report", `{"id":0,"worker":"w","body":{},"receivedAt":`+okTime+`}`), ErrMalformed, "report: id is required"},
		"report without id":      {frame("report", `{"worker":"w","body":{},"receivedAt":`+okTime+`}`), ErrMalformed, "report: id is required"},
		"report id past int64":   {frame("report", `{"id":9223372036854775808,"worker":"w","body":{},"receivedAt":`+okTime+`}`), ErrMalformed, "report: id 9223372036854775808 is more than 9223372036854775807"},
		"report without worker":  {frame("report", `{"id":1,"body":{},"receivedAt":`+okTime+`}`), ErrMalformed, "report: worker is required"},
		"report without body":    {frame("report", `{"id":1,"worker":"w","receivedAt":`+okTime+`}`), ErrMalformed, "report: body is required"},
		"report body an array":   {frame("report", `{"id":1,"worker":"w","body":[],"receivedAt":`+okTime+`}`), ErrMalformed, "report: body is not a JSON object"},
		"report body a string":   {frame("report", `{"id":1,"worker":"w","body":"{}","receivedAt":`+okTime+`}`), ErrMalformed, "report: body is not a JSON object"},
		"report without time":    {frame("report", `{"id":1,"worker":"w","body":{}}`), ErrMalformed, "report: receivedAt is required"},
		"report with a bad time": {frame("report", `{"id":1,"worker":"w","body":{},"receivedAt":"yesterday"}`), ErrMalformed, "report: parsing time"},
		"report id over 64 bits": {frame("report", `{"id":18446744073709551616,"worker":"w","body":{},"receivedAt":`+okTime+`}`), ErrMalformed, "report: id: cannot use a JSON number 18446744073709551616 here"},

		// ReportAck.
		"reportAck of nothing":             {frame("reportAck", `{"ids":[]}`), ErrMalformed, "reportAck: ids is required"},
		"reportAck of id 0":                {frame("reportAck", `{"ids":[1,0]}`), ErrMalformed, "reportAck: ids[1]: id must be greater than 0"},
		"reportAck refusing an unacked id": {frame("reportAck", `{"ids":[1],"refused":[{"id":2,"reason":"r"}]}`), ErrMalformed, "reportAck: refused[0]: id 2 is not in ids"},

		// Heartbeat.
		"heartbeat without time": {frame("heartbeat", `{}`), ErrMalformed, "heartbeat: time is required"},
		"heartbeat at zero time": {frame("heartbeat", `{"time":"0001-01-01T00:00:00Z"}`), ErrMalformed, "heartbeat: time is required"},
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := decodeRejectsCases()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := Decode([]byte(tc.frame))
			checkErr(t, err, tc.want, tc.wantText)
			if m != nil {
				t.Errorf("Decode returned %#v with its error", m)
			}
		})
	}
}

func TestDecodeErrorsStayShort(t *testing.T) {
	long := strings.Repeat("é", 100_000)
	longestName := strings.Repeat("é", MaxNameBytes/2)
	cases := map[string]string{
		"unknown type":        `{"v":1,"type":"` + long + `","payload":{}}`,
		"version":             `{"v":"` + long + `","type":"synced","payload":{}}`,
		"time":                `{"v":1,"type":"heartbeat","payload":{"time":"` + long + `"}}`,
		"number":              `{"v":1,"type":"report","payload":{"id":-` + strings.Repeat("9", 100_000) + `}}`,
		"duplicate inventory": `{"v":1,"type":"hello","payload":{"node":"n","store":"s","inventory":[{"kind":"K","namespace":"ns","name":"` + longestName + `","resourceVersion":"1"},{"kind":"K","namespace":"ns","name":"` + longestName + `","resourceVersion":"1"}]}}`,
		"inventory name":      `{"v":1,"type":"hello","payload":{"node":"n","store":"s","inventory":[{"kind":"K","namespace":"ns","name":"` + long + `","resourceVersion":"1"}]}}`,
		"object mismatch": `{"v":1,"type":"upsert","payload":{"kind":"K","namespace":"ns","name":"n","resourceVersion":"1",` +
			`"object":{"metadata":{"namespace":"ns","name":"` + long + `"}}}}`,
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(frame))
			if err == nil {
				t.Fatal("Decode accepted the frame")
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes: %.100q…", len(err.Error()), err)
			}
			if !strings.Contains(err.Error(), "…") && !strings.Contains(err.Error(), "bytes, more than") {
				t.Errorf("error %.200q does not show that it was clipped", err)
			}
		})
	}
}

func TestEncodeRejectsWhatDecodeWouldRefuse(t *testing.T) {
	big := `{"metadata":{"name":"fl","namespace":"ns","resourceVersion":"42"},"data":"` + strings.Repeat("x", MaxObjectFrameBytes) + `"}`
	cases := map[string]struct {
		msg      Message
		want     error
		wantText string
	}{
		"nil":                      {nil, ErrMalformed, "nil message"},
		"typed nil":                {(*Hello)(nil), ErrMalformed, "nil message"},
		"hello without node":       {&Hello{}, ErrMalformed, "hello: node is required"},
		"hello without store":      {&Hello{Node: "n"}, ErrMalformed, "hello: store is required"},
		"upsert with invalid JSON": {&Upsert{ObjectVersion: jobVersion, Object: json.RawMessage(`{"metadata":`)}, ErrMalformed, "upsert: object is not a JSON object"},
		"upsert object with invalid UTF-8": {&Upsert{ObjectVersion: jobVersion,
			Object: json.RawMessage("{\"metadata\":{\"name\":\"fl\",\"namespace\":\"ns\",\"resourceVersion\":\"42\"},\"x\":\"\xff\"}")},
			ErrMalformed, "upsert: object is not valid UTF-8"},
		"upsert mismatching its object": {&Upsert{ObjectVersion: ObjectVersion{ObjectRef: jobVersion.ObjectRef, ResourceVersion: "43"}, Object: json.RawMessage(jobObject)}, ErrMalformed,
			`metadata.resourceVersion "42" does not match resourceVersion "43"`},
		"upsert whose workers digest is not its names'": {&Upsert{ObjectVersion: ObjectVersion{ObjectRef: jobVersion.ObjectRef, ResourceVersion: "42", Workers: "abc"},
			Object: json.RawMessage(jobObject), WorkerPods: []Worker{{Name: "fl-train-0"}}}, ErrMalformed, "is not the digest"},
		"upsert with unsorted worker names":             {upsertWithWorkers(Worker{Name: "b"}, Worker{Name: "a"}), ErrMalformed, "workerPods[1].name"},
		"upsert with a worker address not an IP":        {upsertWithWorkers(Worker{Name: "a", IPs: []string{"10.0.0.1:80"}}), ErrMalformed, "workerPods[0].ips[0]"},
		"upsert with a worker address not canonical":    {upsertWithWorkers(Worker{Name: "a", IPs: []string{"FD00::1"}}), ErrMalformed, "workerPods[0].ips[0]"},
		"upsert with a worker address twice":            {upsertWithWorkers(Worker{Name: "a", IPs: []string{"10.0.0.1", "10.0.0.1"}}), ErrMalformed, "workerPods[0].ips[1]"},
		"upsert with a worker done that has an address": {upsertWithWorkers(Worker{Name: "a", IPs: []string{"10.0.0.1"}, Done: true}), ErrMalformed, "done has no address"},
		"upsert with three worker addresses":            {upsertWithWorkers(Worker{Name: "a", IPs: []string{"10.0.0.1", "fd00::1", "10.0.0.2"}}), ErrMalformed, "3 addresses, at most 2"},
		"upsert over the object frame limit":            {&Upsert{ObjectVersion: jobVersion, Object: json.RawMessage(big)}, ErrTooLarge, "upsert is 41"},
		"a report over the frame limit": {&Report{ID: 1, Worker: "w", ReceivedAt: t0,
			Body: json.RawMessage(`{"x":"` + strings.Repeat("x", MaxFrameBytes) + `"}`)}, ErrTooLarge, "report is 10"},
		"delete without kind":        {&Delete{ObjectVersion{ObjectRef: ObjectRef{"", "ns", "n"}, ResourceVersion: "1"}}, ErrMalformed, "delete: kind is required"},
		"empty ack":                  {&Ack{}, ErrMalformed, "ack: objects is required"},
		"report without body":        {&Report{ID: 1, Worker: "w", ReceivedAt: t0}, ErrMalformed, "report: body is required"},
		"reportAck refusing unacked": {&ReportAck{IDs: []uint64{1}, Refused: []RefusedReport{{ID: 2}}}, ErrMalformed, "refused[0]: id 2 is not in ids"},
		"heartbeat without time":     {&Heartbeat{}, ErrMalformed, "heartbeat: time is required"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			frame, err := Encode(tc.msg)
			checkErr(t, err, tc.want, tc.wantText)
			if frame != nil {
				t.Errorf("Encode returned %d bytes with its error", len(frame))
			}
		})
	}
}

func TestEncodeDoesNotEscapeHTML(t *testing.T) {
	frame, err := Encode(&Upsert{ObjectVersion: jobVersion, Object: json.RawMessage(jobObject)})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(frame, []byte(`"a<b && c>d"`)) {
		t.Errorf("frame %s does not carry the object's characters as they are", frame)
	}
}

func TestObjectVersionStringNamesTheVersion(t *testing.T) {
	if got, want := jobVersion.String(), "FederatedLearningJob ns/fl@42"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := (&Delete{jobVersion}).String(), "FederatedLearningJob ns/fl@42"; got != want {
		t.Errorf("Delete String() = %q, want %q", got, want)
	}
}
