package edgehub

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	sednafake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

const (
	testNS           = edgehubtest.ObjectNamespace
	hubNS            = edgehubtest.Namespace
	testDaemonSetUID = edgehubtest.DaemonSetUID
)

// The keys and identities of the test LocalControllers' stores.
const (
	testStoreKey   = "1111111111111111111111111111111111111111111111111111111111111111"
	secondStoreKey = "2222222222222222222222222222222222222222222222222222222222222222"
	// testLastReportID is the last report ID the test Hellos state: the
	// tests' reports come with any ID below it.
	testLastReportID = 1 << 20
)

var (
	testStore   = edgeproto.StoreIdentity(testStoreKey)
	secondStore = edgeproto.StoreIdentity(secondStoreKey)
)

// testConfig is quick enough for tests and slow enough not to be flaky: the
// hub's heartbeats are skipped by the clients' recv, and the clients send
// within ReadTimeout.
var testConfig = Config{
	Address:           "127.0.0.1:0",
	Namespace:         hubNS,
	HeartbeatPeriod:   time.Second,
	ReadTimeout:       10 * time.Second,
	ResendAfter:       300 * time.Millisecond,
	LeaseUpdatePeriod: 100 * time.Millisecond,
	// The EdgeLinked scan reads nodes and records events of its own; the
	// integration tests check it (edge_reach_test.go).
	ReachPeriod: -1,
}

// getLocalControllerPods answers reads of a Pod the tracker does not hold
// that edgehubtest.ReviewTokens binds a token to (lc-<node> in hubNS) with edgehubtest.LCPod(node),
// as if it had just been made.
func getLocalControllerPods(tracker clienttesting.ObjectTracker) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		get := action.(clienttesting.GetAction)
		if _, err := tracker.Get(get.GetResource(), get.GetNamespace(), get.GetName()); !apierrors.IsNotFound(err) {
			return false, nil, nil
		}
		node, ok := strings.CutPrefix(get.GetName(), "lc-")
		if get.GetNamespace() != hubNS || !ok {
			return false, nil, nil
		}
		return true, edgehubtest.LCPod(node), nil
	}
}

// recordedReport is one call of the test applier.
type datasetApplierFunc func(ctx context.Context, from reports.Source, r *edgeproto.Report, d *edgeproto.DatasetReport) error

func (f datasetApplierFunc) ApplyDatasetReport(ctx context.Context, from reports.Source, r *edgeproto.Report, d *edgeproto.DatasetReport) error {
	return f(ctx, from, r, d)
}

// recordedReport is one call of the test appliers.
type recordedReport struct {
	node  string
	store string
	id    uint64
	kind  string
}

// workerApplier is the test's applier of worker reports: it records each
// report and the call that had it, then asks applyErr.
type workerApplier struct{ f *fixture }

func (a workerApplier) ApplyReports(_ context.Context, from reports.Source, batch []edgeproto.WorkerReport) []error {
	f := a.f
	f.mu.Lock()
	f.calls++
	call := f.calls
	applyErr := f.applyErr
	f.mu.Unlock()
	return reports.ApplyInOrder(len(batch), func(i int) error {
		r := batch[i].Report
		f.mu.Lock()
		f.applied = append(f.applied, recordedReport{node: from.Node, store: from.Store, id: r.ID, kind: batch[i].Info.Owner().Kind})
		f.callOf[r.ID] = call
		f.mu.Unlock()
		if applyErr != nil {
			return applyErr(r)
		}
		return nil
	})
}

// fakeClock is the hub's clock in a test that moves time itself: a
// testingclock.FakeClock whose AfterFunc runs its function on a goroutine of
// its own, as time.AfterFunc does, and whose Step returns once the functions
// it made due have returned. FakeClock runs them inside Step, holding its
// lock, where one that resets its timer (session.every) or reads the clock
// would deadlock. It starts at the wall clock's now, so that the hub's
// certificate is valid.
type fakeClock struct {
	*testingclock.FakeClock
	running sync.WaitGroup
}

