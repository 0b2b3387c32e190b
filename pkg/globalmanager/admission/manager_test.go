package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nereid-ml/nereid/internal/testwait"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

const ns = "team"

var jobKind = schema.GroupVersionKind{Group: "sedna.io", Version: "v1alpha1", Kind: "FederatedLearningJob"}

func quota(name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

func cpu(v string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse(v)}
}

func pod(cpuRequest, class string) *corev1.Pod {
	c := corev1.Container{Name: "w"}
	if cpuRequest != "" {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuRequest)}
	}
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{c}, PriorityClassName: class}}
}

func pods(n int, cpuRequest string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(cpuRequest, "")
	}
	return out
}

type job = sednav1.FederatedLearningJob

func newJob(name string, age time.Duration) *job {
	return &job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-age))}}
}

func request(j *job, class string, n int, cpuRequest string) Request {
	ps := pods(n, cpuRequest)
	for _, p := range ps {
		p.Spec.PriorityClassName = class
	}
	return Request{Kind: jobKind, Key: ns + "/" + j.Name, Owner: j, PriorityClassName: class, Charge: Charge{Pods: ps}}
}

// harness is a Manager over a fake API server, recording whom it wakes.
type harness struct {
	m     *Manager
	kube  *fake.Clientset
	mu    sync.Mutex
	woken []string
}

