package common

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

func TestExpectationsHoldUntilObservedOrExpired(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	e := NewExpectations()
	e.clock = clk
	const key = "ns/job"
	if !e.Satisfied(key) {
		t.Fatal("no record should be satisfied")
	}
	e.ExpectCreations(key, 2)
	e.ExpectDeletions(key, "uid-1")
	steps := []struct {
		do   func()
		want bool
	}{
		{func() {}, false},
		{func() { e.CreationObserved(key) }, false},
		{func() { e.CreationObserved(key) }, false},
		{func() { e.DeletionObserved(key, "uid-other") }, false},
		{func() { e.DeletionObserved(key, "uid-1") }, true},
		{func() { e.CreationObserved(key) }, true}, // never below zero
		{func() { e.ExpectCreations(key, 1) }, false},
		{func() { clk.SetTime(clk.Now().Add(ExpectationsTimeout + time.Second)) }, true},
		{func() { e.Forget(key) }, true},
	}
	for i, s := range steps {
		s.do()
		if got := e.Satisfied(key); got != s.want {
			t.Errorf("step %d: Satisfied = %v, want %v", i, got, s.want)
		}
	}
}

func TestSetJobConditionMovesTimesOnlyOnChange(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(100, 0))
	t1 := metav1.NewTime(time.Unix(200, 0))
	base := []sednav1.JobCondition{{Type: "Training", Status: corev1.ConditionTrue, Reason: "R", Message: "m",
		LastHeartbeatTime: t0, LastTransitionTime: t0, ObservedGeneration: 1}}
	cases := map[string]struct {
		in   sednav1.JobCondition
		want []sednav1.JobCondition
	}{
		"unchanged writes nothing": {
			in:   sednav1.JobCondition{Type: "Training", Status: corev1.ConditionTrue, Reason: "R", Message: "m", ObservedGeneration: 1},
			want: base,
		},
		"new message keeps the transition time": {
			in: sednav1.JobCondition{Type: "Training", Status: corev1.ConditionTrue, Reason: "R", Message: "m2", ObservedGeneration: 1},
			want: []sednav1.JobCondition{{Type: "Training", Status: corev1.ConditionTrue, Reason: "R", Message: "m2",
				LastHeartbeatTime: t1, LastTransitionTime: t0, ObservedGeneration: 1}},
		},
		"new status moves the transition time": {
			in: sednav1.JobCondition{Type: "Training", Status: corev1.ConditionFalse, Reason: "R", Message: "m", ObservedGeneration: 2},
			want: []sednav1.JobCondition{{Type: "Training", Status: corev1.ConditionFalse, Reason: "R", Message: "m",
				LastHeartbeatTime: t1, LastTransitionTime: t1, ObservedGeneration: 2}},
		},
		"another type is added": {
			in: sednav1.JobCondition{Type: "Complete", Status: corev1.ConditionTrue},
			want: append(append([]sednav1.JobCondition(nil), base...), sednav1.JobCondition{Type: "Complete", Status: corev1.ConditionTrue,
				LastHeartbeatTime: t1, LastTransitionTime: t1}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := append([]sednav1.JobCondition(nil), base...)
			got := SetJobCondition(in, tc.in, t1)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("conditions (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(base, in); diff != "" {
				t.Errorf("the input slice was changed (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestMergeEnvReplacesInPlaceAndAppends(t *testing.T) {
	base := []corev1.EnvVar{Env("A", "user"), Env("B", "user")}
	got := MergeEnv(base, []corev1.EnvVar{Env("B", "ours"), Env("C", "ours")})
	want := []corev1.EnvVar{Env("A", "user"), Env("B", "ours"), Env("C", "ours")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want,+got):\n%s", diff)
	}
	if base[1].Value != "user" {
		t.Errorf("MergeEnv changed its input")
	}
}

// The rule of Sedna's GlobalManager, which appends what it sets for the
// worker type after the template's entries (the last of a name wins): what
// it sets is ours, whatever the template says; what only Nereid sets is the
// template's when the template sets it.
func TestContainerEnvKeepsTheTemplatesOwnWhereSednaSetsNothing(t *testing.T) {
	ours := []corev1.EnvVar{Env("WORKER_NAME", "w"), Env("DATA_PATH_PREFIX", "/home/data"), Env("MODEL_NAME", "big-model"),
		Env("MODEL_URL", "s3://m"), Env("LOG_LEVEL", "info"), Env("LC_SERVER", "http://node:9100")}
	cases := map[string]struct {
		template  []corev1.EnvVar
		sednaEnv  []string
		hostPaths []string
		want      []corev1.EnvVar
	}{
		"a template that sets nothing gets everything": {
			sednaEnv: []string{"MODEL_URL"},
			want:     ours,
		},
		"Nereid's own variable is the template's": {
			template: []corev1.EnvVar{Env("MODEL_NAME", "deepseek-chat"), Env("LOG_LEVEL", "debug")},
			sednaEnv: []string{"MODEL_URL"},
			want: []corev1.EnvVar{Env("MODEL_NAME", "deepseek-chat"), Env("LOG_LEVEL", "debug"), Env("WORKER_NAME", "w"),
				Env("DATA_PATH_PREFIX", "/home/data"), Env("MODEL_URL", "s3://m"), Env("LC_SERVER", "http://node:9100")},
		},
		"a variable Sedna sets for the worker type replaces the template's in place": {
			template: []corev1.EnvVar{Env("MODEL_NAME", "mine"), Env("MODEL_URL", "mine")},
			sednaEnv: []string{"MODEL_NAME", "MODEL_URL"},
			want: []corev1.EnvVar{Env("MODEL_NAME", "big-model"), Env("MODEL_URL", "s3://m"), Env("WORKER_NAME", "w"),
				Env("DATA_PATH_PREFIX", "/home/data"), Env("LOG_LEVEL", "info"), Env("LC_SERVER", "http://node:9100")},
		},
		"what Sedna sets for every worker is ours unlisted": {
			template: []corev1.EnvVar{Env("WORKER_NAME", "mine")},
			want:     ours,
		},
		"DATA_PATH_PREFIX is ours with a node path mounted": {
			template:  []corev1.EnvVar{Env("DATA_PATH_PREFIX", "/mine")},
			hostPaths: []string{"/models/m.pb"},
			want:      []corev1.EnvVar{Env("DATA_PATH_PREFIX", "/home/data"), Env("WORKER_NAME", "w"), Env("MODEL_NAME", "big-model"), Env("MODEL_URL", "s3://m"), Env("LOG_LEVEL", "info"), Env("LC_SERVER", "http://node:9100")},
		},
		"DATA_PATH_PREFIX is the template's with none": {
			template:  []corev1.EnvVar{Env("DATA_PATH_PREFIX", "/mine")},
			hostPaths: []string{"s3://models/m.pb"},
			want:      []corev1.EnvVar{Env("DATA_PATH_PREFIX", "/mine"), Env("WORKER_NAME", "w"), Env("MODEL_NAME", "big-model"), Env("MODEL_URL", "s3://m"), Env("LOG_LEVEL", "info"), Env("LC_SERVER", "http://node:9100")},
		},
		"LC_SERVER is the template's even where Sedna sets it": {
			template: []corev1.EnvVar{Env("LC_SERVER", "http://proxy:1")},
			sednaEnv: []string{"LC_SERVER"},
			want: []corev1.EnvVar{Env("LC_SERVER", "http://proxy:1"), Env("WORKER_NAME", "w"), Env("DATA_PATH_PREFIX", "/home/data"),
				Env("MODEL_NAME", "big-model"), Env("MODEL_URL", "s3://m"), Env("LOG_LEVEL", "info")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ContainerEnv(tc.template, Worker{Env: ours, SednaEnv: tc.sednaEnv, HostPaths: tc.hostPaths})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("env (-want,+got):\n%s", diff)
			}
		})
	}
}

// A worker finds the LocalController on its own node's address, unless its
// template says where it is; every other variable of ours wins over the user's.
func TestWorkerLCServerIsTheNodeAddressUnlessTheTemplateSetsIt(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "uid-1"}
	kind := sednav1.SchemeGroupVersion.WithKind("FederatedLearningJob")
	env := append([]corev1.EnvVar{Env("JOB_NAME", "job")}, LCAddress{Port: 9100}.Env()...)
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "plain"},
		{Name: "own", Env: []corev1.EnvVar{Env("LC_SERVER", "http://lc.example:9000"), Env("JOB_NAME", "mine")}},
	}}}
	got := NewWorkerTemplate(owner, kind, Worker{Name: "w", Template: tmpl, Env: env})
	nodeIP := corev1.EnvVar{Name: EnvNodeIP, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}
	want := map[string][]corev1.EnvVar{
		"plain": {Env("JOB_NAME", "job"), nodeIP, Env("LC_SERVER", "http://$(NEREID_NODE_IP):9100")},
		"own":   {Env("LC_SERVER", "http://lc.example:9000"), Env("JOB_NAME", "job"), nodeIP},
	}
	for _, c := range got.Spec.Containers {
		if diff := cmp.Diff(want[c.Name], c.Env); diff != "" {
			t.Errorf("container %s env (-want,+got):\n%s", c.Name, diff)
		}
	}
	if got := (LCAddress{Server: "http://lc:1", Port: 9100}).Env(); len(got) != 1 || got[0] != Env("LC_SERVER", "http://lc:1") {
		t.Errorf("with a server: %v, want LC_SERVER alone", got)
	}
}

