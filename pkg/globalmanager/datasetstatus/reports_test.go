package datasetstatus

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
)

func TestApplyDatasetReport(t *testing.T) {
	counted := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	type want struct {
		samples   int32
		updated   bool
		readable  metav1.ConditionStatus
		reason    string
		events    int
		writesNow bool
	}
	tests := map[string]struct {
		before sednav1.DatasetStatus
		report edgeproto.DatasetReport
		want   want
	}{
		"a first count sets samples, updateTime and Readable": {
			report: edgeproto.DatasetReport{NumberOfSamples: 12, CountedAt: counted},
			want:   want{samples: 12, updated: true, readable: metav1.ConditionTrue, reason: ReasonCounted, writesNow: true},
		},
		"an unreadable file keeps the last count and says why": {
			before: sednav1.DatasetStatus{NumberOfSamples: 12, UpdateTime: &metav1.Time{Time: counted},
				Conditions: []metav1.Condition{{Type: ConditionReadable, Status: metav1.ConditionTrue, Reason: ReasonCounted}}},
			report: edgeproto.DatasetReport{Error: "index file /data/a.txt: no such file or directory", CountedAt: counted},
			want:   want{samples: 12, updated: true, readable: metav1.ConditionFalse, reason: ReasonUnreadable, events: 1, writesNow: true},
		},
		"the same report again writes nothing": {
			before: sednav1.DatasetStatus{NumberOfSamples: 12, UpdateTime: &metav1.Time{Time: counted}, ObservedGeneration: 1,
				Conditions: []metav1.Condition{{Type: ConditionReadable, Status: metav1.ConditionTrue, Reason: ReasonCounted, Message: "12 samples counted", ObservedGeneration: 1}},
				LastReport: &sednav1.DatasetReportID{Node: "edge-0", Store: "store-1", ID: 1}},
			report: edgeproto.DatasetReport{NumberOfSamples: 12, CountedAt: counted.Add(time.Minute)},
			want:   want{samples: 12, updated: true, readable: metav1.ConditionTrue, reason: ReasonCounted},
		},
		// Report 1 sent again after report 2 was applied (its ack was lost):
		// its older count does not come back, nor its events.
		"an older report sent again changes nothing": {
			before: sednav1.DatasetStatus{NumberOfSamples: 40, UpdateTime: &metav1.Time{Time: counted}, ObservedGeneration: 1,
				Conditions: []metav1.Condition{{Type: ConditionReadable, Status: metav1.ConditionTrue, Reason: ReasonCounted, Message: "40 samples counted", ObservedGeneration: 1}},
				LastReport: &sednav1.DatasetReportID{Node: "edge-0", Store: "store-1", ID: 2}},
			report: edgeproto.DatasetReport{Error: "index file /data/a.txt: no such file or directory", CountedAt: counted},
			want:   want{samples: 40, updated: true, readable: metav1.ConditionTrue, reason: ReasonCounted},
		},
		"a report of another store applies": {
			before: sednav1.DatasetStatus{NumberOfSamples: 40, UpdateTime: &metav1.Time{Time: counted}, ObservedGeneration: 1,
				Conditions: []metav1.Condition{{Type: ConditionReadable, Status: metav1.ConditionTrue, Reason: ReasonCounted, Message: "40 samples counted", ObservedGeneration: 1}},
				LastReport: &sednav1.DatasetReportID{Node: "edge-0", Store: "wiped-store", ID: 9}},
			report: edgeproto.DatasetReport{NumberOfSamples: 3, CountedAt: counted},
			want:   want{samples: 3, updated: true, readable: metav1.ConditionTrue, reason: ReasonCounted, writesNow: true},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Generation: 1}, Status: tc.before}
			client := fake.NewSimpleClientset(ds)
			recorder := record.NewFakeRecorder(10)
			a := NewApplier(client, recorder, clock.RealClock{})
			tc.report.Namespace, tc.report.Name = "ns", "a"
			if err := a.ApplyDatasetReport(t.Context(), edgeproto.Source{Node: "edge-0", Store: "store-1"}, &edgeproto.Report{ID: 1}, &tc.report); err != nil {
				t.Fatal(err)
			}
			writes := 0
			for _, action := range client.Actions() {
				if action.GetVerb() == "update" {
					writes++
				}
			}
			got, err := client.SednaV1alpha1().Datasets("ns").Get(t.Context(), "a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cond := got.Status.Conditions[0]
			gotWant := want{samples: got.Status.NumberOfSamples, updated: got.Status.UpdateTime != nil,
				readable: cond.Status, reason: cond.Reason, events: len(recorder.Events), writesNow: writes == 1}
			if diff := cmp.Diff(tc.want, gotWant, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestApplyDatasetReportRefusesAMissingDataset(t *testing.T) {
	a := NewApplier(fake.NewSimpleClientset(), record.NewFakeRecorder(1), clock.RealClock{})
	err := a.ApplyDatasetReport(t.Context(), edgeproto.Source{Node: "edge-0", Store: "store-1"}, &edgeproto.Report{ID: 1},
		&edgeproto.DatasetReport{Namespace: "ns", Name: "gone", CountedAt: time.Now()})
	if _, refused := edgeproto.IsRefused(err); !refused {
		t.Fatalf("err = %v, want a refusal", err)
	}
}
