package common

// The lifecycle policies every kind gets through Syncer.Begin: managedBy,
// suspend, activeDeadlineSeconds and ttlSecondsAfterFinished, with a
// federated job's hooks written here as a kind writes its own.

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common/commontest"
)

// createdAt is when the test jobs were createdAt.
var createdAt = time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)

// lifecycleRig is a Syncer with the lifecycle policies over one job and
// its pods, recording what the policies asked of the kind.
type lifecycleRig struct {
	syncer    *Syncer[*sednav1.FederatedLearningJob]
	server    *commontest.StatusServer
	kube      *kubefake.Clientset
	clock     *clocktesting.FakeClock
	forgotten []string
	requeued  []time.Duration
	failed    []string // reasons
	suspended int      // calls of the Suspended hook
}

func newLifecycleRig(t *testing.T, job *sednav1.FederatedLearningJob, pods ...*corev1.Pod) *lifecycleRig {
	t.Helper()
	job.CreationTimestamp = metav1.NewTime(createdAt)
	objs := []any{job}
	var kubeObjs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
		kubeObjs = append(kubeObjs, p.DeepCopy())
	}
	r := &lifecycleRig{server: commontest.NewStatusServer(job), clock: clocktesting.NewFakeClock(createdAt)}
	r.kube = kubefake.NewClientset(kubeObjs...)
	exp := NewExpectations()
	r.syncer = testSyncer(newCaches(t, objs...), r.server, exp)
	r.syncer.Forget = func(key string) { r.forgotten = append(r.forgotten, key) }
	r.syncer.Children = &Children{Client: r.kube, Recorder: r.server.Recorder, Expectations: exp}
	r.syncer.Clock = r.clock
	r.syncer.After = func(_ string, d time.Duration) { r.requeued = append(r.requeued, d) }
	r.syncer.Lifecycle = &Lifecycle[*sednav1.FederatedLearningJob]{
		Spec: func(j *sednav1.FederatedLearningJob) LifecycleSpec { return SednaJobLifecycle(&j.Spec.JobLifecycle) },
		Conditions: func(j *sednav1.FederatedLearningJob) Conditions {
			return SednaConditions(j, &j.Status.Conditions)
		},
		Finished: func(j *sednav1.FederatedLearningJob) *metav1.Time {
			return FinishedAt(j.Status.Conditions, j.Status.CompletionTime, "Complete", "Failed")
		},
		Started: func(j *sednav1.FederatedLearningJob) *metav1.Time { return j.Status.StartTime },
		Fail: func(j *sednav1.FederatedLearningJob, reason, msg string, now metav1.Time) {
			r.failed = append(r.failed, reason)
			j.Status.Phase, j.Status.CompletionTime = sednav1.FLJobFailed, &now
			SetJobConditionIn(&j.Status.Conditions, JobConditionFor(j, "Failed", true, reason, msg), now)
		},
		Suspended: func(j *sednav1.FederatedLearningJob, pods []*corev1.Pod, _ metav1.Time) {
			r.suspended++
			j.Status.Phase, j.Status.Active = sednav1.FLJobPending, int32(len(pods))
		},
	}
	return r
}

