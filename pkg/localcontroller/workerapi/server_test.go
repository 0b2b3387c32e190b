package workerapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

const trainReport = `{"name":"job-training-0-abc","namespace":"ns","ownerName":"job","ownerKind":"federatedlearningjob",` +
	`"kind":"train","status":"running","ownerInfo":{"currentRound":2},"results":[]}`

func newServer(t *testing.T, opts store.Options) (*Server, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "lc.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	job := store.Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "job"}
	if err := st.PutObject(job, "1", []string{"job-aggregation-0", "job-training-0-abc"}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	s := NewServer(klog.Background(), st, st)
	s.now = func() time.Time { return time.Unix(1000, 0) }
	return s, st
}

func post(t *testing.T, s *Server, worker, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/sedna/workers/"+worker+"/info", strings.NewReader(body))
	s.Handler().ServeHTTP(rec, req)
	return rec
}

func TestReportIsOnDiskBeforeTheWorkerGets200(t *testing.T) {
	s, st := newServer(t, store.Options{})
	rec := post(t, s, "job-training-0-abc", trainReport)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	pending, err := st.PendingReports(0, 0)
	if err != nil || len(pending) != 1 {
		t.Fatalf("outbox: %v, %d reports, want 1", err, len(pending))
	}
	var got edgeproto.Report
	if err := json.Unmarshal(pending[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	want := edgeproto.Report{Worker: "job-training-0-abc", Body: json.RawMessage(trainReport), ReceivedAt: time.Unix(1000, 0).UTC()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("buffered report (-want,+got):\n%s", diff)
	}
}

func TestRefusedReportsSayWhyAndBufferNothing(t *testing.T) {
	cases := map[string]struct {
		worker, body string
		method       string
		wantCode     int
		wantReason   string
	}{
		"not JSON": {worker: "w", body: `{"name":`, wantCode: http.StatusBadRequest, wantReason: "JSON"},
		"unknown ownerKind": {worker: "job-training-0-abc", wantCode: http.StatusBadRequest, wantReason: "ownerKind",
			body: strings.Replace(trainReport, "federatedlearningjob", "cronjob", 1)},
		"missing status": {worker: "job-training-0-abc", wantCode: http.StatusBadRequest, wantReason: "status",
			body: strings.Replace(trainReport, `"status":"running",`, "", 1)},
		"name differs from the URL": {worker: "someone-else", body: trainReport, wantCode: http.StatusBadRequest, wantReason: "someone-else"},
		"owner not on this node": {worker: "job-training-0-abc", wantCode: http.StatusNotFound, wantReason: "federatedlearningjob ns/other",
			body: strings.Replace(trainReport, `"ownerName":"job"`, `"ownerName":"other"`, 1)},
		"a name that is no pod of the job on this node": {worker: "job-training-9-xyz", wantCode: http.StatusNotFound,
			wantReason: "job-training-9-xyz is not a pod of federatedlearningjob ns/job on this node",
			body:       strings.Replace(trainReport, `"name":"job-training-0-abc"`, `"name":"job-training-9-xyz"`, 1)},
		"too large": {worker: "job-training-0-abc", wantCode: http.StatusRequestEntityTooLarge, wantReason: "bytes",
			body: strings.Replace(trainReport, `"results":[]`, `"results":[{"pad":"`+strings.Repeat("x", MaxBodyBytes)+`"}]`, 1)},
		"the LocalController's own name": {worker: edgeproto.LocalControllerWorker, wantCode: http.StatusBadRequest, wantReason: "reserved for the LocalController",
			body: strings.Replace(trainReport, `"name":"job-training-0-abc"`, `"name":"`+edgeproto.LocalControllerWorker+`"`, 1)},
		"wrong method": {worker: "job-training-0-abc", body: trainReport, method: http.MethodGet, wantCode: http.StatusMethodNotAllowed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, st := newServer(t, store.Options{})
			rec := httptest.NewRecorder()
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			s.Handler().ServeHTTP(rec, httptest.NewRequest(method, "/sedna/workers/"+tc.worker+"/info", strings.NewReader(tc.body)))
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), tc.wantReason) {
				t.Errorf("reason %q does not mention %q", rec.Body, tc.wantReason)
			}
			if n, _, _ := st.OutboxLen(); n != 0 {
				t.Errorf("a refused report was buffered")
			}
		})
	}
}

func TestFullOutboxAsksTheWorkerToRetryAndLosesNothing(t *testing.T) {
	s, st := newServer(t, store.Options{MaxOutboxReports: 2})
	for i := range 2 {
		if rec := post(t, s, "job-training-0-abc", trainReport); rec.Code != http.StatusOK {
			t.Fatalf("report %d: status %d", i, rec.Code)
		}
	}
	rec := post(t, s, "job-training-0-abc", trainReport)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("third report: status %d, Retry-After %q; want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if n, _, _ := st.OutboxLen(); n != 2 {
		t.Errorf("outbox holds %d reports, want the 2 accepted", n)
	}
}