func newFakeClock() *fakeClock {
	return &fakeClock{FakeClock: testingclock.NewFakeClock(time.Now())}
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	timer := make(chan clock.Timer, 1)
	t := c.FakeClock.AfterFunc(d, func() {
		// FakeClock also sends on the timer's channel, which nothing
		// reads: a second firing, after a Reset, would block on it.
		t := <-timer
		<-t.C()
		timer <- t
		c.running.Add(1)
		go func() {
			defer c.running.Done()
			f()
		}()
	})
	timer <- t
	return t
}

// Step moves the clock on by d and waits for the functions that came due.
func (c *fakeClock) Step(d time.Duration) {
	c.FakeClock.Step(d)
	c.running.Wait()
}

// fixture runs a hub on loopback with fake clients.
type fixture struct {
	t     *testing.T
	kube  *kubefake.Clientset
	sedna *sednafake.Clientset
	hub   *Hub
	reg   *prometheus.Registry
	url   string
	// stop stops the hub and waits for Run to return.
	stop  func()
	roots *x509.CertPool
	// recorder holds the events the hub recorded.
	recorder *record.FakeRecorder

	mu      sync.Mutex
	applied []recordedReport
	calls   int            // of the worker applier
	callOf  map[uint64]int // the last call that had a report, by its ID
	// applyErr, when set, is what the applier returns (after recording);
	// it may block.
	applyErr func(r *edgeproto.Report) error
}

func newFixture(t *testing.T, cfg Config, objs ...runtime.Object) *fixture {
	t.Helper()
	kubeObjs, sednaObjs := []runtime.Object{edgehubtest.LCDaemonSet(testDaemonSetUID)}, []runtime.Object(nil)
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Pod, *corev1.Node, *corev1.ServiceAccount, *coordinationv1.Lease:
			kubeObjs = append(kubeObjs, o)
		default:
			sednaObjs = append(sednaObjs, o)
		}
	}
	f := &fixture{t: t, kube: kubefake.NewClientset(kubeObjs...), sedna: sednafake.NewSimpleClientset(sednaObjs...), callOf: map[uint64]int{}}
	f.kube.PrependReactor("create", "tokenreviews", edgehubtest.ReviewTokens)
	f.kube.PrependReactor("get", "nodes", edgehubtest.GetNodes)
	f.kube.PrependReactor("get", "pods", getLocalControllerPods(f.kube.Tracker()))

	// The fake clientset's watch starts after the informer's list; wait for
	// every watch so that no event falls between them.
	// Six sedna informers; the worker pods', the LocalController pods', the
	// ServiceAccount's, the edge nodes' and the DaemonSet's.
	const informers = 11
	watches := make(chan struct{}, informers)
	f.sedna.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := f.sedna.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		watches <- struct{}{}
		return true, w, nil
	})
	f.kube.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := f.kube.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		watches <- struct{}{}
		return true, w, nil
	})

	appliers := f.appliers()
	cfg.CAOutFile = filepath.Join(t.TempDir(), "ca.crt")
	factory := sednainformers.NewSharedInformerFactory(f.sedna, 0)
	kubeFactory := kubeinformers.NewSharedInformerFactory(f.kube, 0)
	ctx, cancel := context.WithCancel(t.Context())
	f.reg = prometheus.NewRegistry()
	f.recorder = record.NewFakeRecorder(100)
	hub, err := New(ctx, Deps{
		Kube: f.kube, Client: f.sedna, Informers: factory, Kinds: kinds.All(),
		Workers:  WorkerCachesOf(kubeFactory),
		Appliers: appliers, Recorder: f.recorder, Registerer: f.reg, Config: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.hub = hub
	factory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	ran := make(chan error, 1)
	go func() { ran <- hub.Run(ctx) }()
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-ran; err != nil {
				t.Errorf("Run: %v", err)
			}
			factory.Shutdown()
			kubeFactory.Shutdown()
		})
	}
	t.Cleanup(f.stop)
	for range informers {
		select {
		case <-watches:
		case <-time.After(10 * time.Second):
			t.Fatal("informers did not start watching")
		}
	}
	select {
	case <-hub.ready:
	case err := <-ran:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not start listening")
	}
	f.url = "wss://" + hub.addr.String() + ConnectPath
	ca, err := os.ReadFile(cfg.CAOutFile)
	if err != nil {
		t.Fatal(err)
	}
	f.roots = x509.NewCertPool()
	if !f.roots.AppendCertsFromPEM(ca) {
		t.Fatal("CA file holds no certificate")
	}
	return f
}