// events are the events recorded so far.
func (r *lifecycleRig) events() []string {
	var out []string
	for {
		select {
		case e := <-r.server.Recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestAJobAnotherControllerRunsIsLeftWhollyAlone(t *testing.T) {
	job := commontest.Job()
	job.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue")
	job.Spec.Suspend = ptr.To(true) // would delete its pods, were it Nereid's
	r := newLifecycleRig(t, job, childPod("job-0", job, job.UID, nil))

	_, s, err := r.syncer.Begin(t.Context(), "ns/job")
	if s != nil || err != nil {
		t.Fatalf("Begin = %v, %v; want nothing to do", s, err)
	}
	if len(r.server.Writes) != 0 || r.suspended != 0 || len(r.kube.Actions()) != 0 {
		t.Errorf("status writes %d, Suspended calls %d, API calls %v; want none", len(r.server.Writes), r.suspended, r.kube.Actions())
	}
	if diff := cmp.Diff([]string{"ns/job"}, r.forgotten); diff != "" {
		t.Errorf("forgotten (-want,+got):\n%s", diff)
	}
	for by, want := range map[string]bool{"": true, ManagedByNereid: true, "kueue.x-k8s.io/multikueue": false} {
		j := commontest.Job()
		if by != "" {
			j.Spec.ManagedBy = &by
		}
		if got := RunByNereid(j); got != want {
			t.Errorf("RunByNereid(managedBy %q) = %v, want %v", by, got, want)
		}
	}
}

func TestASuspendedJobsPodsStopAndItsStatusSaysSo(t *testing.T) {
	job := commontest.Job()
	job.Spec.Suspend = ptr.To(true)
	job.Status.Round = 7 // what it reached stays
	r := newLifecycleRig(t, job, childPod("job-0", job, job.UID, nil), childPod("job-1", job, job.UID, nil))

	_, s, err := r.syncer.Begin(t.Context(), "ns/job")
	if s != nil || err != nil {
		t.Fatalf("Begin = %v, %v; want the sync taken by suspend", s, err)
	}
	pods, err := r.kube.CoreV1().Pods("ns").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods left: %v (%v); want none", pods, err)
	}
	if len(r.server.Writes) != 1 {
		t.Fatalf("status writes: %d, want 1", len(r.server.Writes))
	}
	st := r.server.Writes[0]
	cond := FindJobCondition(st.Conditions, ConditionSuspended)
	if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != ReasonSuspended {
		t.Errorf("Suspended condition = %+v; want True, %s", cond, ReasonSuspended)
	}
	if st.Phase != sednav1.FLJobPending || st.Round != 7 || r.suspended != 1 {
		t.Errorf("phase %q, round %d, Suspended calls %d; want Pending, 7, 1", st.Phase, st.Round, r.suspended)
	}
	if diff := cmp.Diff([]string{"ns/job"}, r.forgotten); diff != "" {
		t.Errorf("forgotten (its quota released) (-want,+got):\n%s", diff)
	}
	events := strings.Join(r.events(), "\n")
	for _, want := range []string{"Normal Suspended", "Normal SuccessfulDelete Deleted pods job-0, job-1: the job is suspended"} {
		if !strings.Contains(events, want) {
			t.Errorf("events %q; want one with %q", events, want)
		}
	}
}

func TestAResumedJobSaysSoAndItsSyncGoesOn(t *testing.T) {
	job := commontest.Job()
	suspendedAt := metav1.NewTime(createdAt.Add(time.Minute))
	job.Status.Conditions = []sednav1.JobCondition{{Type: ConditionSuspended, Status: corev1.ConditionTrue, Reason: ReasonSuspended,
		LastTransitionTime: suspendedAt, LastHeartbeatTime: suspendedAt}}
	r := newLifecycleRig(t, job)
	r.clock.SetTime(createdAt.Add(time.Hour))

	ctx, s, err := r.syncer.Begin(t.Context(), "ns/job")
	if s == nil || err != nil {
		t.Fatalf("Begin = %v, %v; want a sync", s, err)
	}
	cond := FindJobCondition(s.Owner.Status.Conditions, ConditionSuspended)
	if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != ReasonResumed || !cond.LastTransitionTime.Time.Equal(r.clock.Now()) {
		t.Errorf("Suspended condition = %+v; want False, %s, since now", cond, ReasonResumed)
	}
	if err := s.End(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if events := strings.Join(r.events(), "\n"); !strings.Contains(events, "Normal Resumed") {
		t.Errorf("events %q; want Resumed", events)
	}
}

func TestAJobActivePastItsDeadlineFailsAndSuspendedTimeIsNotCounted(t *testing.T) {
	cases := map[string]struct {
		deadline     int64         // seconds; 0: 60
		resumedAfter time.Duration // 0: never suspended
		now          time.Duration
		wantFailed   bool
		wantRequeue  time.Duration
	}{
		"before the deadline":         {now: 30 * time.Second, wantRequeue: 30 * time.Second},
		"at the deadline":             {now: time.Minute, wantFailed: true},
		"resumed: the clock restarts": {resumedAfter: 50 * time.Second, now: 61 * time.Second, wantRequeue: 49 * time.Second},
		"resumed, then past it":       {resumedAfter: 50 * time.Second, now: 111 * time.Second, wantFailed: true},
		// A deadline a time.Duration cannot hold never comes, rather than
		// overflowing into the past.
		"the largest deadline": {deadline: math.MaxInt64, now: 1000 * time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := commontest.Job()
			job.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
			if tc.deadline != 0 {
				job.Spec.ActiveDeadlineSeconds = &tc.deadline
			}
			if tc.resumedAfter > 0 {
				at := metav1.NewTime(createdAt.Add(tc.resumedAfter))
				job.Status.Conditions = []sednav1.JobCondition{{Type: ConditionSuspended, Status: corev1.ConditionFalse, Reason: ReasonResumed, LastTransitionTime: at}}
			}
			r := newLifecycleRig(t, job)
			r.clock.SetTime(createdAt.Add(tc.now))
			ctx, s, err := r.syncer.Begin(t.Context(), "ns/job")
			if s == nil || err != nil {
				t.Fatalf("Begin = %v, %v; want a sync", s, err)
			}
			if got := len(r.failed) > 0; got != tc.wantFailed {
				t.Fatalf("failed = %v (%v), want %v", got, r.failed, tc.wantFailed)
			}
			if !tc.wantFailed {
				var want []time.Duration
				if tc.wantRequeue > 0 {
					want = []time.Duration{tc.wantRequeue}
				}
				if diff := cmp.Diff(want, r.requeued); diff != "" {
					t.Errorf("requeued after (-want,+got):\n%s", diff)
				}
				return
			}
			if r.failed[0] != ReasonDeadlineExceeded || s.Owner.Status.Phase != sednav1.FLJobFailed {
				t.Errorf("failed with %v, phase %q; want %s, Failed", r.failed, s.Owner.Status.Phase, ReasonDeadlineExceeded)
			}
			if err := s.End(ctx, nil, nil); err != nil {
				t.Fatal(err)
			}
			if events := strings.Join(r.events(), "\n"); !strings.Contains(events, "Warning DeadlineExceeded") {
				t.Errorf("events %q; want DeadlineExceeded", events)
			}
		})
	}
}

func TestAFinishedJobIsDeletedAfterItsTTL(t *testing.T) {
	finishedAt := metav1.NewTime(createdAt.Add(time.Minute))
	newJob := func() *sednav1.FederatedLearningJob {
		job := commontest.Job()
		job.Spec.TTLSecondsAfterFinished = ptr.To[int32](10)
		job.Status.CompletionTime = &finishedAt
		job.Status.Conditions = []sednav1.JobCondition{{Type: "Complete", Status: corev1.ConditionTrue, LastTransitionTime: finishedAt}}
		return job
	}
	t.Run("before", func(t *testing.T) {
		r := newLifecycleRig(t, newJob())
		r.clock.SetTime(finishedAt.Add(4 * time.Second))
		if _, s, err := r.syncer.Begin(t.Context(), "ns/job"); s == nil || err != nil {
			t.Fatalf("Begin = %v, %v; want a sync", s, err)
		}
		if diff := cmp.Diff([]time.Duration{6 * time.Second}, r.requeued); diff != "" {
			t.Errorf("requeued after (-want,+got):\n%s", diff)
		}
		if len(r.server.Deletes) != 0 {
			t.Errorf("deleted before its TTL: %v", r.server.Deletes)
		}
	})
	t.Run("after", func(t *testing.T) {
		job := newJob()
		r := newLifecycleRig(t, job)
		r.clock.SetTime(finishedAt.Add(10 * time.Second))
		if _, s, err := r.syncer.Begin(t.Context(), "ns/job"); s != nil || err != nil {
			t.Fatalf("Begin = %v, %v; want the job deleted", s, err)
		}
		if len(r.server.Deletes) != 1 {
			t.Fatalf("deletes: %d, want 1", len(r.server.Deletes))
		}
		opts := r.server.Deletes[0]
		if opts.Preconditions == nil || *opts.Preconditions.UID != job.UID || *opts.PropagationPolicy != metav1.DeletePropagationForeground {
			t.Errorf("delete options %+v; want the job's UID as precondition, in the foreground", opts)
		}
		if r.server.Job != nil {
			t.Errorf("the job is still there")
		}
	})
	t.Run("when it finished is not known", func(t *testing.T) {
		job := newJob()
		job.Status.CompletionTime = nil
		job.Status.Conditions[0].LastTransitionTime = metav1.Time{}
		r := newLifecycleRig(t, job)
		r.clock.SetTime(finishedAt.Add(time.Hour))
		if _, s, err := r.syncer.Begin(t.Context(), "ns/job"); s == nil || err != nil {
			t.Fatalf("Begin = %v, %v; want a sync", s, err)
		}
		if len(r.server.Deletes) != 0 || len(r.requeued) != 0 {
			t.Errorf("deletes %v, requeues %v; want the job kept", r.server.Deletes, r.requeued)
		}
	})
	t.Run("a suspended finished job is not deleted early, nor its pods", func(t *testing.T) {
		job := newJob()
		job.Spec.Suspend = ptr.To(true)
		r := newLifecycleRig(t, job, childPod("job-0", job, job.UID, nil))
		r.clock.SetTime(finishedAt.Add(time.Second))
		if _, s, err := r.syncer.Begin(t.Context(), "ns/job"); s == nil || err != nil {
			t.Fatalf("Begin = %v, %v; want a sync: suspending a finished job changes nothing", s, err)
		}
		if r.suspended != 0 || len(r.kube.Actions()) != 0 {
			t.Errorf("Suspended calls %d, API calls %v; want none", r.suspended, r.kube.Actions())
		}
	})
}
