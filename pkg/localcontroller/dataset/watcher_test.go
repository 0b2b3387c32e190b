package dataset

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/localcontroller/nodefs"
	"github.com/nereid-ml/nereid/pkg/localcontroller/store"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

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

// take returns the dataset reports taken since the last call.
func (o *recordingOutbox) take(t *testing.T) []edgeproto.DatasetReport {
	t.Helper()
	var out []edgeproto.DatasetReport
	for _, r := range o.reports {
		if r.Kind != edgeproto.ReportDataset || r.Worker != edgeproto.LocalControllerWorker || !r.ReceivedAt.Equal(t0) {
			t.Errorf("report %+v: want kind dataset from %s received at %v", r, edgeproto.LocalControllerWorker, t0)
		}
		d, err := edgeproto.ParseDatasetReport(r.Body)
		if err != nil {
			t.Errorf("report body %s: %v", r.Body, err)
			continue
		}
		out = append(out, *d)
	}
	o.reports = nil
	return out
}

type fixture struct {
	st     *store.Store
	outbox *recordingOutbox
	root   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "lc.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &fixture{st: st, outbox: &recordingOutbox{st: st}, root: t.TempDir()}
}

func (f *fixture) watcher() *Watcher {
	w := NewWatcher(f.st, f.outbox, Config{Node: "edge-0", Root: nodefs.Root{Dir: f.root}})
	w.clock = testingclock.NewFakeClock(t0)
	return w
}

func (f *fixture) putDataset(t *testing.T, name, uid, url, format, node string) {
	t.Helper()
	d := sednav1.Dataset{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid), ResourceVersion: "1"},
		Spec:       sednav1.DatasetSpec{URL: url, Format: format, NodeName: node},
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.PutObject(store.Key{Kind: "Dataset", Namespace: "ns", Name: name}, "1", nil, data); err != nil {
		t.Fatal(err)
	}
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

func poll(t *testing.T, w *Watcher) {
	t.Helper()
	if err := w.PollOnce(context.Background()); err != nil {
		t.Fatalf("PollOnce: %v", err)
	}
}

func report(name string, n int32, errText string) edgeproto.DatasetReport {
	return edgeproto.DatasetReport{Namespace: "ns", Name: name, NumberOfSamples: n, CountedAt: t0, Error: errText}
}

func TestWatcherReportsACountOnlyWhenItChanges(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "d", "u1", "/data/d.txt", "txt", "edge-0")
	f.putDataset(t, "elsewhere", "u2", "/data/d.txt", "txt", "edge-1")
	f.writeFile(t, "/data/d.txt", "a\nb\n")
	w := f.watcher()

	steps := []struct {
		name    string
		content string // written before the poll unless empty
		want    []edgeproto.DatasetReport
	}{
		{name: "first count", want: []edgeproto.DatasetReport{report("d", 2, "")}},
		{name: "unchanged"},
		{name: "blank lines added", content: "a\nb\n\n  \n"},
		{name: "grown", content: "a\nb\nc\n", want: []edgeproto.DatasetReport{report("d", 3, "")}},
		{name: "unchanged again"},
	}
	for _, s := range steps {
		if s.content != "" {
			f.writeFile(t, "/data/d.txt", s.content)
		}
		poll(t, w)
		if diff := cmp.Diff(s.want, f.outbox.take(t)); diff != "" {
			t.Errorf("%s: reports (-want,+got):\n%s", s.name, diff)
		}
	}
}

