package federatedlearning

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
