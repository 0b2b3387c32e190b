package edgestatus

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// TestANodesRoundIsTheOneItsReportNames: edgeNodes[].round, the per-node
// round kubectl describe shows, is read from the report's ownerInfo under
// Sedna's federated learning key or the learning cycles' one.
func TestANodesRoundIsTheOneItsReportNames(t *testing.T) {
	cases := map[string]struct {
		ownerInfo string
		want      int32
	}{
		"Sedna's federated learning worker": {`{"currentRound":5,"sampleCount":600,"startTime":1.5}`, 5},
		"a learning cycle's report":         {`{"round":2,"numberOfSamples":10}`, 2},
		"currentRound before round":         {`{"currentRound":7,"round":1}`, 7},
		"a numeric string":                  {`{"currentRound":"4"}`, 4},
		"no round":                          {`{"inferenceNumber":10}`, 0},
		"no ownerInfo":                      {``, 0},
		"not a whole number":                {`{"currentRound":2.5}`, 0},
		"negative":                          {`{"currentRound":-1}`, 0},
		"past an int32":                     {`{"currentRound":4294967296}`, 0},
		"an object":                         {`{"currentRound":{"n":1}}`, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			info := &edgeproto.WorkerInfo{Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning, OwnerInfo: json.RawMessage(tc.ownerInfo)}
			nodes, _ := RecordEdgeReport(nil, edgeproto.Source{Node: "edge-1", Store: "s1"}, &edgeproto.Report{ID: 1, Worker: "w"}, info, metav1.Now())
			if got := nodes[0].Round; got != tc.want {
				t.Errorf("round %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRecordEdgeReportAppliesEachReportOnce(t *testing.T) {
	now := metav1.NewTime(time.Unix(100, 0))
	info := &edgeproto.WorkerInfo{Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning,
		OwnerInfo: json.RawMessage(`{"round":3,"loss":"0.25"}`), Results: []json.RawMessage{json.RawMessage(`{"accuracy":0.9}`)}}
	edge1 := edgeproto.Source{Node: "edge-1", Store: "s1"}
	nodes, applied := RecordEdgeReport(nil, edge1, &edgeproto.Report{ID: 7, Worker: "w1"}, info, now)
	want := []sednav1.EdgeNodeStatus{{Name: "edge-1", LastHeardTime: now, Store: "s1", LastReportID: 7, ReportsApplied: 1, Worker: "w1", Stage: "train", State: "running",
		Round: 3, Metrics: []sednav1.Metric{{Key: "accuracy", Value: "0.9"}, {Key: "loss", Value: "0.25"}, {Key: "round", Value: "3"}}}}
	if !applied {
		t.Fatal("a first report was not applied")
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	for _, id := range []uint64{7, 6} {
		if again, applied := RecordEdgeReport(nodes, edge1, &edgeproto.Report{ID: id, Worker: "w1"}, info, now); applied || len(again) != 1 {
			t.Errorf("report %d applied again after 7", id)
		}
	}
	nodes, applied = RecordEdgeReport(nodes, edgeproto.Source{Node: "edge-0", Store: "s0"}, &edgeproto.Report{ID: 1, Worker: "w0"}, info, now)
	if !applied || len(nodes) != 2 || nodes[0].Name != "edge-0" {
		t.Errorf("another node's first report: applied %v, nodes %+v", applied, nodes)
	}
}

func TestRecordEdgeReportKnowsAReportByNodeStoreAndID(t *testing.T) {
	// entry is edge-1's entry with the given store, last ID and earlier stores.
	entry := func(store string, last int64, previous ...sednav1.StoreReportID) sednav1.EdgeNodeStatus {
		return sednav1.EdgeNodeStatus{Name: "edge-1", Store: store, LastReportID: last, PreviousStores: previous, ReportsApplied: 10}
	}
	prev := func(store string, last int64) sednav1.StoreReportID {
		return sednav1.StoreReportID{Store: store, LastReportID: last}
	}
	type want struct {
		Applied  bool
		Store    string
		Last     int64
		Previous []sednav1.StoreReportID
	}
	tests := map[string]struct {
		before []sednav1.EdgeNodeStatus
		store  string
		id     uint64
		want   want
	}{
		"the same store's next report applies": {
			before: []sednav1.EdgeNodeStatus{entry("A", 50)}, store: "A", id: 51,
			want: want{Applied: true, Store: "A", Last: 51},
		},
		"the same store's resent report does not": {
			before: []sednav1.EdgeNodeStatus{entry("A", 50)}, store: "A", id: 50,
			want: want{Store: "A", Last: 50},
		},
		"a wiped store's reports apply from ID 1": {
			before: []sednav1.EdgeNodeStatus{entry("A", 50)}, store: "B", id: 1,
			want: want{Applied: true, Store: "B", Last: 1, Previous: []sednav1.StoreReportID{prev("A", 50)}},
		},
		"an old store's resent report after a switch does not apply": {
			before: []sednav1.EdgeNodeStatus{entry("B", 3, prev("A", 50))}, store: "A", id: 50,
			want: want{Store: "B", Last: 3, Previous: []sednav1.StoreReportID{prev("A", 50)}},
		},
		"an old store's report never applied applies, and its store is current again": {
			before: []sednav1.EdgeNodeStatus{entry("B", 3, prev("A", 50))}, store: "A", id: 51,
			want: want{Applied: true, Store: "A", Last: 51, Previous: []sednav1.StoreReportID{prev("B", 3)}},
		},
		"at most 3 previous stores are kept, the most recent": {
			before: []sednav1.EdgeNodeStatus{entry("D", 1, prev("C", 2), prev("B", 3), prev("A", 4))}, store: "E", id: 1,
			want: want{Applied: true, Store: "E", Last: 1, Previous: []sednav1.StoreReportID{prev("D", 1), prev("C", 2), prev("B", 3)}},
		},
		"a store older than those is not remembered (the cost of the bound)": {
			before: []sednav1.EdgeNodeStatus{entry("E", 1, prev("D", 1), prev("C", 2), prev("B", 3))}, store: "A", id: 4,
			want: want{Applied: true, Store: "A", Last: 4, Previous: []sednav1.StoreReportID{prev("E", 1), prev("D", 1), prev("C", 2)}},
		},
		"an entry from before stores had identities is taken for the reporting store's": {
			before: []sednav1.EdgeNodeStatus{entry("", 50)}, store: "A", id: 50,
			want: want{Store: "", Last: 50},
		},
		"an entry from before stores had identities takes the store of the next report": {
			before: []sednav1.EdgeNodeStatus{entry("", 50)}, store: "A", id: 51,
			want: want{Applied: true, Store: "A", Last: 51},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := append([]sednav1.EdgeNodeStatus{{Name: "edge-0", Store: tc.store, LastReportID: 1000}}, tc.before...)
			nodes, applied := RecordEdgeReport(before, edgeproto.Source{Node: "edge-1", Store: tc.store},
				&edgeproto.Report{ID: tc.id, Worker: "w"}, &edgeproto.WorkerInfo{Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning}, metav1.Now())
			if len(nodes) != 2 || nodes[0].LastReportID != 1000 {
				t.Fatalf("nodes %+v, want edge-0's entry as it was and edge-1's", nodes)
			}
			e := nodes[1]
			got := want{Applied: applied, Store: e.Store, Last: e.LastReportID, Previous: e.PreviousStores}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
			wantCount := int64(10)
			if applied {
				wantCount++
			}
			if e.ReportsApplied != wantCount {
				t.Errorf("reportsApplied %d, want %d", e.ReportsApplied, wantCount)
			}
		})
	}
}

func TestRecordEdgeReportBoundsEachNodesShare(t *testing.T) {
	fields := func(n int, key func(i int) string, value string) json.RawMessage {
		m := map[string]string{}
		for i := range n {
			m[key(i)] = value
		}
		raw, _ := json.Marshal(m)
		return raw
	}
	numbered := func(i int) string { return fmt.Sprintf("m%02d", i) }
	longValue := strings.Repeat("é", 200) // 400 bytes, 2 per character
	longKey := strings.Repeat("k", 300)
	keys := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, numbered(i))
		}
		return out
	}
	type want struct {
		Keys   []string
		Values map[string]string // of some keys
		Worker string
		Stage  string
	}
	tests := map[string]struct {
		worker string
		info   edgeproto.WorkerInfo
		want   want
	}{
		"a long value is cut at a character boundary and says so": {
			worker: "w", info: edgeproto.WorkerInfo{Kind: "train", OwnerInfo: fields(1, numbered, longValue)},
			want: want{Keys: []string{"m00"}, Worker: "w", Stage: "train",
				Values: map[string]string{"m00": strings.Repeat("é", (256-len(sednav1.TruncatedSuffix))/2) + sednav1.TruncatedSuffix}},
		},
		"a value at the bound is kept whole": {
			worker: "w", info: edgeproto.WorkerInfo{Kind: "train", OwnerInfo: fields(1, numbered, strings.Repeat("v", 256))},
			want: want{Keys: []string{"m00"}, Worker: "w", Stage: "train", Values: map[string]string{"m00": strings.Repeat("v", 256)}},
		},
		"a long key is cut, and numbered when it repeats": {
			worker: "w", info: edgeproto.WorkerInfo{Kind: "train", OwnerInfo: fields(1, func(int) string { return longKey }, "1"),
				Results: []json.RawMessage{fields(1, func(int) string { return longKey }, "2")}},
			want: want{Worker: "w", Stage: "train", Keys: []string{
				strings.Repeat("k", 128-len(sednav1.TruncatedSuffix)) + sednav1.TruncatedSuffix,
				strings.Repeat("k", 125-len(sednav1.TruncatedSuffix)) + sednav1.TruncatedSuffix + "[1]",
			}},
		},
		"32 metrics are all kept": {
			worker: "w", info: edgeproto.WorkerInfo{Kind: "train", OwnerInfo: fields(32, numbered, "1")},
			want: want{Keys: keys(32), Worker: "w", Stage: "train"},
		},
		"of 40 metrics the first 32 by key are kept, and the count of the others": {
			worker: "w", info: edgeproto.WorkerInfo{Kind: "train", OwnerInfo: fields(20, func(i int) string { return numbered(2 * i) }, "1"),
				Results: []json.RawMessage{fields(20, func(i int) string { return numbered(2*i + 1) }, "1")}},
			want: want{Keys: append(keys(32), sednav1.DroppedMetricsKey), Worker: "w", Stage: "train",
				Values: map[string]string{sednav1.DroppedMetricsKey: "8"}},
		},
		"a long worker name and stage are cut": {
			worker: strings.Repeat("w", 300), info: edgeproto.WorkerInfo{Kind: edgeproto.Stage(strings.Repeat("s", 40))},
			want: want{Worker: strings.Repeat("w", 253-len(sednav1.TruncatedSuffix)) + sednav1.TruncatedSuffix,
				Stage: strings.Repeat("s", 32-len(sednav1.TruncatedSuffix)) + sednav1.TruncatedSuffix},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			nodes, applied := RecordEdgeReport(nil, edgeproto.Source{Node: "edge-1", Store: "s1"}, &edgeproto.Report{ID: 1, Worker: tc.worker}, &tc.info, metav1.Now())
			if !applied || len(nodes) != 1 {
				t.Fatalf("applied %v, %d nodes", applied, len(nodes))
			}
			e := nodes[0]
			got := want{Worker: e.Worker, Stage: e.Stage}
			for _, m := range e.Metrics {
				got.Keys = append(got.Keys, m.Key)
				if _, ok := tc.want.Values[m.Key]; ok {
					if got.Values == nil {
						got.Values = map[string]string{}
					}
					got.Values[m.Key] = m.Value
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// TestEdgeNodeEntryStaysSmallWhateverTheReport checks the bound as a whole: a
// report larger than a frame makes an entry of some 20 KiB.
func TestEdgeNodeEntryStaysSmallWhateverTheReport(t *testing.T) {
	big := map[string]string{}
	for i := range 1000 {
		big[fmt.Sprintf("%0300d", i)] = strings.Repeat("\u2028", 300)
	}
	ownerInfo, _ := json.Marshal(big)
	info := &edgeproto.WorkerInfo{Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning, OwnerInfo: ownerInfo}
	var nodes []sednav1.EdgeNodeStatus
	for i, store := range []string{"s1", "s2", "s3", "s4", "s5"} {
		nodes, _ = RecordEdgeReport(nodes, edgeproto.Source{Node: strings.Repeat("n", 253), Store: strings.Repeat(store, 32)},
			&edgeproto.Report{ID: uint64(i + 1), Worker: strings.Repeat("w", 10000)}, info, metav1.Now())
	}
	entry, err := json.Marshal(nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	const limit = 32 << 10
	if len(entry) > limit {
		t.Errorf("one node's entry is %d bytes of JSON, want at most %d", len(entry), limit)
	}
	t.Logf("a %d-byte report makes a %d-byte entry", len(ownerInfo), len(entry))
}

// An eval worker's metrics go into a round's status bounded, as an edge
// node's do: text, at most MaxEdgeNodeMetrics, each key and value cut.
func TestRoundMetricsAreBounded(t *testing.T) {
	metrics := map[string]json.RawMessage{}
	for i := range 1000 {
		metrics[fmt.Sprintf("%s-%04d", strings.Repeat("k", 300), i)] = json.RawMessage(`"` + strings.Repeat("v", 1000) + `"`)
	}
	got := StatusMetrics(metrics)
	if len(got) != sednav1.MaxEdgeNodeMetrics+1 || got[len(got)-1].Key != sednav1.DroppedMetricsKey {
		t.Fatalf("%d metrics, last %q; want %d and the count of those dropped", len(got), got[len(got)-1].Key, sednav1.MaxEdgeNodeMetrics+1)
	}
	for _, m := range got {
		if len(m.Key) > sednav1.MaxMetricKeyBytes || len(m.Value) > sednav1.MaxMetricValueBytes {
			t.Errorf("metric of %d+%d bytes", len(m.Key), len(m.Value))
		}
	}
	if got := StatusMetrics(map[string]json.RawMessage{"precision": json.RawMessage(`[0.9, 0.8]`)}); len(got) != 1 || got[0].Value != "[0.9,0.8]" {
		t.Errorf("StatusMetrics = %v", got)
	}
}