func TestChildNameIsAValidDeterministicLabel(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := map[string]struct {
		owner  string
		suffix []string
		want   string
	}{
		"short":             {owner: "job", suffix: []string{"training", "0", "abc"}, want: "job-training-0-abc"},
		"long is shortened": {owner: long, suffix: []string{"aggregation"}},
		"long other suffix": {owner: long, suffix: []string{"training", "12", "x1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ChildName(tc.owner, tc.suffix...)
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Errorf("ChildName = %q: %v", got, errs)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("ChildName = %q, want %q", got, tc.want)
			}
			if again := ChildName(tc.owner, tc.suffix...); again != got {
				t.Errorf("not deterministic: %q then %q", got, again)
			}
			if !strings.HasSuffix(got, strings.Join(tc.suffix, "-")) {
				t.Errorf("ChildName = %q lost its suffix", got)
			}
		})
	}
	if ChildName(long+"x", "a") == ChildName(long+"y", "a") {
		t.Errorf("two long owners share a child name")
	}
}

func TestHashChangesWithEveryInput(t *testing.T) {
	a, _ := Hash("x", 1)
	b, _ := Hash("x", 2)
	c, _ := Hash("x", 1)
	if a == b || a != c {
		t.Errorf("Hash(x,1)=%s Hash(x,2)=%s Hash(x,1)=%s", a, b, c)
	}
}

