package federatedlearning

import (
	"encoding/json"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-cmp/cmp"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

// edge0 is edge-0's LocalController, with its store.
var edge0 = edgeproto.Source{Node: "edge-0", Store: "store-1"}

func TestApplyReportsRecordsEachReportOnceInOneWrite(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, append(referencedObjects(), job)...)
	info := &edgeproto.WorkerInfo{Name: "w", Namespace: ns, OwnerName: job.Name, OwnerKind: edgeproto.OwnerFederatedLearningJob,
		Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning, OwnerInfo: json.RawMessage(`{"round":1}`)}
	later := *info
	later.OwnerInfo = json.RawMessage(`{"round":2}`)
	reports := []edgeproto.WorkerReport{{Report: &edgeproto.Report{ID: 4, Worker: "w"}, Info: info}, {Report: &edgeproto.Report{ID: 5, Worker: "w"}, Info: &later}}
	// The second call resends both: applied already, nothing to write.
	for range 2 {
		for i, err := range f.c.ApplyReports(t.Context(), edge0, reports) {
			if err != nil {
				t.Fatalf("report %d: %v", reports[i].Report.ID, err)
			}
		}
	}
	got, err := f.sedna.SednaV1alpha1().FederatedLearningJobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Each write that succeeds bumps the resourceVersion (the resend's
	// attempt from the stale cache conflicts).
	if got.ResourceVersion != "1" {
		t.Errorf("resourceVersion %q after two reports sent together twice; want \"1\": one status write", got.ResourceVersion)
	}
	if len(got.Status.EdgeNodes) != 1 || got.Status.EdgeNodes[0].LastReportID != 5 || got.Status.EdgeNodes[0].ReportsApplied != 2 ||
		got.Status.EdgeNodes[0].Metrics[0].Value != "2" {
		t.Errorf("edgeNodes %+v", got.Status.EdgeNodes)
	}

	info.OwnerName = "gone"
	gone := []edgeproto.WorkerReport{{Report: &edgeproto.Report{ID: 6}, Info: info}}
	if _, refused := edgeproto.IsRefused(f.c.ApplyReports(t.Context(), edge0, gone)[0]); !refused {
		t.Errorf("a report about a job that does not exist is not refused")
	}
}

// TestJobsRoundIsTheFastestNodesAndSlowestIsShown: reports from two edge
// nodes move status.round (the fastest node's) and status.slowestRound
// with their nodes, in the write that records the reports: one write per
// batch of reports, none of its own.
func TestJobsRoundIsTheFastestNodesAndSlowestIsShown(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, append(referencedObjects(), job)...)
	report := func(id int, round string) edgeproto.WorkerReport {
		return edgeproto.WorkerReport{Report: &edgeproto.Report{ID: uint64(id), Worker: "w"}, Info: &edgeproto.WorkerInfo{
			Name: "w", Namespace: ns, OwnerName: job.Name, OwnerKind: edgeproto.OwnerFederatedLearningJob,
			Kind: edgeproto.StageTrain, Status: edgeproto.WorkerRunning, OwnerInfo: json.RawMessage(`{"currentRound":` + round + `,"sampleCount":600}`)}}
	}
	edge1 := edgeproto.Source{Node: "edge-1", Store: "store-1"}
	type rounds struct {
		Round, Slowest    int32
		Fastest, SlowNode string
	}
	steps := []struct {
		from    edgeproto.Source
		reports []edgeproto.WorkerReport
		want    rounds
	}{
		{edge0, []edgeproto.WorkerReport{report(1, "1"), report(2, "2")}, rounds{2, 2, "edge-0", "edge-0"}},
		{edge1, []edgeproto.WorkerReport{report(1, "1")}, rounds{2, 1, "edge-0", "edge-1"}},
		{edge1, []edgeproto.WorkerReport{report(2, "2"), report(3, "3")}, rounds{3, 2, "edge-1", "edge-0"}},
		{edge0, []edgeproto.WorkerReport{report(3, "3")}, rounds{3, 3, "edge-0", "edge-0"}},
	}
	for i, step := range steps {
		for _, err := range f.c.ApplyReports(t.Context(), step.from, step.reports) {
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		got, err := f.sedna.SednaV1alpha1().FederatedLearningJobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := got.Status
		if diff := cmp.Diff(step.want, rounds{s.Round, s.SlowestRound, s.FastestNode, s.SlowestNode}); diff != "" {
			t.Errorf("step %d: rounds (-want,+got):\n%s", i, diff)
		}
		// Each write that succeeds bumps the resourceVersion (a first
		// attempt from the stale cache conflicts and is not one).
		if want := strconv.Itoa(i + 1); got.ResourceVersion != want {
			t.Errorf("step %d: resourceVersion %q, want %q: one status write per batch of reports", i, got.ResourceVersion, want)
		}
	}
}

func TestSetRounds(t *testing.T) {
	node := func(name string, round int32) sednav1.EdgeNodeStatus {
		return sednav1.EdgeNodeStatus{Name: name, Round: round}
	}
	cases := map[string]struct {
		nodes []sednav1.EdgeNodeStatus
		want  sednav1.FederatedLearningJobStatus
	}{
		"no node": {},
		"no node named a round": {
			nodes: []sednav1.EdgeNodeStatus{node("edge-0", 0)},
		},
		"one node": {
			nodes: []sednav1.EdgeNodeStatus{node("edge-0", 4)},
			want:  sednav1.FederatedLearningJobStatus{Round: 4, SlowestRound: 4, FastestNode: "edge-0", SlowestNode: "edge-0"},
		},
		"a tie goes to the first by name": {
			nodes: []sednav1.EdgeNodeStatus{node("edge-0", 4), node("edge-1", 4)},
			want:  sednav1.FederatedLearningJobStatus{Round: 4, SlowestRound: 4, FastestNode: "edge-0", SlowestNode: "edge-0"},
		},
		"a node without a round is left out": {
			nodes: []sednav1.EdgeNodeStatus{node("edge-0", 0), node("edge-1", 3), node("edge-2", 5)},
			want:  sednav1.FederatedLearningJobStatus{Round: 5, SlowestRound: 3, FastestNode: "edge-2", SlowestNode: "edge-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// What an earlier report summed up is replaced.
			got := sednav1.FederatedLearningJobStatus{EdgeNodes: tc.nodes, Round: 9, SlowestRound: 9, FastestNode: "old", SlowestNode: "old"}
			setRounds(&got)
			got.EdgeNodes = nil
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
		})
	}
}
