package workerapi

import (
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
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
		"owner not on this node": {worker: "job-training-0-abc", wantCode: http.StatusNotFound,
			wantReason: "job-training-0-abc is not a pod of federatedlearningjob ns/other on this node",
			body:       strings.Replace(trainReport, `"ownerName":"job"`, `"ownerName":"other"`, 1)},
		"a name that is no pod of the job on this node": {worker: "job-training-9-xyz", wantCode: http.StatusNotFound,
			wantReason: "job-training-9-xyz is not a pod of federatedlearningjob ns/job on this node",
			body:       strings.Replace(trainReport, `"name":"job-training-0-abc"`, `"name":"job-training-9-xyz"`, 1)},
		"too large": {worker: "job-training-0-abc", wantCode: http.StatusRequestEntityTooLarge, wantReason: "bytes",
			body: strings.Replace(trainReport, `"results":[]`, `"results":[{"pad":"`+strings.Repeat("x", MaxBodyBytes)+`"}]`, 1)},
		"the LocalController's own name": {worker: edgeproto.LocalControllerWorker, wantCode: http.StatusBadRequest, wantReason: "reserved for the LocalController",
			body: strings.Replace(trainReport, `"name":"job-training-0-abc"`, `"name":"`+edgeproto.LocalControllerWorker+`"`, 1)},
		"the LocalController's own name in another case": {worker: "Nereid-LocalController", wantCode: http.StatusBadRequest, wantReason: "reserved for the LocalController",
			body: strings.Replace(trainReport, `"name":"job-training-0-abc"`, `"name":"Nereid-LocalController"`, 1)},
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
	s, st := newServer(t, store.Options{MaxOutboxReports: 3}) // workers' share: 2
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

// escapeHeavyReport is a valid report of about size bytes whose results are
// text that HTML escaping would make five times longer.
func escapeHeavyReport(size int) string {
	const unit = `<<<>>>&&&\"` // 10 characters, 11 bytes in JSON, 56 HTML-escaped
	text := strings.Repeat(unit, (size-len(trainReport)-32)/len(unit))
	return strings.Replace(trainReport, `"results":[]`, `"results":[{"log":"`+text+`"}]`, 1)
}

func TestReportTakenIsAReportThatFitsAFrame(t *testing.T) {
	s, st := newServer(t, store.Options{})
	body := escapeHeavyReport(MaxBodyBytes - 1)
	if len(body) >= MaxBodyBytes {
		t.Fatalf("body of %d bytes, want under %d", len(body), MaxBodyBytes)
	}
	// json.Marshal, as the worker API once stored reports, would have made a
	// record too large to send: the case is real.
	if naive, _ := json.Marshal(edgeproto.Report{ID: 1, Worker: "job-training-0-abc", Body: json.RawMessage(body), ReceivedAt: time.Unix(1000, 0)}); len(naive) <= edgeproto.MaxFrameBytes {
		t.Fatalf("the HTML-escaped report is %d bytes, want over a frame (%d) for this test to mean anything", len(naive), edgeproto.MaxFrameBytes)
	}

	rec := post(t, s, "job-training-0-abc", body)
	pending, err := st.PendingReports(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	switch rec.Code {
	case http.StatusOK:
		// Taken: it must go up as it came in, whatever its ID.
		if len(pending) != 1 {
			t.Fatalf("answered 200 but the outbox holds %d reports", len(pending))
		}
		r, err := edgeproto.ReportFromOutbox(math.MaxInt64, pending[0].Data)
		if err != nil {
			t.Fatal(err)
		}
		frame, err := edgeproto.Encode(r)
		if err != nil {
			t.Fatalf("answered 200 but the stored report cannot be sent: %v", err)
		}
		if string(r.Body) != body {
			t.Errorf("the stored body differs from the body posted")
		}
		t.Logf("a %d-byte body is stored in %d bytes and sent in a %d-byte frame", len(body), len(pending[0].Data), len(frame))
	case http.StatusRequestEntityTooLarge:
		if len(pending) != 0 {
			t.Errorf("answered 413 but the outbox holds %d reports", len(pending))
		}
	default:
		t.Errorf("status %d, want 200 or 413: %s", rec.Code, rec.Body)
	}
}

func TestReportThatCannotFitAFrameIsRefusedWith413(t *testing.T) {
	s, st := newServer(t, store.Options{})
	// Only a body limit above the frame limit lets such a report in.
	s.maxBodyBytes = 2 * edgeproto.MaxFrameBytes
	body := strings.Replace(trainReport, `"results":[]`, `"results":[{"log":"`+strings.Repeat("x", edgeproto.MaxFrameBytes)+`"}]`, 1)

	rec := post(t, s, "job-training-0-abc", body)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413: %.300s", rec.Code, rec.Body)
	}
	if limit := strconv.Itoa(edgeproto.MaxFrameBytes); !strings.Contains(rec.Body.String(), limit) {
		t.Errorf("reason %.300q does not name the limit %s", rec.Body, limit)
	}
	if n, _, _ := st.OutboxLen(); n != 0 {
		t.Errorf("a refused report was buffered")
	}
}

// blockedOutbox holds every append until released.
type blockedOutbox struct {
	entered chan struct{}
	release chan struct{}
}

func (b blockedOutbox) AppendReport([]byte) (uint64, error) {
	b.entered <- struct{}{}
	<-b.release
	return 1, nil
}

// Reports taken at once are bounded (each holds its body in memory while it
// goes to disk): past the bound a worker is told at once to try again.
func TestReportsInFlightAreBounded(t *testing.T) {
	s, st := newServer(t, store.Options{})
	outbox := blockedOutbox{entered: make(chan struct{}), release: make(chan struct{})}
	s = NewServer(klog.Background(), outbox, st)
	s.inFlight, s.inFlightWait = make(chan struct{}, 2), 100*time.Millisecond
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- post(t, s, "job-training-0-abc", trainReport).Code }()
		<-outbox.entered
	}
	rec := post(t, s, "job-training-0-abc", trainReport)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("a third report while two are taken: %d, Retry-After %q (%s); want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	close(outbox.release)
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("a report taken: %d, want 200", code)
		}
	}
	go func() { <-outbox.entered }()
	if rec := post(t, s, "job-training-0-abc", trainReport); rec.Code != http.StatusOK {
		t.Errorf("a report once the others are done: %d (%s), want 200", rec.Code, rec.Body)
	}
}