// appliers record in f what the hub applies: workers' reports of the two
// kinds and every dataset report.
func (f *fixture) appliers() reports.Appliers {
	applier := workerApplier{f}
	return reports.Appliers{Workers: map[string]reports.ReportApplier{
		"FederatedLearningJob":  applier,
		"JointInferenceService": applier,
	}, Datasets: datasetApplierFunc(func(_ context.Context, from reports.Source, r *edgeproto.Report, d *edgeproto.DatasetReport) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.applied = append(f.applied, recordedReport{node: from.Node, store: from.Store, id: r.ID, kind: d.Ref().Kind})
		return nil
	})}
}

// inventory is what a LocalController of node holding everything the hub
// wants it to hold says in its Hello.
func (f *fixture) inventory(node string) []edgeproto.ObjectVersion {
	var inv []edgeproto.ObjectVersion
	for ref, d := range f.hub.sets.Of(node) {
		inv = append(inv, d.ObjectVersion(ref))
	}
	return inv
}

// metric is the value of the counter or gauge name (without the
// nereid_edgehub_ prefix), summed over the series that have the label
// name=value pairs given.
func (f *fixture) metric(name string, labels ...string) float64 {
	f.t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() != "nereid_edgehub_"+name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue series
				}
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

func (f *fixture) reports() []recordedReport {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedReport(nil), f.applied...)
}

// dial connects with a bearer token; resp is the handshake's answer.
func (f *fixture) dial(token string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: f.roots}, HandshakeTimeout: 5 * time.Second}
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	return d.Dial(f.url, header)
}

// client is a test LocalController's end of a connection. A goroutine reads
// it, because a gorilla connection whose read timed out cannot read again.
type client struct {
	t        *testing.T
	conn     *websocket.Conn
	incoming chan received
}

// received is one frame read, or the read's final error.
type received struct {
	msg edgeproto.Message
	err error
}

// errQuiet is recv's error when nothing came in time.
var errQuiet = errors.New("nothing received")

// connect dials as node (its token) and sends hello.
func (f *fixture) connect(node string, hello *edgeproto.Hello) *client {
	f.t.Helper()
	c := f.open(node)
	c.send(hello)
	return c
}

// open dials as node and reads what comes.
func (f *fixture) open(node string) *client {
	f.t.Helper()
	conn, resp, err := f.dial(edgehubtest.JWT("token-"+node, nil))
	if err != nil {
		f.t.Fatalf("dialing as %s: %v (response %v)", node, err, resp)
	}
	c := &client{t: f.t, conn: conn, incoming: make(chan received, 64)}
	go func() {
		defer close(c.incoming)
		for {
			_, frame, err := conn.ReadMessage()
			if err != nil {
				c.incoming <- received{err: err}
				return
			}
			m, err := edgeproto.Decode(frame)
			if err != nil {
				c.incoming <- received{err: fmt.Errorf("decoding a frame from the hub: %w", err)}
				return
			}
			if m.Type() != edgeproto.TypeHeartbeat {
				c.incoming <- received{msg: m}
			}
		}
	}()
	f.t.Cleanup(func() {
		conn.Close()
		for range c.incoming {
		}
	})
	return c
}

