package workerapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

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
	// httptest.NewRequest's requests come from 192.0.2.1; a real
	// connection from 127.0.0.1.
	workers := []edgeproto.Worker{{Name: "job-aggregation-0", IPs: []string{aggregatorAddr}}, {Name: "job-training-0-abc", IPs: []string{trainerAddr, "127.0.0.1"}}}
	if err := st.PutObject(job, "1", workers, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	s := NewServer(klog.Background(), st, st)
	s.clock = testingclock.NewFakeClock(time.Unix(1000, 0))
	return s, st
}

// The addresses of newServer's workers.
const (
	trainerAddr    = "192.0.2.1" // httptest.NewRequest's
	aggregatorAddr = "192.0.2.2"
)

func post(t *testing.T, s *Server, worker, body string) *httptest.ResponseRecorder {
	t.Helper()
	return postFrom(t, s, trainerAddr, http.MethodPost, worker, strings.NewReader(body))
}

// postFrom calls s as a caller at addr.
func postFrom(t *testing.T, s *Server, addr, method, worker string, body io.Reader) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, "/sedna/workers/"+worker+"/info", body)
	req.RemoteAddr = net.JoinHostPort(addr, "40000")
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
	want := edgeproto.Report{Worker: "job-training-0-abc", Body: json.RawMessage(trainReport), ReceivedAt: time.Unix(1000, 0).UTC(), From: trainerAddr}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("buffered report (-want,+got):\n%s", diff)
	}
}

