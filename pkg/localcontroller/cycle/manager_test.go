package cycle

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/nodefs"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

// wall is the wall clock of the tests, in the LocalController's zone.
var wall = time.Date(2025, 3, 1, 12, 0, 0, 0, time.Local)

// recordingOutbox appends to a real store and keeps the reports it took.
type recordingOutbox struct {
	st      *store.Store
	reports []edgeproto.Report
	fail    error
}

func (o *recordingOutbox) AppendReportWithState(data []byte, key string, state []byte) (uint64, error) {
	if o.fail != nil {
		return 0, o.fail
	}
	var r edgeproto.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return 0, err
	}
	o.reports = append(o.reports, r)
	return o.st.AppendReportWithState(data, key, state)
}

type fixture struct {
	st     *store.Store
	outbox *recordingOutbox
	root   string
	// mono is the fake monotonic clock of the managers the fixture makes,
	// wall their wall clock.
	mono *testingclock.FakeClock
	wall *testingclock.FakePassiveClock
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "lc.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &fixture{st: st, outbox: &recordingOutbox{st: st}, root: t.TempDir(), mono: testingclock.NewFakeClock(time.Unix(1000, 0)), wall: testingclock.NewFakePassiveClock(wall)}
}

func (f *fixture) manager() *Manager {
	m := NewManager(f.st, f.outbox, Config{Node: "edge-0", Root: nodefs.Root{Dir: f.root}})
	m.Wall, m.clock = f.wall, f.mono
	return m
}

func (f *fixture) put(t *testing.T, kind, name string, obj any) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutObject(store.Key{Kind: kind, Namespace: "ns", Name: name}, "1", nil, data); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) putDataset(t *testing.T, url, format, node string) {
	t.Helper()
	f.put(t, "Dataset", "ds", sednav1.Dataset{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ds"},
		Spec:       sednav1.DatasetSpec{URL: url, Format: format, NodeName: node},
	})
}

func (f *fixture) putModel(t *testing.T, name, url string) {
	t.Helper()
	f.put(t, "Model", name, sednav1.Model{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:       sednav1.ModelSpec{URL: url, Format: "pb"},
	})
}

// trainTrigger is a trigger checked every minute that fires on 5 new samples.
var trainTrigger = sednav1.Trigger{
	CheckPeriodSeconds: 60,
	Condition:          sednav1.TriggerCondition{Operator: ">=", Threshold: 5, Metric: "num_of_samples"},
}

func ilJob(uid string, trigger sednav1.Trigger, status sednav1.CycleStatus) sednav1.IncrementalLearningJob {
	return sednav1.IncrementalLearningJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "il", UID: types.UID(uid)},
		Spec: sednav1.IncrementalLearningJobSpec{
			Dataset:    sednav1.CycleDataset{Name: "ds", TrainProb: 0.8},
			TrainSpec:  sednav1.TrainSpec{Trigger: trigger},
			DeploySpec: sednav1.DeploySpec{Model: sednav1.DeployModel{Name: "deploy-model"}},
			OutputDir:  "/output",
		},
		Status: sednav1.IncrementalLearningJobStatus{CycleStatus: status},
	}
}

// waiting is the status of a cycle waiting for round's train trigger.
func waiting(round int32) sednav1.CycleStatus {
	return sednav1.CycleStatus{Stage: sednav1.StageTrain, State: sednav1.StageWaiting, Round: round}
}

func (f *fixture) putIL(t *testing.T, trigger sednav1.Trigger, status sednav1.CycleStatus) {
	t.Helper()
	f.put(t, "IncrementalLearningJob", "il", ilJob("uid-1", trigger, status))
}

// writeLines writes n numbered samples (sample-1 …) to the node path url,
// after header when there is one.
func (f *fixture) writeLines(t *testing.T, url, header string, n int) {
	t.Helper()
	var b strings.Builder
	if header != "" {
		b.WriteString(header + "\n")
	}
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "sample-%d\n", i)
	}
	f.writeFile(t, url, b.String())
}

