package manager

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/internal/testwait"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/reports"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// The leader election Lease is owned by the GlobalManager's Deployment, so
// helm uninstall takes it: made owned, or given the owner, however often
// it is asked, and a conflict is tried again.
func TestTheLeaderLeaseIsOwnedByTheDeployment(t *testing.T) {
	owner := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "nereid", UID: "deploy-uid"}
	ctx := t.Context()
	kube := kubefake.NewClientset()
	lease := func() *coordinationv1.Lease {
		l, err := kube.CoordinationV1().Leases("nereid-system").Get(ctx, "gm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if err := OwnLeaderLease(ctx, kube, "nereid-system", "gm", owner); err != nil {
		t.Fatal(err)
	}
	if refs := lease().OwnerReferences; len(refs) != 1 || refs[0].UID != owner.UID {
		t.Fatalf("a new Lease is owned by %v, want the Deployment", refs)
	}
	if err := OwnLeaderLease(ctx, kube, "nereid-system", "gm", owner); err != nil || len(lease().OwnerReferences) != 1 {
		t.Fatalf("asked again: %v, owners %v; want the one owner", err, lease().OwnerReferences)
	}

	// A Lease leader election made first gets the owner, after a conflict.
	kube = kubefake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "gm", Namespace: "nereid-system"}})
	conflicts := 1
	kube.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "gm", nil)
		}
		return false, nil, nil
	})
	if err := OwnLeaderLease(ctx, kube, "nereid-system", "gm", owner); err != nil {
		t.Fatal(err)
	}
	if refs := lease().OwnerReferences; len(refs) != 1 || refs[0].UID != owner.UID {
		t.Errorf("an existing Lease is owned by %v, want the Deployment", refs)
	}
	if err := OwnLeaderLease(ctx, kube, "nereid-system", "gm", nil); err != nil {
		t.Errorf("no owner: %v", err)
	}
}

type reportingRunner struct{ kinds.Runner }

func (reportingRunner) ApplyReports(context.Context, reports.Source, []edgeproto.WorkerReport) []error {
	return nil
}

type datasetApplier struct{}

func (datasetApplier) ApplyDatasetReport(context.Context, reports.Source, *edgeproto.Report, *edgeproto.DatasetReport) error {
	return nil
}

// The hub hands worker reports to the controllers that take them, and a
// kind's own reports to its applier; an applier the hub cannot use stops
// the GlobalManager rather than drop those reports.
func TestTheHubGetsTheAppliersOfTheTable(t *testing.T) {
	gvk := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "sedna.io", Version: "v1alpha1", Kind: kind}
	}
	job := &kinds.Kind{GVK: gvk("FederatedLearningJob"), Edge: &kinds.Edge{Workers: true}}
	model := &kinds.Kind{GVK: gvk("Model"), Edge: &kinds.Edge{}}
	dataset := &kinds.Kind{GVK: gvk("Dataset"), Edge: &kinds.Edge{Applier: func(kinds.Deps) any { return datasetApplier{} }}}
	cloudOnly := &kinds.Kind{GVK: gvk("DIJob")}
	runners := map[*kinds.Kind]kinds.Runner{job: reportingRunner{}, model: nil, cloudOnly: reportingRunner{}}
	a, err := appliersOf([]*kinds.Kind{job, model, dataset, cloudOnly}, runners, kinds.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Workers) != 1 || a.Workers["FederatedLearningJob"] == nil || a.Datasets == nil {
		t.Errorf("appliers %+v, want FederatedLearningJob's controller for worker reports and the Dataset applier", a)
	}
	dataset.Edge.Applier = func(kinds.Deps) any { return "not an applier" }
	if _, err := appliersOf([]*kinds.Kind{dataset}, runners, kinds.Deps{}); err == nil || !strings.Contains(err.Error(), "Dataset") {
		t.Errorf("an applier the hub cannot use: error %v, want one naming the kind", err)
	}
}

// One part failing stops the others: a GlobalManager half running would
// hold the lease and do half the job.
func TestOnePartFailingStopsTheOthers(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	failure := errors.New("the hub cannot listen")
	waits := func() error { <-ctx.Done(); return nil }
	err := runAll(cancel, []func() error{waits, func() error { return failure }, waits})
	if !errors.Is(err, failure) {
		t.Errorf("runAll returned %v, want the failure", err)
	}
	if ctx.Err() == nil {
		t.Error("the others' context was not cancelled")
	}
}

// nereid_globalmanager_leader is 1 while the replica works as the leader
// and 0 before and after, once it has given the Lease up.
func TestTheLeaderGaugeSaysWhileThisReplicaLeads(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reg := prometheus.NewRegistry()
	leader := NewLeaderGauge(reg)
	if got := testutil.ToFloat64(leader); got != 0 {
		t.Fatalf("nereid_globalmanager_leader is %v before the election, want 0", got)
	}
	kube := kubefake.NewClientset()
	e := Election{
		Namespace: "nereid-system", Name: "gm",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ShutdownTimeout: 10 * time.Second, Following: &atomic.Value{}, Leader: leader,
	}
	var whileLeading float64
	err := e.Lead(ctx, kube, func(context.Context) error {
		whileLeading = testutil.ToFloat64(leader)
		cancel() // gives the Lease up
		return nil
	})
	if err != nil {
		t.Fatalf("Lead: %v", err)
	}
	if whileLeading != 1 {
		t.Errorf("nereid_globalmanager_leader is %v while leading, want 1", whileLeading)
	}
	if got := testutil.ToFloat64(leader); got != 0 {
		t.Errorf("nereid_globalmanager_leader is %v once the Lease is given up, want 0", got)
	}
	if n, err := testutil.GatherAndCount(reg, "nereid_globalmanager_leader"); err != nil || n != 1 {
		t.Errorf("the registry gathers %d nereid_globalmanager_leader series (%v), want 1", n, err)
	}
}

// Work that does not stop when the Lease is given up holds Lead no longer
// than ShutdownTimeout, timed by the Election's clock.
func TestLeadReturnsWhenWorkOutlivesTheShutdownTimeout(t *testing.T) {
	const testWait = 10 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	e := Election{
		Namespace: "nereid-system", Name: "gm",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		ShutdownTimeout: 10 * time.Second, Following: &atomic.Value{}, Clock: clk,
	}
	stuck := make(chan struct{})
	defer close(stuck)
	done := make(chan error, 1)
	go func() {
		done <- e.Lead(ctx, kubefake.NewClientset(), func(context.Context) error {
			cancel() // gives the Lease up, and then does not stop
			<-stuck
			return nil
		})
	}()
	testwait.Eventually(t, testWait, "Lead waits on the clock for the work to stop", func(context.Context) (bool, error) {
		return clk.HasWaiters(), nil
	})
	select {
	case err := <-done:
		t.Fatalf("Lead returned %v before ShutdownTimeout passed", err)
	default:
	}
	clk.Step(e.ShutdownTimeout)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not stop within") {
			t.Errorf("Lead = %v, want the controllers did not stop within the shutdown timeout", err)
		}
	case <-time.After(testWait):
		t.Fatal("Lead did not return once ShutdownTimeout passed")
	}
}
