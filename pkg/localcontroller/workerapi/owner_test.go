package workerapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// A report is for the object whose pod the worker is, whatever the body
// says of its owner: Sedna's own library sends ownerKind "default" from a
// federated trainer and ownerName "sedna" from a joint inference worker.
func TestAReportIsForTheObjectWhosePodTheWorkerIs(t *testing.T) {
	service := store.Key{Kind: "JointInferenceService", Namespace: "ns", Name: "helmet"}
	cases := map[string]struct {
		worker, from string
		body         string
		// others are objects stored beside newServer's job.
		others    map[store.Key][]edgeproto.Worker
		wantOwner string // "kind namespace/name"; "" when refused
		wantCode  int
		// wantSame says the body goes up byte for byte.
		wantSame bool
	}{
		"a body that names its owner right": {worker: "job-training-0-abc", body: trainReport,
			wantOwner: "federatedlearningjob ns/job", wantCode: http.StatusOK, wantSame: true},
		"Sedna's federated trainer: ownerKind default": {worker: "job-training-0-abc",
			body:      strings.Replace(trainReport, `"ownerKind":"federatedlearningjob"`, `"ownerKind":"default"`, 1),
			wantOwner: "federatedlearningjob ns/job", wantCode: http.StatusOK},
		"Sedna's joint inference worker: ownerName sedna": {worker: "helmet-edge-7d9f-x1", from: "192.0.2.9",
			others: map[store.Key][]edgeproto.Worker{service: {{Name: "helmet-edge-7d9f-x1", IPs: []string{"192.0.2.9"}}}},
			body: `{"name":"helmet-edge-7d9f-x1","namespace":"ns","ownerName":"sedna","ownerKind":"jointinferenceservice",` +
				`"kind":"inference","ownerInfo":{"inferenceNumber":3},"results":[]}`,
			wantOwner: "jointinferenceservice ns/helmet", wantCode: http.StatusOK},
		"a body naming another object and namespace": {worker: "job-training-0-abc",
			body:      strings.NewReplacer(`"ownerName":"job"`, `"ownerName":"other"`, `"namespace":"ns"`, `"namespace":"kube-system"`).Replace(trainReport),
			wantOwner: "federatedlearningjob ns/job", wantCode: http.StatusOK},
		"a second spelling of ownerKind does not survive": {worker: "job-training-0-abc",
			body:      strings.Replace(trainReport, `"ownerKind":"federatedlearningjob"`, `"ownerKind":"default","ownerkind":"jointinferenceservice"`, 1),
			wantOwner: "federatedlearningjob ns/job", wantCode: http.StatusOK},
		"a pod of two objects: the body chooses": {worker: "job-training-0-abc",
			others:    map[store.Key][]edgeproto.Worker{service: {{Name: "job-training-0-abc", IPs: []string{trainerAddr}}}},
			body:      strings.NewReplacer(`"ownerName":"job"`, `"ownerName":"helmet"`, `"ownerKind":"federatedlearningjob"`, `"ownerKind":"jointinferenceservice"`).Replace(trainReport),
			wantOwner: "jointinferenceservice ns/helmet", wantCode: http.StatusOK, wantSame: true},
		"a pod of two objects and a body naming neither": {worker: "job-training-0-abc",
			others:   map[store.Key][]edgeproto.Worker{service: {{Name: "job-training-0-abc", IPs: []string{trainerAddr}}}},
			body:     strings.Replace(trainReport, `"ownerKind":"federatedlearningjob"`, `"ownerKind":"default"`, 1),
			wantCode: http.StatusForbidden},
		"a pod of an object of a kind whose workers do not report": {worker: "learner-0", from: "192.0.2.9",
			others: map[store.Key][]edgeproto.Worker{{Kind: "DIJob", Namespace: "ns", Name: "rl"}: {{Name: "learner-0", IPs: []string{"192.0.2.9"}}}},
			body:   strings.Replace(trainReport, `"name":"job-training-0-abc"`, `"name":"learner-0"`, 1), wantCode: http.StatusForbidden},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, st := newServer(t, store.Options{})
			for k, ws := range tc.others {
				if err := st.PutObject(k, "1", ws, []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			from := tc.from
			if from == "" {
				from = trainerAddr
			}
			rec := postFrom(t, s, from, http.MethodPost, tc.worker, strings.NewReader(tc.body))
			if rec.Code != tc.wantCode {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			pending, err := st.PendingReports(0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantOwner == "" {
				if len(pending) != 0 {
					t.Errorf("a refused report was buffered")
				}
				return
			}
			if len(pending) != 1 {
				t.Fatalf("%d reports buffered, want 1", len(pending))
			}
			var r edgeproto.Report
			if err := json.Unmarshal(pending[0].Data, &r); err != nil {
				t.Fatal(err)
			}
			// What the GlobalManager reads of it.
			info, err := edgeproto.ParseWorkerInfo(r.Body)
			if err != nil {
				t.Fatalf("the GlobalManager would refuse the buffered body: %v", err)
			}
			if got := string(info.OwnerKind) + " " + info.Namespace + "/" + info.OwnerName; got != tc.wantOwner {
				t.Errorf("buffered for %s, want %s", got, tc.wantOwner)
			}
			if same := string(r.Body) == tc.body; same != tc.wantSame {
				t.Errorf("body sent as it came: %v, want %v", same, tc.wantSame)
			}
			var before, after map[string]any
			_ = json.Unmarshal([]byte(tc.body), &before)
			_ = json.Unmarshal(r.Body, &after)
			for _, k := range []string{"namespace", "ownerName", "ownerKind", "ownerkind"} {
				delete(before, k)
				delete(after, k)
			}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("the rest of the body changed (-want,+got):\n%s", diff)
			}
		})
	}
}