func (f *fixture) writeFile(t *testing.T, url, content string) {
	t.Helper()
	path := filepath.Join(f.root, url)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) readFile(t *testing.T, url string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.root, url))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func tick(t *testing.T, m *Manager) {
	t.Helper()
	if err := m.sync(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// take returns the bodies of the reports taken since the last call, as
// generic JSON, after checking they are the LocalController's own valid
// worker reports.
func (f *fixture) take(t *testing.T) []any {
	t.Helper()
	var out []any
	for _, r := range f.outbox.reports {
		if r.Kind != edgeproto.ReportWorker || r.Worker != edgeproto.LocalControllerWorker || !r.ReceivedAt.Equal(f.wall.Now()) {
			t.Errorf("report kind %q worker %q at %v: want a worker report from %s at %v", r.Kind, r.Worker, r.ReceivedAt,
				edgeproto.LocalControllerWorker, f.wall.Now())
		}
		if _, err := edgeproto.ParseWorkerInfo(r.Body); err != nil {
			t.Errorf("report body %s: %v", r.Body, err)
		}
		out = append(out, decode(t, string(r.Body)))
	}
	f.outbox.reports = nil
	return out
}

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}

// trainReady is the body of the train report of round of an il job.
func trainReady(t *testing.T, round, fresh, count int, ext string) any {
	return decode(t, fmt.Sprintf(`{"name":"nereid-localcontroller","namespace":"ns","ownerName":"il","ownerKind":"incrementallearningjob",`+
		`"kind":"train","status":"ready","ownerInfo":{"round":%d,"numberOfSamples":%d,"datasetSamples":%d,`+
		`"trainDatasetURL":"/output/round-%[1]d/data/train.%[4]s","testDatasetURL":"/output/round-%[1]d/data/test.%[4]s",`+
		`"triggeredAt":%q}}`, round, fresh, count, ext, wall.Format(time.RFC3339)))
}

func TestTriggerFiresOncePerRoundOnTheNewSamples(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 10)
	f.putIL(t, trainTrigger, waiting(1))
	m := f.manager()

	tick(t, m)
	if diff := cmp.Diff([]any{trainReady(t, 1, 10, 10, "txt")}, f.take(t)); diff != "" {
		t.Fatalf("round 1 (-want,+got):\n%s", diff)
	}

	// The cloud has not seen the report yet (its status still waits for round
	// 1): more samples and more checks fire nothing.
	f.writeLines(t, "/data/index.txt", "", 16)
	for range 3 {
		f.mono.Step(time.Hour)
		tick(t, m)
	}
	if got := f.take(t); len(got) != 0 {
		t.Fatalf("round 1 fired again: %v", got)
	}

	// The cloud moved on to round 2: the 6 samples since round 1 fire it.
	f.putIL(t, trainTrigger, waiting(2))
	tick(t, m)
	if diff := cmp.Diff([]any{trainReady(t, 2, 6, 16, "txt")}, f.take(t)); diff != "" {
		t.Fatalf("round 2 (-want,+got):\n%s", diff)
	}
	train, test := f.readFile(t, "/output/round-2/data/train.txt"), f.readFile(t, "/output/round-2/data/test.txt")
	got := strings.Fields(train + test)
	want := []string{"sample-11", "sample-12", "sample-13", "sample-14", "sample-15", "sample-16"}
	if !sameSet(got, want) {
		t.Errorf("round 2 trains and tests on %v, want the new samples %v", got, want)
	}
	if n := len(strings.Fields(train)); n != 5 { // round(0.8*6)
		t.Errorf("round 2 trains on %d samples, want 5", n)
	}
}

func TestTriggerHonoursItsCheckPeriod(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 2)
	f.putIL(t, trainTrigger, waiting(1))
	m := f.manager()

	tick(t, m) // checked at once: 2 < 5
	f.writeLines(t, "/data/index.txt", "", 8)
	f.mono.Step(59 * time.Second)
	tick(t, m)
	if got := f.take(t); len(got) != 0 {
		t.Fatalf("fired before the check period passed: %v", got)
	}
	if diff := cmp.Diff(map[string]float64{CheckNotMet: 1}, checks(m)); diff != "" {
		t.Errorf("checks within the period (-want,+got):\n%s", diff)
	}
	f.mono.Step(time.Second)
	tick(t, m)
	if diff := cmp.Diff([]any{trainReady(t, 1, 8, 8, "txt")}, f.take(t)); diff != "" {
		t.Errorf("after the period (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{CheckNotMet: 1, CheckFired: 1}, checks(m)); diff != "" {
		t.Errorf("checks after the period (-want,+got):\n%s", diff)
	}
}