func TestSlowStartStopsAfterTheFirstFailingBatch(t *testing.T) {
	var calls atomic.Int32
	done, err := slowStart(20, func(i int) error {
		calls.Add(1)
		if i == 5 { // in the second batch (indexes 4..11)
			return errors.New("refused")
		}
		return nil
	})
	if err == nil || done != 12 || calls.Load() != 12 {
		t.Errorf("slowStart = %d, %v after %d calls; want 12 calls and the error", done, err, calls.Load())
	}
	done, err = slowStart(5, func(int) error { return nil })
	if err != nil || done != 5 {
		t.Errorf("slowStart = %d, %v; want 5, nil", done, err)
	}
}

func TestClaimKeepsOnlyChildrenControlledByTheOwnerUID(t *testing.T) {
	owner := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "owner", UID: "uid-1"}}
	ref := func(uid types.UID, controller bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Name: "owner", UID: uid, Controller: &controller}}
	}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "mine", OwnerReferences: ref("uid-1", true)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "same-name-old-owner", OwnerReferences: ref("uid-0", true)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-controller", OwnerReferences: ref("uid-1", false)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}},
	}
	var got []string
	for _, p := range Claim(metav1.Object(owner), pods) {
		got = append(got, p.Name)
	}
	if diff := cmp.Diff([]string{"mine"}, got); diff != "" {
		t.Errorf("claimed (-want,+got):\n%s", diff)
	}
}

// TestCreatePodsReleasesExpectationForAPodThatAlreadyExists covers a heal
// racing the old pod's termination: the create meets AlreadyExists on our own
// pod, no add event will follow, and the owner must not wait for one.
func TestCreatePodsReleasesExpectationForAPodThatAlreadyExists(t *testing.T) {
	owner := &sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid"}}
	pod := NewWorkerPod(owner, sednav1.FederatedLearningJobKind, Worker{Name: "job-training-0-x", Role: "training", Hash: "x",
		Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}})
	terminating := pod.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	exp := NewExpectations()
	c := &Children{Client: kubefake.NewClientset(terminating), Recorder: record.NewFakeRecorder(10), Expectations: exp}
	made, err := c.CreatePods(t.Context(), "ns/job", owner, []*corev1.Pod{pod})
	if err != nil {
		t.Fatalf("CreatePods: %v", err)
	}
	if len(made) != 0 {
		t.Errorf("CreatePods returned %d pods made; the pod existed already", len(made))
	}
	if !exp.Satisfied("ns/job") {
		t.Errorf("expectations wait for an add event that will never come")
	}
}