func TestWatcherReportsAnUnreadableFileByItsURL(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "missing", "u1", "/data/x.txt", "txt", "edge-0")
	f.putDataset(t, "s3", "u2", "s3://bucket/x.txt", "txt", "edge-0")
	f.putDataset(t, "json", "u3", "/data/x.json", "json", "edge-0")
	f.writeFile(t, "/data/x.json", "{}\n")
	w := f.watcher()

	poll(t, w)
	want := []edgeproto.DatasetReport{
		report("json", 0, `index file /data/x.json: unknown dataset format "json": want txt or csv`),
		report("missing", 0, "index file /data/x.txt: no such file or directory"),
		report("s3", 0, `index file: URL "s3://bucket/x.txt" is not a node path: the LocalController reads only paths on its node, starting with /`),
	}
	if diff := cmp.Diff(want, f.outbox.take(t)); diff != "" {
		t.Errorf("reports (-want,+got):\n%s", diff)
	}
	poll(t, w)
	if got := f.outbox.take(t); len(got) != 0 {
		t.Errorf("the same errors were reported again: %+v", got)
	}
	f.writeFile(t, "/data/x.txt", "a\n")
	poll(t, w)
	if diff := cmp.Diff([]edgeproto.DatasetReport{report("missing", 1, "")}, f.outbox.take(t)); diff != "" {
		t.Errorf("once the file exists (-want,+got):\n%s", diff)
	}
}

func TestWatcherAfterARestartReportsOnlyWhatChanged(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "same", "u1", "/data/same.txt", "txt", "edge-0")
	f.putDataset(t, "grown", "u2", "/data/grown.txt", "txt", "edge-0")
	f.writeFile(t, "/data/same.txt", "a\n")
	f.writeFile(t, "/data/grown.txt", "a\n")
	poll(t, f.watcher())
	f.outbox.take(t)

	// What the first LocalController reported is on disk; the new one knows
	// it without reporting again.
	f.writeFile(t, "/data/grown.txt", "a\nb\n")
	f.putDataset(t, "new", "u3", "/data/same.txt", "txt", "edge-0")
	poll(t, f.watcher())
	want := []edgeproto.DatasetReport{report("grown", 2, ""), report("new", 1, "")}
	if diff := cmp.Diff(want, f.outbox.take(t)); diff != "" {
		t.Errorf("reports after a restart (-want,+got):\n%s", diff)
	}
}

func TestWatcherReportsADatasetRecreatedUnderTheSameName(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "d", "u1", "/data/d.txt", "txt", "edge-0")
	f.writeFile(t, "/data/d.txt", "a\n")
	w := f.watcher()
	poll(t, w)
	f.outbox.take(t)

	f.putDataset(t, "d", "u2", "/data/d.txt", "txt", "edge-0")
	poll(t, w)
	if diff := cmp.Diff([]edgeproto.DatasetReport{report("d", 1, "")}, f.outbox.take(t)); diff != "" {
		t.Errorf("reports (-want,+got):\n%s", diff)
	}
}

func TestWatcherForgetsDatasetsThatLeftTheStore(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "d", "u1", "/data/d.txt", "txt", "edge-0")
	f.writeFile(t, "/data/d.txt", "a\n")
	w := f.watcher()
	poll(t, w)
	if _, found, _ := f.st.GetState("dataset/ns/d"); !found {
		t.Fatal("no state after the first report")
	}
	if err := f.st.DeleteObject(store.Key{Kind: "Dataset", Namespace: "ns", Name: "d"}); err != nil {
		t.Fatal(err)
	}
	poll(t, w)
	if _, found, _ := f.st.GetState("dataset/ns/d"); found {
		t.Error("the state of a deleted Dataset is still in the store")
	}
	if len(w.reported) != 0 {
		t.Errorf("the watcher still remembers %v", w.reported)
	}
}

func TestWatcherRetriesAReportTheOutboxRefused(t *testing.T) {
	f := newFixture(t)
	f.putDataset(t, "d", "u1", "/data/d.txt", "txt", "edge-0")
	f.writeFile(t, "/data/d.txt", "a\n")
	w := f.watcher()
	f.outbox.fail = store.ErrOutboxFull
	if err := w.PollOnce(context.Background()); !errors.Is(err, store.ErrOutboxFull) {
		t.Fatalf("PollOnce = %v, want the outbox's error", err)
	}
	f.outbox.fail = nil
	poll(t, w)
	if diff := cmp.Diff([]edgeproto.DatasetReport{report("d", 1, "")}, f.outbox.take(t)); diff != "" {
		t.Errorf("reports (-want,+got):\n%s", diff)
	}
}