// checks are the Manager's trigger checks by result, those that happened.
func checks(m *Manager) map[string]float64 {
	out := map[string]float64{}
	for _, r := range []string{CheckFired, CheckNotMet, CheckOutsideWindow, CheckUnevaluable} {
		if n := testutil.ToFloat64(m.checks.WithLabelValues(r)); n > 0 {
			out[r] = n
		}
	}
	return out
}

func TestTriggerDefaultsToAMinute(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 2)
	trigger := trainTrigger
	trigger.CheckPeriodSeconds = 0
	f.putIL(t, trigger, waiting(1))
	m := f.manager()
	tick(t, m)
	f.writeLines(t, "/data/index.txt", "", 8)
	f.mono.Step(DefaultCheckPeriod - time.Millisecond)
	tick(t, m)
	if got := f.take(t); len(got) != 0 {
		t.Fatalf("fired before a minute: %v", got)
	}
	f.mono.Step(time.Millisecond)
	tick(t, m)
	if got := f.take(t); len(got) != 1 {
		t.Errorf("%d reports after a minute, want 1", len(got))
	}
}

func TestTriggerWaitsForTheCloud(t *testing.T) {
	cases := map[string]struct {
		status sednav1.CycleStatus
		// prepared is the round this node last prepared.
		prepared int32
	}{
		"training":        {status: sednav1.CycleStatus{Stage: sednav1.StageTrain, State: sednav1.StageRunning, Round: 1}},
		"train ready":     {status: sednav1.CycleStatus{Stage: sednav1.StageTrain, State: sednav1.StageReady, Round: 1}},
		"evaluating":      {status: sednav1.CycleStatus{Stage: sednav1.StageEval, State: sednav1.StageWaiting, Round: 1}},
		"deploying":       {status: sednav1.CycleStatus{Stage: sednav1.StageDeploy, State: sednav1.StageRunning, Round: 1}},
		"round prepared":  {status: waiting(2), prepared: 2},
		"not started yet": {},
		"round 0":         {status: sednav1.CycleStatus{Stage: sednav1.StageTrain, State: sednav1.StageWaiting}},
		"an older round":  {status: waiting(1), prepared: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.putDataset(t, "/data/index.txt", "txt", "edge-0")
			f.writeLines(t, "/data/index.txt", "", 10)
			state := fmt.Sprintf(`{"uid":"uid-1","preparedRound":%d,"baseline":0}`, tc.prepared)
			if err := f.st.PutState("cycle/IncrementalLearningJob/ns/il", []byte(state)); err != nil {
				t.Fatal(err)
			}
			f.putIL(t, trainTrigger, tc.status)
			tick(t, f.manager())
			if got := f.take(t); len(got) != 0 {
				t.Errorf("fired: %v", got)
			}
		})
	}
}

func TestTriggerAfterARestartDoesNotPrepareARoundAgain(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 10)
	f.putIL(t, trainTrigger, waiting(1))
	tick(t, f.manager())
	if got := f.take(t); len(got) != 1 {
		t.Fatalf("%d reports, want 1", len(got))
	}

	// A new LocalController on the same store, the report maybe still in
	// the outbox: round 1 is prepared.
	f.writeLines(t, "/data/index.txt", "", 20)
	m := f.manager()
	tick(t, m)
	if got := f.take(t); len(got) != 0 {
		t.Fatalf("round 1 prepared again after a restart: %v", got)
	}
	// Its baseline survived too: round 2 counts from sample 11.
	f.putIL(t, trainTrigger, waiting(2))
	tick(t, m)
	if diff := cmp.Diff([]any{trainReady(t, 2, 10, 20, "txt")}, f.take(t)); diff != "" {
		t.Errorf("round 2 (-want,+got):\n%s", diff)
	}
}