func start(t *testing.T, backfill int, objects ...runtime.Object) *harness {
	t.Helper()
	h := &harness{kube: fake.NewClientset(objects...)}
	h.m = NewManager(Config{Kube: h.kube, BackfillLimit: backfill})
	synced := h.m.Watch(jobKind, func(key string) {
		h.mu.Lock()
		h.woken = append(h.woken, key)
		h.mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h.m.Start(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		t.Fatal("caches did not sync")
	}
	return h
}

func (h *harness) admit(t *testing.T, req Request) Decision {
	t.Helper()
	d, err := h.m.Admit(t.Context(), req)
	if err != nil {
		t.Fatalf("Admit %s: %v", req.Key, err)
	}
	return d
}

func (h *harness) takeWoken() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.woken
	h.woken = nil
	return out
}

// setUsed is the API server charging the quota for what was created.
func (h *harness) setUsed(t *testing.T, name string, used corev1.ResourceList) {
	t.Helper()
	q, err := h.kube.CoreV1().ResourceQuotas(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Status.Used = used
	if _, err := h.kube.CoreV1().ResourceQuotas(ns).UpdateStatus(t.Context(), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestWithoutAQuotaEveryJobIsAdmittedAndNothingIsHeld(t *testing.T) {
	h := start(t, DefaultBackfillLimit)
	d := h.admit(t, request(newJob("a", 0), "", 100, "1"))
	if !d.Admitted || d.Quotas {
		t.Errorf("decision %+v, want admitted without quotas", d)
	}
	if n := h.m.Waiting(ns); n != 0 {
		t.Errorf("%d waiting, want none", n)
	}
	lists := 0
	for _, a := range h.kube.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "resourcequotas" {
			lists++
		}
	}
	if lists != 1 {
		// The informer's; no live read without a quota.
		t.Errorf("%d lists of quotas, want only the cache's", lists)
	}
}

// TestTwoJobsThatDoNotBothFitOneWaitsWhole is the scenario of the issue:
// 4 CPUs, two jobs of 3: the first is admitted, the second waits with
// nothing held and says why, and is woken when the first's room is free.
func TestTwoJobsThatDoNotBothFitOneWaitsWhole(t *testing.T) {
	h := start(t, DefaultBackfillLimit, quota("q", cpu("4"), cpu("0")))
	a, b := newJob("qa", time.Minute), newJob("qb", 0)
	if d := h.admit(t, request(a, "", 3, "1")); !d.Admitted || !d.Quotas {
		t.Fatalf("qa: %+v, want admitted", d)
	}
	d := h.admit(t, request(b, "", 3, "1"))
	if d.Admitted {
		t.Fatalf("qb admitted while qa holds 3 of 4 CPUs")
	}
	if want := "needs requests.cpu=3, 1 free of 4 in quota q"; d.Message != want {
		t.Errorf("qb waits with %q, want %q", d.Message, want)
	}
	// qa creates its pods: the API server charges them, the room held goes.
	h.setUsed(t, "q", cpu("3"))
	h.m.Done(jobKind, ns+"/qa")
	if d := h.admit(t, request(b, "", 3, "1")); d.Admitted {
		t.Fatalf("qb admitted while qa's pods use 3 of 4 CPUs")
	}
	h.takeWoken()
	// qa finishes: the quota controller frees its room; the quota's change
	// wakes qb, the first waiting.
	h.setUsed(t, "q", cpu("0"))
	testwait.Eventually(t, 10*time.Second, "qb woken by the quota's change", func(context.Context) (bool, error) { return slices.Contains(h.takeWoken(), ns+"/qb"), nil })
	if d := h.admit(t, request(b, "", 3, "1")); !d.Admitted {
		t.Fatalf("qb: %+v, want admitted once the room is free", d)
	}
}

func TestHigherPriorityIsAdmittedAheadOfAnOlderJob(t *testing.T) {
	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	h := start(t, 0, quota("q", cpu("4"), cpu("4")), high)
	old, urgent := newJob("old", time.Hour), newJob("urgent", 0)
	if d := h.admit(t, request(old, "", 3, "1")); d.Admitted {
		t.Fatal("old admitted into a full quota")
	}
	if d := h.admit(t, request(urgent, "high", 3, "1")); d.Admitted {
		t.Fatal("urgent admitted into a full quota")
	}
	h.takeWoken()
	h.setUsed(t, "q", cpu("0"))
	testwait.Eventually(t, 10*time.Second, "urgent, the first in order, woken", func(context.Context) (bool, error) { return slices.Contains(h.takeWoken(), ns+"/urgent"), nil })
	// Whoever asks first, the order decides: old asks, urgent is admitted.
	if d := h.admit(t, request(old, "", 3, "1")); d.Admitted {
		t.Fatalf("old admitted ahead of the higher-priority urgent: %+v", d)
	}
	if d := h.admit(t, request(urgent, "high", 3, "1")); !d.Admitted {
		t.Fatalf("urgent: %+v, want admitted (it was, by old's decision)", d)
	}
}

// TestSmallJobsPassALargeOneAtMostTheBackfillLimit: a large job that does
// not fit lets smaller ones that fit pass it, limit times; then they wait
// behind it until it fits.
func TestSmallJobsPassALargeOneAtMostTheBackfillLimit(t *testing.T) {
	h := start(t, 2, quota("q", cpu("4"), cpu("2")))
	large := newJob("large", time.Hour)
	if d := h.admit(t, request(large, "", 3, "1")); d.Admitted {
		t.Fatal("large admitted with 2 of 4 CPUs free")
	}
	for i, name := range []string{"s1", "s2", "s3"} {
		small := newJob(name, time.Duration(-i)*time.Minute)
		d := h.admit(t, request(small, "", 1, "100m"))
		if i < 2 && !d.Admitted {
			t.Fatalf("%s: %+v, want admitted past large (passed %d times, limit 2)", name, d, i)
		}
		if i == 2 {
			if d.Admitted {
				t.Fatal("s3 admitted past large after the backfill limit")
			}
			if !strings.Contains(d.Message, "waits behind federatedlearningjob large") || !strings.Contains(d.Message, "needs requests.cpu=3") {
				t.Errorf("s3 waits with %q, want it to name large and what large needs", d.Message)
			}
		}
	}
}

func TestAJobLargerThanTheQuotaHoldsNoOneBack(t *testing.T) {
	h := start(t, 0, quota("q", cpu("4"), cpu("0")))
	huge := newJob("huge", time.Hour)
	d := h.admit(t, request(huge, "", 5, "1"))
	if d.Admitted || d.Message != "needs requests.cpu=5, more than the 4 quota q allows in all" {
		t.Fatalf("huge: %+v, want waiting for more than the quota allows", d)
	}
	if _, reason, _, _ := d.Condition(false); reason != ReasonQuotaTooSmall {
		t.Errorf("huge: reason %s, want %s: it can never fit", reason, ReasonQuotaTooSmall)
	}
	if ev := Events(false, false, false, ReasonQuotaTooSmall, d.Message); len(ev) != 1 || ev[0].Type != corev1.EventTypeWarning {
		t.Errorf("huge: events %+v, want one Warning", ev)
	}
	if d := h.admit(t, request(newJob("small", 0), "", 1, "1")); !d.Admitted {
		t.Fatalf("small: %+v, want admitted: strict order does not wait for what can never fit", d)
	}
}

func TestEveryQuotaMustHoldTheJob(t *testing.T) {
	counts := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("5")}
	h := start(t, 0, quota("cpu", cpu("10"), cpu("0")), quota("count", counts, corev1.ResourceList{corev1.ResourcePods: resource.MustParse("3")}))
	d := h.admit(t, request(newJob("a", 0), "", 3, "1"))
	if d.Admitted || d.Message != "needs pods=3, 2 free of 5 in quota count" {
		t.Fatalf("decision %+v, want waiting on the pod count", d)
	}
}

func TestAQuotaNotYetCountedAdmitsNothing(t *testing.T) {
	h := start(t, 0, quota("q", cpu("4"), nil))
	d := h.admit(t, request(newJob("a", 0), "", 1, "1"))
	if d.Admitted || !strings.Contains(d.Message, "has not counted its usage yet") {
		t.Fatalf("decision %+v, want waiting for the quota controller", d)
	}
}

// TestTheRoomHeldIsCountedUntilDone: two jobs asked before either created;
// the second sees the first's room held.
func TestTheRoomHeldIsCountedUntilDone(t *testing.T) {
	h := start(t, 0, quota("q", cpu("4"), cpu("0")))
	if d := h.admit(t, request(newJob("a", time.Minute), "", 2, "1")); !d.Admitted {
		t.Fatal("a not admitted")
	}
	if d := h.admit(t, request(newJob("b", 0), "", 2, "1")); !d.Admitted {
		t.Fatal("b not admitted: 2 of 4 are free after a's 2")
	}
	if d := h.admit(t, request(newJob("c", -time.Minute), "", 1, "1")); d.Admitted || d.Message != "needs requests.cpu=1, 0 free of 4 in quota q" {
		t.Fatalf("c: %+v, want waiting: a's and b's room is held", d)
	}
	// a gives up without creating (its spec changed, say): Forget frees its
	// room and wakes c.
	h.takeWoken()
	h.m.Forget(jobKind, ns+"/a")
	if got := h.takeWoken(); !slices.Equal(got, []string{ns + "/c"}) {
		t.Errorf("woken %v, want c", got)
	}
	if d := h.admit(t, request(newJob("c", -time.Minute), "", 1, "1")); !d.Admitted {
		t.Fatalf("c: %+v, want admitted after a's room was freed", d)
	}
}

func TestAChangedRequestAsksAgain(t *testing.T) {
	h := start(t, 0, quota("q", cpu("4"), cpu("0")))
	a := newJob("a", 0)
	if d := h.admit(t, request(a, "", 2, "1")); !d.Admitted {
		t.Fatal("a not admitted")
	}
	if d := h.admit(t, request(a, "", 2, "1")); !d.Admitted {
		t.Fatal("a's same request not admitted again")
	}
	if d := h.admit(t, request(a, "", 5, "1")); d.Admitted {
		t.Fatal("a's larger request admitted on the room of its smaller one")
	}
}

// TestARefusedJobBacksOff: a job the API server refused after admission
// (Undo) is not admitted again before its backoff, which doubles; it is
// woken when the backoff ends, not before, and admitted.
func TestARefusedJobBacksOff(t *testing.T) {
	h := start(t, 0, quota("q", cpu("4"), cpu("0")))
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h.m.clock = clk
	a := newJob("a", 0)
	for i, want := range []time.Duration{5 * time.Second, 10 * time.Second} {
		if d := h.admit(t, request(a, "", 2, "1")); !d.Admitted {
			t.Fatalf("refusal %d: a not admitted after its backoff: %+v", i, d)
		}
		if got := h.m.refused(jobKind, ns+"/a"); got != want {
			t.Errorf("refusal %d: backoff %s, want %s", i+1, got, want)
		}
		h.m.Done(jobKind, ns+"/a") // the sync's deferred Done keeps a refused job
		d := h.admit(t, request(a, "", 2, "1"))
		if d.Admitted || !strings.Contains(d.Message, fmt.Sprintf("refused a pod of it for quota after it was admitted (%d refusals so far)", i+1)) {
			t.Fatalf("refusal %d: %+v, want waiting out its backoff", i+1, d)
		}
		h.takeWoken()
		clk.Step(want - time.Millisecond)
		if slices.Contains(h.takeWoken(), ns+"/a") {
			t.Fatalf("refusal %d: a woken before its backoff of %s ended", i+1, want)
		}
		clk.Step(time.Millisecond)
		if !slices.Contains(h.takeWoken(), ns+"/a") {
			t.Fatalf("refusal %d: a not woken when its backoff of %s ended", i+1, want)
		}
	}
}

// TestAJobThatAsksNoMoreDoesNotHoldTheQueue: a waiting head that stops
// asking (its Model was deleted, it finished, it was deleted) is forgotten;
// the job behind it is woken and admitted.
func TestAJobThatAsksNoMoreDoesNotHoldTheQueue(t *testing.T) {
	h := start(t, 0, quota("q", cpu("4"), cpu("2")))
	if d := h.admit(t, request(newJob("large", time.Hour), "", 3, "1")); d.Admitted {
		t.Fatal("large admitted with 2 of 4 free")
	}
	if d := h.admit(t, request(newJob("small", 0), "", 1, "1")); d.Admitted {
		t.Fatal("small admitted past large in strict order")
	}
	h.takeWoken()
	h.m.Forget(jobKind, ns+"/large")
	if got := h.takeWoken(); !slices.Equal(got, []string{ns + "/small"}) {
		t.Errorf("woken %v, want small", got)
	}
	if d := h.admit(t, request(newJob("small", 0), "", 1, "1")); !d.Admitted {
		t.Fatalf("small: %+v, want admitted once large is forgotten", d)
	}
}