// Any process that reaches the port can call the worker API: every bound
// of its server is set.
func TestTheWorkerAPIsServerIsBounded(t *testing.T) {
	l := Limits
	if l.ReadHeaderTimeout <= 0 || l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0 || l.MaxHeaderBytes <= 0 || l.MaxConnections <= 0 {
		t.Errorf("Limits %+v leave a bound off", l)
	}
	if cap(NewServer(klog.Background(), nil, nil).inFlight) != MaxInFlight {
		t.Error("a server does not bound its reports in flight by MaxInFlight")
	}
}

// A refusal repeats parts of the request: it stays short however long they are.
func TestRefusalsAreBounded(t *testing.T) {
	s, _ := newServer(t, store.Options{})
	long := strings.Repeat("x", 100<<10)
	rec := post(t, s, "w", `{"name":"w","namespace":"`+long+`","ownerName":"`+long+`","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`)
	if rec.Code != http.StatusNotFound || rec.Body.Len() > maxReasonBytes+64 {
		t.Errorf("refusal %d of %d bytes, want 404 in at most %d", rec.Code, rec.Body.Len(), maxReasonBytes+64)
	}
}

// A caller that sends its body slowly holds no slot of the reports being
// taken: slots are taken once a body is read, so a worker's report goes on.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	s, _ := newServer(t, store.Options{})
	s.inFlight = make(chan struct{}, 2)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for range cap(s.inFlight) + 1 {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /sedna/workers/job-training-0-abc/info HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(srv.URL+"/sedna/workers/job-training-0-abc/info", "application/json", strings.NewReader(trainReport))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Errorf("a report while %d slow bodies are being sent: %d %s, want 200", cap(s.inFlight)+1, resp.StatusCode, body)
	}
}