// A heal whose create meets the old pod's name, and whose read of it finds
// the old pod gone meanwhile, creates again at once instead of failing the
// sync into a backoff.
func TestCreatePodsCreatesAgainWhenTheOldPodWentMeanwhile(t *testing.T) {
	owner := &sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "job-uid"}}
	pod := NewWorkerPod(owner, sednav1.FederatedLearningJobKind, Worker{Name: "job-training-0-x", Role: "training", Hash: "x",
		Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}})
	client := kubefake.NewClientset()
	creates := 0
	client.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		creates++
		if creates == 1 { // the old pod still held the name, then went
			return true, nil, apierrors.NewAlreadyExists(corev1.Resource("pods"), pod.Name)
		}
		return false, nil, nil
	})
	exp := NewExpectations()
	c := &Children{Client: client, Recorder: record.NewFakeRecorder(10), Expectations: exp}
	made, err := c.CreatePods(t.Context(), "ns/job", owner, []*corev1.Pod{pod})
	if err != nil {
		t.Fatalf("CreatePods: %v", err)
	}
	if creates != 2 || len(made) != 1 {
		t.Errorf("%d creates, %d pods made; want 2 creates and the pod made", creates, len(made))
	}
}

// Every kind writes status by one rule: a conflict while the sync went well
// waits for the newer object's event; anything else is retried.
func TestWriteStatusWaitsOnAConflictAlone(t *testing.T) {
	conflict := apierrors.NewConflict(sednav1.Resource("jointinferenceservices"), "ji", errors.New("the object has been modified"))
	other := apierrors.NewInternalError(errors.New("etcd down"))
	actErr := errors.New("creating a pod failed")
	cases := map[string]struct {
		writeErr, actErr error
		wantWrote        bool
		wantErr          bool
	}{
		"written":                       {wantWrote: true},
		"a conflict alone":              {writeErr: conflict},
		"a conflict after a failed act": {writeErr: conflict, actErr: actErr, wantErr: true},
		"another error":                 {writeErr: other, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wrote, err := WriteStatus(t.Context(), "ns/ji", tc.actErr, func(context.Context) error { return tc.writeErr })
			if wrote != tc.wantWrote || (err != nil) != tc.wantErr {
				t.Errorf("WriteStatus = %t, %v; want %t, error %t", wrote, err, tc.wantWrote, tc.wantErr)
			}
			if tc.actErr != nil && !errors.Is(err, tc.actErr) {
				t.Errorf("the sync's own error is lost: %v", err)
			}
		})
	}
}

func TestSetDatasetsReadableFollowsTheDatasets(t *testing.T) {
	owner := &metav1.ObjectMeta{Name: "job", Namespace: "ns"}
	now := metav1.Now()
	ds := func(name string, status metav1.ConditionStatus) *sednav1.Dataset {
		d := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if status != "" {
			d.Status.Conditions = []metav1.Condition{{Type: DatasetReadable, Status: status, Reason: "IndexFileUnreadable", Message: "open /data/x: no such file"}}
		}
		return d
	}
	conds, events := SetDatasetsReadable(owner, nil, []*sednav1.Dataset{ds("a", "")}, now)
	if len(conds) != 0 || len(events) != 0 {
		t.Errorf("not yet read: %v %v, want nothing said", conds, events)
	}
	conds, events = SetDatasetsReadable(owner, nil, []*sednav1.Dataset{ds("a", metav1.ConditionTrue), ds("b", metav1.ConditionFalse)}, now)
	c := FindJobCondition(conds, ConditionDatasetsReadable)
	if c == nil || c.Status != "False" || c.Reason != "IndexFileUnreadable" || c.Message != "Dataset b: open /data/x: no such file" || len(events) != 1 {
		t.Errorf("b unreadable: %+v %v", c, events)
	}
	if _, events = SetDatasetsReadable(owner, conds, []*sednav1.Dataset{ds("b", metav1.ConditionFalse)}, now); len(events) != 0 {
		t.Errorf("said again: %v", events)
	}
	conds, _ = SetDatasetsReadable(owner, conds, []*sednav1.Dataset{ds("b", metav1.ConditionTrue)}, now)
	if c := FindJobCondition(conds, ConditionDatasetsReadable); c == nil || c.Status != "True" {
		t.Errorf("b read: %+v", c)
	}
}
