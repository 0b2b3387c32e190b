package integration

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednaclient "github.com/nereid-ml/nereid/pkg/client/clientset/versioned"
	"github.com/nereid-ml/nereid/test/framework"
)

// bulkName is the name of Dataset i, as long as a name may be (253).
func bulkName(i int) string {
	s := fmt.Sprintf("bulk-%06d-", i)
	return s + strings.Repeat("x", 253-len(s))
}

// bulkWorkers are the goroutines that create, edit and delete the test's
// objects: thousands of API calls take seconds without swamping the API
// server.
const bulkWorkers = 32

// datasetsOf returns the Datasets of ns as lcObjects names them, with their
// resourceVersions.
func datasetsOf(ctx context.Context, sedna sednaclient.Interface, ns string) (map[string]string, error) {
	out := map[string]string{}
	opts := metav1.ListOptions{Limit: 5000}
	for {
		list, err := sedna.SednaV1alpha1().Datasets(ns).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, d := range list.Items {
			out["Dataset "+ns+"/"+d.Name] = d.ResourceVersion
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// written is the resourceVersion of each Dataset's last write by the test,
// by the name lcObjects gives it: the last change an edge node uses. A status
// write after it (a count the LocalController reported) is not sent down, so
// the store may hold any version from that one on.
type written struct {
	mu  sync.Mutex
	rvs map[string]string
}

func (w *written) set(ns string, d *sednav1.Dataset) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rvs == nil {
		w.rvs = map[string]string{}
	}
	w.rvs["Dataset "+ns+"/"+d.Name] = d.ResourceVersion
}

func (w *written) get(k string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rvs[k]
}

// waitForStoreToMatch waits until lc's store holds exactly the Datasets of ns,
// each at the version of the test's last write or a later one, and says how
// the two differ when they do not.
func waitForStoreToMatch(t *testing.T, lc *framework.LocalController, sedna sednaclient.Interface, ns string, w *written, timeout time.Duration) {
	t.Helper()
	var last string
	framework.Eventually(t, timeout, "the LocalController's store to hold exactly the cluster's Datasets", func(ctx context.Context) (bool, error) {
		want, err := datasetsOf(ctx, sedna, ns)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		got, err := lcObjects(lc)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		missing, stale, extra := 0, 0, 0
		for k, rv := range want {
			switch g, ok := got[k]; {
			case !ok:
				missing++
			case !framework.VersionAtLeast(g, w.get(k)) || !framework.VersionAtLeast(rv, g):
				stale++
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				extra++
			}
		}
		if missing+stale+extra == 0 {
			return true, nil
		}
		if d := fmt.Sprintf("%d Datasets, the store has %d: %d missing, %d stale, %d extra", len(want), len(got), missing, stale, extra); d != last {
			t.Log(d)
			last = d
		}
		return false, nil
	})
}

// helloFrames is how many frames the last hello in lc's log took.
func helloFrames(t *testing.T, lc *framework.LocalController) int {
	t.Helper()
	m := regexp.MustCompile(`"Said hello".* frames=(\d+)`).FindAllStringSubmatch(lc.Log(), -1)
	if len(m) == 0 {
		t.Fatal("the LocalController's log says no hello")
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// TestEdgeHelloAndResyncOfTwentyThousandObjectsWithLongNames sends 20,000
// Datasets with the longest names to edge-0's LocalController in one bulk
// sync; then, while it is stopped, edits, deletes and adds some. After it
// restarts, its hello (more than a frame holds) is answered with the
// difference, and its store holds exactly the cluster's Datasets, over one
// connection that never stalled.
//
// Not parallel: its 20,500 objects at 2,000 QPS hold up every request
// of the tests beside it (a minute and more).
func TestEdgeHelloAndResyncOfTwentyThousandObjectsWithLongNames(t *testing.T) {
	const (
		n       = 20_000
		edited  = 1_000
		deleted = 1_000
		added   = 500
	)
	began := time.Now()
	ns := framework.Namespace(t)
	hub := framework.StartGlobalManagerWithEdgeHub(t, ns)
	// The framework's clients send 100 requests a second, which would make
	// creating the Datasets alone take minutes.
	cfg := framework.RESTConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	sedna, err := sednaclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	datasets := sedna.SednaV1alpha1().Datasets(ns)
	var w written
	create := func(ctx context.Context, i int) error {
		d := &sednav1.Dataset{
			ObjectMeta: metav1.ObjectMeta{Name: bulkName(i)},
			Spec:       sednav1.DatasetSpec{URL: "/data/bulk.txt", Format: "txt", NodeName: "edge-0"},
		}
		made, err := datasets.Create(ctx, d, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating Dataset %d: %w", i, err)
		}
		w.set(ns, made)
		return nil
	}
	if err := framework.ForEach(t.Context(), n, bulkWorkers, create); err != nil {
		t.Fatal(err)
	}
	t.Logf("created %d Datasets in %s", n, time.Since(began).Round(time.Second))

	// The LocalController counts the Datasets when it starts and then not
	// within the test, and its outbox takes one report: a count of each of
	// the 20,000 would make 20,000 status writes, which are not what this
	// test is about (none of them is sent back down).
	phase := time.Now()
	lc := framework.StartLocalController(t, hub, "edge-0", framework.EdgeIdentity(t, ns, "edge-0"),
		"--dataset-poll-period", "1h", "--max-outbox-reports", "1")
	waitForStoreToMatch(t, lc, sedna, ns, &w, 90*time.Second)
	t.Logf("the first bulk sync took %s", time.Since(phase).Round(time.Second))

	lc.Stop(t)
	phase = time.Now()
	// The hub writes the Datasets' EdgeLinked condition meanwhile (their
	// LocalController is down): an edit that meets one is read again.
	if err := framework.ForEach(t.Context(), edited, bulkWorkers, func(ctx context.Context, i int) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := datasets.Get(ctx, bulkName(i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			d.Spec.URL = "/data/bulk-edited.txt"
			if d, err = datasets.Update(ctx, d, metav1.UpdateOptions{}); err == nil {
				w.set(ns, d)
			}
			return err
		})
	}); err != nil {
		t.Fatal(err)
	}
	if err := framework.ForEach(t.Context(), deleted, bulkWorkers, func(ctx context.Context, i int) error {
		return datasets.Delete(ctx, bulkName(n-1-i), metav1.DeleteOptions{})
	}); err != nil {
		t.Fatal(err)
	}
	if err := framework.ForEach(t.Context(), added, bulkWorkers, func(ctx context.Context, i int) error { return create(ctx, n+i) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("edited %d, deleted %d and added %d Datasets in %s", edited, deleted, added, time.Since(phase).Round(time.Second))

	phase = time.Now()
	if err := lc.Start(); err != nil {
		t.Fatal(err)
	}
	waitForStoreToMatch(t, lc, sedna, ns, &w, 90*time.Second)
	t.Logf("the resync took %s; the whole test %s", time.Since(phase).Round(time.Second), time.Since(began).Round(time.Second))

	frames := helloFrames(t, lc)
	if frames < 2 {
		t.Errorf("the hello of %d Datasets with long names took %d frame(s), want several", n, frames)
	}
	m, err := framework.ScrapeMetrics(t.Context(), lc.HealthURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Get("nereid_cloudlink_connects_total"); got != 1 {
		t.Errorf("the restarted LocalController connected %v times, want once: the resync must not stall the link", got)
	}
	gm, err := framework.ScrapeMetrics(t.Context(), "http://"+hub.HealthAddress())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the hello took %d frames; the hub resent %v objects", frames, gm.Get("nereid_edgehub_resends_total"))
}
