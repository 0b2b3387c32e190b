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
	nodes, applied := RecordEdgeReport(nil, "edge-1", &edgeproto.Report{ID: 7, Worker: "w1"}, info, now)
	want := []sednav1.EdgeNodeStatus{{Name: "edge-1", LastHeardTime: now, LastReportID: 7, ReportsApplied: 1, Worker: "w1", Stage: "train", State: "running",
		Metrics: []sednav1.Metric{{Key: "accuracy", Value: "0.9"}, {Key: "loss", Value: "0.25"}, {Key: "round", Value: "3"}}}}
	if !applied {
		t.Fatal("a first report was not applied")
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	for _, id := range []uint64{7, 6} {
		if again, applied := RecordEdgeReport(nodes, "edge-1", &edgeproto.Report{ID: id, Worker: "w1"}, info, now); applied || len(again) != 1 {
			t.Errorf("report %d applied again after 7", id)
		}
	}
	nodes, applied = RecordEdgeReport(nodes, "edge-0", &edgeproto.Report{ID: 1, Worker: "w0"}, info, now)
	if !applied || len(nodes) != 2 || nodes[0].Name != "edge-0" {
		t.Errorf("another node's first report: applied %v, nodes %+v", applied, nodes)
	}
}