func (c *client) send(m edgeproto.Message) {
	c.t.Helper()
	frame, err := edgeproto.Encode(m)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.conn.WriteMessage(websocket.TextMessage, frame); err != nil {
		c.t.Fatalf("sending %s: %v", m.Type(), err)
	}
}

// sendHello sends hello in the frames EncodeHello makes of it and returns
// how many it took.
func (c *client) sendHello(hello *edgeproto.Hello) int {
	c.t.Helper()
	frames, err := edgeproto.EncodeHello(hello)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, frame := range frames {
		if err := c.conn.WriteMessage(websocket.TextMessage, frame); err != nil {
			c.t.Fatalf("sending the hello: %v", err)
		}
	}
	return len(frames)
}

// recv returns the next message other than a heartbeat, the read error, or
// errQuiet after timeout.
func (c *client) recv(timeout time.Duration) (edgeproto.Message, error) {
	select {
	case r, ok := <-c.incoming:
		if !ok {
			return nil, errors.New("connection already ended")
		}
		return r.msg, r.err
	case <-time.After(timeout):
		return nil, errQuiet
	}
}

// must returns the next message, failing the test on an error.
func (c *client) must(timeout time.Duration) edgeproto.Message {
	c.t.Helper()
	m, err := c.recv(timeout)
	if err != nil {
		c.t.Fatalf("receiving: %v", err)
	}
	return m
}

// untilSynced returns the messages up to Synced, summarized.
func (c *client) untilSynced() []string {
	c.t.Helper()
	var got []string
	for {
		m := c.must(5 * time.Second)
		if m.Type() == edgeproto.TypeSynced {
			return got
		}
		got = append(got, summary(m))
	}
}

// quiet checks that nothing but heartbeats comes for d.
func (c *client) quiet(d time.Duration) {
	c.t.Helper()
	if m, err := c.recv(d); err == nil {
		c.t.Fatalf("got %s, want nothing", summary(m))
	} else if err != errQuiet {
		c.t.Fatalf("got %v, want nothing", err)
	}
}

// closed waits for the hub's close frame and returns it; any message before
// it fails the test.
func (c *client) closed() *websocket.CloseError {
	c.t.Helper()
	m, err := c.recv(5 * time.Second)
	if err == nil {
		c.t.Fatalf("got %s, want the connection closed", summary(m))
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		c.t.Fatalf("got %v, want a close frame", err)
	}
	return ce
}

// summary is a message in one comparable line.
func summary(m edgeproto.Message) string {
	switch m := m.(type) {
	case *edgeproto.Upsert:
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		_ = json.Unmarshal(m.Object, &obj)
		return fmt.Sprintf("upsert %s (%s %s)", m.ObjectVersion, obj.APIVersion, obj.Kind)
	case *edgeproto.Delete:
		return "delete " + m.ObjectVersion.String()
	case *edgeproto.ReportAck:
		s := fmt.Sprintf("reportAck %v", m.IDs)
		for _, r := range m.Refused {
			s += fmt.Sprintf(" refused %d: %s", r.ID, r.Reason)
		}
		return s
	}
	return string(m.Type())
}

func version(kind, name, rv string) edgeproto.ObjectVersion {
	return edgeproto.ObjectVersion{ObjectRef: edgeproto.ObjectRef{Kind: kind, Namespace: testNS, Name: name}, ResourceVersion: rv}
}

// greetingFor is the connection of node reading its Hello, if any.
func (h *Hub) greetingFor(node string) *websocket.Conn {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.greeting[node]
}

// runningReport is report id of fl-a's trainer w-fl on edge-a saying it
// runs.
func runningReport(id uint64) *edgeproto.Report {
	const body = `{"name":"w-fl","namespace":"default","ownerName":"fl-a","ownerKind":"federatedlearningjob","kind":"train","status":"running"}`
	return &edgeproto.Report{ID: id, Worker: "w-fl", Body: []byte(body), ReceivedAt: time.Now()}
}