func TestTriggerSplitsCSVKeepingTheHeader(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.csv", "csv", "edge-0")
	f.writeLines(t, "/data/index.csv", "x,y", 10)
	f.putIL(t, trainTrigger, waiting(1))
	m := f.manager()
	tick(t, m)
	if diff := cmp.Diff([]any{trainReady(t, 1, 10, 10, "csv")}, f.take(t)); diff != "" {
		t.Fatalf("(-want,+got):\n%s", diff)
	}
	train := strings.Split(strings.TrimSuffix(f.readFile(t, "/output/round-1/data/train.csv"), "\n"), "\n")
	test := strings.Split(strings.TrimSuffix(f.readFile(t, "/output/round-1/data/test.csv"), "\n"), "\n")
	if train[0] != "x,y" || test[0] != "x,y" {
		t.Fatalf("headers %q and %q, want x,y", train[0], test[0])
	}
	if len(train) != 1+8 || len(test) != 1+2 {
		t.Errorf("train has %d rows and test %d, want 8 and 2 after the header", len(train)-1, len(test)-1)
	}
	var want []string
	for i := 1; i <= 10; i++ {
		want = append(want, fmt.Sprintf("sample-%d", i))
	}
	if got := append(train[1:], test[1:]...); !sameSet(got, want) {
		t.Errorf("train+test = %v, want the samples", got)
	}
	if _, err := os.Stat(filepath.Join(f.root, "output/round-1/data/test.csv")); err != nil {
		t.Error(err)
	}
}

func TestTriggerCountsEverySampleOfAReplacedFile(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 10)
	f.putIL(t, trainTrigger, waiting(1))
	m := f.manager()
	tick(t, m)
	f.take(t)
	f.writeLines(t, "/data/index.txt", "", 6) // replaced by a shorter file
	f.putIL(t, trainTrigger, waiting(2))
	f.mono.Step(time.Minute)
	tick(t, m)
	if diff := cmp.Diff([]any{trainReady(t, 2, 6, 6, "txt")}, f.take(t)); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestTriggerFiresOnlyInItsTimerWindow(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 10)
	trigger := trainTrigger
	trigger.Timer = &sednav1.Timer{Start: "22:00", End: "06:00"}
	f.putIL(t, trigger, waiting(1))
	m := f.manager()
	tick(t, m) // noon
	if got := f.take(t); len(got) != 0 {
		t.Fatalf("fired at noon: %v", got)
	}
	if diff := cmp.Diff(map[string]float64{CheckOutsideWindow: 1}, checks(m)); diff != "" {
		t.Errorf("checks at noon (-want,+got):\n%s", diff)
	}
	f.wall.SetTime(time.Date(2025, 3, 1, 23, 0, 0, 0, time.Local))
	f.mono.Step(time.Minute)
	tick(t, m)
	got := f.take(t)
	if len(got) != 1 {
		t.Fatalf("%d reports at 23:00, want 1", len(got))
	}
	info := got[0].(map[string]any)["ownerInfo"].(map[string]any)
	if want := f.wall.Now().Format(time.RFC3339); info["triggeredAt"] != want {
		t.Errorf("triggeredAt %v, want %s", info["triggeredAt"], want)
	}
}

