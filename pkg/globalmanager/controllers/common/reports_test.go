package common

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

func TestRecordEdgeReportAppliesEachReportOnce(t *testing.T) {
	now := metav1.NewTime(time.Unix(100, 0))
	info := &edgeproto.WorkerInfo{Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning,
		OwnerInfo: json.RawMessage(`{"round":3,"loss":"0.25"}`), Results: []json.RawMessage{json.RawMessage(`{"accuracy":0.9}`)}}
	edge1 := edgeproto.Source{Node: "edge-1", Store: "s1"}
	nodes, applied := RecordEdgeReport(nil, edge1, &edgeproto.Report{ID: 7, Worker: "w1"}, info, now)
	want := []sednav1.EdgeNodeStatus{{Name: "edge-1", LastHeardTime: now, Store: "s1", LastReportID: 7, ReportsApplied: 1, Worker: "w1", Stage: "train", State: "running",
		Metrics: []sednav1.Metric{{Key: "accuracy", Value: "0.9"}, {Key: "loss", Value: "0.25"}, {Key: "round", Value: "3"}}}}
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