func TestRefusedReportsSayWhyAndBufferNothing(t *testing.T) {
	cases := map[string]struct {
		worker, body string
		method       string
		from         string // trainerAddr if empty
		wantCode     int
		wantReason   string
	}{
		"not JSON": {worker: "job-training-0-abc", body: `{"name":`, wantCode: http.StatusBadRequest, wantReason: "JSON"},
		"unknown kind": {worker: "job-training-0-abc", wantCode: http.StatusBadRequest, wantReason: "kind",
			body: strings.Replace(trainReport, `"kind":"train"`, `"kind":"fit"`, 1)},
		"missing status": {worker: "job-training-0-abc", wantCode: http.StatusBadRequest, wantReason: "status",
			body: strings.Replace(trainReport, `"status":"running",`, "", 1)},
		"name differs from the URL": {worker: "job-aggregation-0", from: aggregatorAddr, body: trainReport, wantCode: http.StatusBadRequest,
			wantReason: "in the body is not the worker"},
		"a name that is no pod of the node": {worker: "job-training-9-xyz", wantCode: http.StatusForbidden,
			wantReason: "a report for worker job-training-9-xyz is taken only from the address of its pod on this node, and 192.0.2.1 is not it",
			body:       strings.Replace(trainReport, `"name":"job-training-0-abc"`, `"name":"job-training-9-xyz"`, 1)},
		"a worker's report from another worker's address": {worker: "job-training-0-abc", from: aggregatorAddr, body: trainReport, wantCode: http.StatusForbidden,
			wantReason: "a report for worker job-training-0-abc is taken only from the address of its pod on this node, and 192.0.2.2 is not it"},
		"a worker's report from an address no worker has": {worker: "job-training-0-abc", from: "10.1.2.3", body: trainReport, wantCode: http.StatusForbidden,
			wantReason: "and 10.1.2.3 is not it"},
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
			method, from := tc.method, tc.from
			if method == "" {
				method = http.MethodPost
			}
			if from == "" {
				from = trainerAddr
			}
			rec := postFrom(t, s, from, method, tc.worker, strings.NewReader(tc.body))
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
	// Workers' share: 4; the trainer's, with the outbox over half full, 2 (of
	// the node's 2 workers).
	s, st := newServer(t, store.Options{MaxOutboxReports: 5})
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

func (b blockedOutbox) AppendWorkerReport(string, []byte) (uint64, error) {
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
	w := "job-training-0-abc"
	rec := post(t, s, w, `{"name":"`+w+`","namespace":"ns","ownerName":"job","ownerKind":"federatedlearningjob","kind":"`+long+`","status":"`+long+`"}`)
	if rec.Code != http.StatusBadRequest || rec.Body.Len() > maxReasonBytes+64 {
		t.Errorf("refusal %d of %d bytes, want 400 in at most %d", rec.Code, rec.Body.Len(), maxReasonBytes+64)
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

// readRecorder records whether a body was read.
type readRecorder struct {
	io.Reader
	read bool
}

func (r *readRecorder) Read(p []byte) (int, error) {
	r.read = true
	return r.Reader.Read(p)
}

// A caller that is not the worker it names is refused before its body is
// read; a worker whose pod has no address yet is waited for, and taken from
// the address it gets.
func TestAReportIsTakenOnlyFromItsWorkersAddress(t *testing.T) {
	s, st := newServer(t, store.Options{})
	body := &readRecorder{Reader: strings.NewReader(trainReport)}
	if rec := postFrom(t, s, aggregatorAddr, http.MethodPost, "job-training-0-abc", body); rec.Code != http.StatusForbidden {
		t.Errorf("the trainer's report from the aggregator's address: %d %s, want 403", rec.Code, rec.Body)
	}
	if body.read {
		t.Errorf("the body of a caller at another worker's address was read")
	}

	// A pod starting: its name is known, its address not yet.
	starting := strings.Replace(trainReport, "job-training-0-abc", "job-training-1-def", 1)
	job := store.Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "job"}
	workers := []edgeproto.Worker{{Name: "job-training-1-def"}}
	if err := st.PutObject(job, "2", workers, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan string, 1)
	s.owners = waitingOwners{Owners: st, waiting: waiting}
	done := make(chan int)
	go func() {
		done <- postFrom(t, s, "192.0.2.7", http.MethodPost, "job-training-1-def", strings.NewReader(starting)).Code
	}()
	if w := <-waiting; w != "job-training-1-def" {
		t.Fatalf("the report waits for %s's address, want job-training-1-def's", w)
	}
	workers[0].IPs = []string{"192.0.2.7"}
	if err := st.PutObject(job, "3", workers, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusOK {
		t.Errorf("a starting worker's report, its address sent while it waited: %d, want 200", code)
	}
	s.addressWait = 50 * time.Millisecond
	workers = append(workers, edgeproto.Worker{Name: "job-training-2-ghi"})
	if err := st.PutObject(job, "4", workers, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if rec := postFrom(t, s, "192.0.2.8", http.MethodPost, "job-training-2-ghi", strings.NewReader(trainReport)); rec.Code != http.StatusForbidden {
		t.Errorf("a starting worker's report whose address never came: %d, want 403", rec.Code)
	}
}

// waitingOwners are Owners that say which worker a report waits for, as it
// starts waiting.
type waitingOwners struct {
	Owners
	waiting chan<- string
}

func (o waitingOwners) WaitWorkerAt(ctx context.Context, worker string, addr netip.Addr) bool {
	select {
	case o.waiting <- worker:
	default:
	}
	return o.Owners.WaitWorkerAt(ctx, worker, addr)
}

// A connection from an address no worker of the node has is closed as it
// is accepted, holding none of the API's connections; while a worker has no
// address yet, a bounded number are served.
func TestConnectionsFromNoWorkersAddressAreClosedAtOnce(t *testing.T) {
	s, st := newServer(t, store.Options{})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{}, 64)
	s.Refused = func() { refused <- struct{}{} }
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Listener = Limits.Listener(s.Listener(raw))
	srv.Start()
	defer srv.Close()
	dialFrom := func(ip string) net.Conn { return dialFrom(t, raw.Addr().String(), ip) }
	closedAtOnce := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF || (err != nil && !errors.Is(err, os.ErrDeadlineExceeded))
	}
	// 127.0.0.1 is the trainer's; 127.0.0.2 no worker's.
	stranger := dialFrom("127.0.0.2")
	defer stranger.Close()
	if !closedAtOnce(stranger) {
		t.Errorf("a connection from an address no worker has was not closed")
	}
	<-refused
	worker := dialFrom("127.0.0.1")
	defer worker.Close()
	if _, err := io.WriteString(worker, "POST /sedna/workers/job-training-0-abc/info HTTP/1.1\r\nHost: x\r\nContent-Length: "+
		strconv.Itoa(len(trainReport))+"\r\n\r\n"+trainReport); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(worker), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the worker's own connection: %v, %v; want 200", resp, err)
	}

	// A starting worker: strangers are served, MaxUnknownConnections at once.
	job := store.Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "starting"}
	if err := st.PutObject(job, "1", []edgeproto.Worker{{Name: "starting-0"}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	var open []net.Conn
	for range MaxUnknownConnections {
		c := dialFrom("127.0.0.3")
		open = append(open, c)
		defer c.Close()
	}
	// The server has taken them when a request on the last is answered.
	if _, err := io.WriteString(open[len(open)-1], "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(open[len(open)-1]), nil); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a stranger's request while a worker starts: %v, %v; want served (404)", resp, err)
	}
	if extra := dialFrom("127.0.0.3"); !closedAtOnce(extra) {
		t.Errorf("connection %d from an unknown address was served, past MaxUnknownConnections", MaxUnknownConnections+1)
	}
}

// One worker's address holds at most MaxConnectionsPerAddress connections:
// the next is closed as it comes, and another worker is still served.
func TestOneAddressHoldsABoundedShareOfTheConnections(t *testing.T) {
	s, _ := newServer(t, store.Options{})
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Listener = Limits.Listener(s.Listener(raw))
	srv.Start()
	defer srv.Close()
	// The trainer is at 127.0.0.1 (newServer); edge-0's other worker here.
	job := store.Key{Kind: "FederatedLearningJob", Namespace: "ns", Name: "other"}
	if err := s.owners.(*store.Store).PutObject(job, "1", []edgeproto.Worker{{Name: "other-0", IPs: []string{"127.0.0.9"}}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	dial := func(ip string) net.Conn { return dialFrom(t, raw.Addr().String(), ip) }
	served := func(c net.Conn) bool {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return false
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		return err == nil && resp.StatusCode == http.StatusNotFound
	}
	for i := range MaxConnectionsPerAddress {
		if c := dial("127.0.0.1"); !served(c) {
			t.Fatalf("connection %d from the trainer's address was not served", i+1)
		}
	}
	if served(dial("127.0.0.1")) {
		t.Errorf("connection %d from one address was served, past MaxConnectionsPerAddress", MaxConnectionsPerAddress+1)
	}
	if !served(dial("127.0.0.9")) {
		t.Errorf("another worker's connection was not served while the trainer's address held its share")
	}
}

// dialFrom connects to addr from the local address ip; the connection is
// closed when the test ends.
func dialFrom(t *testing.T, addr, ip string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