func TestTriggerNeverFiresOnWhatItCannotEvaluate(t *testing.T) {
	cases := map[string]struct {
		trigger sednav1.Trigger
		url     string
	}{
		"another metric":   {url: "/data/index.txt", trigger: sednav1.Trigger{Condition: sednav1.TriggerCondition{Operator: ">", Threshold: 0, Metric: "precision_delta"}}},
		"unknown operator": {url: "/data/index.txt", trigger: sednav1.Trigger{Condition: sednav1.TriggerCondition{Operator: "!=", Threshold: 0, Metric: "num_of_samples"}}},
		"bad timer": {url: "/data/index.txt", trigger: sednav1.Trigger{Timer: &sednav1.Timer{Start: "noon", End: "24:00"},
			Condition: sednav1.TriggerCondition{Operator: ">", Threshold: 0, Metric: "num_of_samples"}}},
		"missing dataset file": {url: "/data/missing.txt", trigger: trainTrigger},
		"an s3 dataset":        {url: "s3://bucket/index.txt", trigger: trainTrigger},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.putDataset(t, tc.url, "txt", "edge-0")
			f.writeLines(t, "/data/index.txt", "", 10)
			f.putIL(t, tc.trigger, waiting(1))
			m := f.manager()
			tick(t, m)
			if got := f.take(t); len(got) != 0 {
				t.Errorf("fired: %v", got)
			}
			if diff := cmp.Diff(map[string]float64{CheckUnevaluable: 1}, checks(m)); diff != "" {
				t.Errorf("checks (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestJobsOfAnotherNodesDatasetAreLeftAlone(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-1")
	f.writeLines(t, "/data/index.txt", "", 10)
	f.putIL(t, trainTrigger, waiting(1))
	m := f.manager()
	tick(t, m)
	if got := f.take(t); len(got) != 0 {
		t.Errorf("fired for another node's dataset: %v", got)
	}
	if len(m.jobs) != 0 {
		t.Errorf("the manager keeps %v", m.jobs)
	}
}

func TestLifelongLearningJobTriggers(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 10)
	f.put(t, "LifelongLearningJob", "ll", sednav1.LifelongLearningJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ll", UID: "uid-ll"},
		Spec: sednav1.LifelongLearningJobSpec{
			Dataset:   sednav1.CycleDataset{Name: "ds", TrainProb: 0.5},
			TrainSpec: sednav1.TrainSpec{Trigger: trainTrigger},
			OutputDir: "/ll-output",
		},
		Status: sednav1.LifelongLearningJobStatus{CycleStatus: waiting(1)},
	})
	tick(t, f.manager())
	want := decode(t, `{"name":"nereid-localcontroller","namespace":"ns","ownerName":"ll","ownerKind":"lifelonglearningjob",`+
		`"kind":"train","status":"ready","ownerInfo":{"round":1,"numberOfSamples":10,"datasetSamples":10,`+
		`"trainDatasetURL":"/ll-output/round-1/data/train.txt","testDatasetURL":"/ll-output/round-1/data/test.txt",`+
		`"triggeredAt":"`+wall.Format(time.RFC3339)+`"}}`)
	if diff := cmp.Diff([]any{want}, f.take(t)); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if n := len(strings.Fields(f.readFile(t, "/ll-output/round-1/data/train.txt"))); n != 5 {
		t.Errorf("%d train samples, want 5", n)
	}
}

func TestJobStateIsForgottenWhenTheJobLeavesAndResetWhenItIsRecreated(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 10)
	f.putIL(t, trainTrigger, waiting(1))
	m := f.manager()
	tick(t, m)
	f.take(t)

	// Recreated under the same name between two ticks: round 1 is the new
	// job's, not yet prepared.
	f.put(t, "IncrementalLearningJob", "il", ilJob("uid-2", trainTrigger, waiting(1)))
	tick(t, m)
	if diff := cmp.Diff([]any{trainReady(t, 1, 10, 10, "txt")}, f.take(t)); diff != "" {
		t.Errorf("the recreated job (-want,+got):\n%s", diff)
	}

	if err := f.st.DeleteObject(store.Key{Kind: "IncrementalLearningJob", Namespace: "ns", Name: "il"}); err != nil {
		t.Fatal(err)
	}
	tick(t, m)
	if _, found, _ := f.st.GetState("cycle/IncrementalLearningJob/ns/il"); found {
		t.Error("the deleted job's state is still in the store")
	}
	if len(m.jobs) != 0 {
		t.Errorf("the manager still keeps %v", m.jobs)
	}
}

func TestTriggerRetriesAReportTheOutboxRefused(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "/data/index.txt", "txt", "edge-0")
	f.writeLines(t, "/data/index.txt", "", 10)
	f.putIL(t, trainTrigger, waiting(1))
	m := f.manager()
	f.outbox.fail = store.ErrOutboxFull
	if err := m.sync(context.Background()); err == nil {
		t.Fatal("sync hid the outbox's error")
	}
	f.outbox.fail = nil
	f.mono.Step(time.Minute)
	tick(t, m)
	if diff := cmp.Diff([]any{trainReady(t, 1, 10, 10, "txt")}, f.take(t)); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
