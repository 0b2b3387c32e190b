package view

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/conversion"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/dijob/coordinated"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Every job kind of the GlobalManager's table is shown: a kind added
// without a source here would only be a Note.
func TestEveryJobKindOfTheTableHasASource(t *testing.T) {
	for _, k := range kinds.All() {
		if _, ok := sources[k.GVK.GroupKind()]; (k.Progress != nil) != ok {
			t.Errorf("%s: has a Progress %v, has a source %v", k.GVK.Kind, k.Progress != nil, ok)
		}
	}
}

// A node's link is the hub's Lease: connected, disconnected when the hub
// said so, disconnected when the hub has not renewed it within its
// duration, unknown without one; its workers, jobs and Datasets are on it.
func TestReadShowsEachNodesLinkAndWhatIsOnIt(t *testing.T) {
	fl := &sednav1.FederatedLearningJob{ObjectMeta: meta("demo", "fl", "fl-uid")}
	c, _, _ := clients("",
		[]runtime.Object{
			node("cloud-0", false, corev1.ConditionTrue), node("edge-0", true, corev1.ConditionTrue),
			node("edge-1", true, corev1.ConditionFalse), node("edge-2", true, corev1.ConditionTrue),
			lease("edge-0", "connected", 5*time.Second, "1% (3/1000 reports, 10/1000 bytes)"),
			lease("edge-1", "disconnected", 10*time.Minute, ""),
			lease("edge-2", "connected", 2*time.Minute, ""), // the hub stopped renewing it
			pod("demo", "fl-agg", "fl-uid", "cloud-0", corev1.PodRunning),
			pod("demo", "fl-train-0", "fl-uid", "edge-0", corev1.PodRunning),
			pod("demo", "fl-train-old", "fl-uid", "edge-0", corev1.PodSucceeded),
			pod("demo", "fl-train-failed", "fl-uid", "edge-0", corev1.PodFailed),
			pod("demo", "not-a-worker", "", "edge-0", corev1.PodRunning),
		},
		[]runtime.Object{fl, dataset("demo", "d0", "edge-0"), dataset("demo", "d1", "edge-1")})
	got, err := readAt(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	job := JobRef("FederatedLearningJob", "demo", "fl")
	want := []Node{
		{Name: "cloud-0", Link: "", Ready: "True", Objects: 1, Workers: []string{"demo/fl-agg"}, Jobs: []string{job}},
		{Name: "edge-0", Link: "connected", LastHeard: tp(ago(5 * time.Second)), Outbox: "1% (3/1000 reports, 10/1000 bytes)",
			Ready: "True", Edge: true, Objects: 2, Workers: []string{"demo/fl-train-0"}, Ended: 2, Jobs: []string{job}},
		{Name: "edge-1", Link: "disconnected", LastHeard: tp(ago(10 * time.Minute)), Ready: "False", Edge: true, Objects: 1},
		{Name: "edge-2", Link: "disconnected", LastHeard: tp(ago(2 * time.Minute)), Ready: "True", Edge: true},
	}
	if diff := cmp.Diff(want, got.Nodes); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	if len(got.Notes) != 0 {
		t.Errorf("notes %q, want none", got.Notes)
	}
	if got.Namespace != "" {
		t.Errorf("namespace %q, want \"\" (every namespace)", got.Namespace)
	}
	if !got.Taken.Equal(now) {
		t.Errorf("taken %s, want %s", got.Taken, now)
	}
}

// forbid makes every list of resource fail as the API server refuses it.
func forbid(f *k8stesting.Fake, resource string, namespaces ...string) {
	f.PrependReactor("list", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if len(namespaces) > 0 && !contains(namespaces, a.GetNamespace()) {
			return false, nil, nil
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("user alice"))
	})
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// What the user may not list, and a kind the API server does not serve,
// is a Note; the rest is read.
func TestReadTurnsWhatTheUserMayNotListIntoNotes(t *testing.T) {
	fl := &sednav1.FederatedLearningJob{ObjectMeta: meta("demo", "fl", "fl-uid")}
	c, kube, nereid := clients("demo",
		[]runtime.Object{lease("edge-0", "connected", time.Second, ""), pod("demo", "fl-train-0", "fl-uid", "edge-0", corev1.PodRunning)},
		[]runtime.Object{fl})
	forbid(&kube.Fake, "nodes")
	forbid(&kube.Fake, "leases", "")
	forbid(&nereid.Fake, "dijobs")
	nereid.PrependReactor("list", "lifelonglearningjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "sedna.io", Resource: "lifelonglearningjobs"}, "")
	})
	got, err := readAt(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Namespace != "demo" {
		t.Errorf("namespace %q, want demo, the one read", got.Namespace)
	}
	wantNotes := []string{"You may not list dijobs.diengine.opendilab.org in namespace demo",
		"The API server does not serve lifelonglearningjobs.sedna.io in namespace demo", "You may not list nodes"}
	if len(got.Notes) != len(wantNotes) {
		t.Fatalf("notes %q, want %d", got.Notes, len(wantNotes))
	}
	for i, w := range wantNotes {
		if !strings.HasPrefix(got.Notes[i], w) {
			t.Errorf("note %d is %q, want it to start with %q", i, got.Notes[i], w)
		}
	}
	// The Leases in the GlobalManager's namespace and the workers still
	// show the node.
	want := []Node{{Name: "edge-0", Link: "connected", LastHeard: tp(ago(time.Second)), Objects: 1,
		Workers: []string{"demo/fl-train-0"}, Jobs: []string{JobRef("FederatedLearningJob", "demo", "fl")}}}
	if diff := cmp.Diff(want, got.Nodes); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	if len(got.Jobs) != 1 || got.Jobs[0].Name != "fl" {
		t.Errorf("jobs %+v, want the FL job", got.Jobs)
	}
}

// An API server that fails otherwise fails the read.
func TestReadFailsWhenTheAPIServerFails(t *testing.T) {
	c, _, nereid := clients("demo", nil, nil)
	nereid.PrependReactor("list", "federatedlearningjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd is down"))
	})
	_, err := readAt(t.Context(), c, now)
	if err == nil || !strings.Contains(err.Error(), "etcd is down") {
		t.Fatalf("got %v, want the API server's error", err)
	}
}

// A job shows its phase and progress as the printer columns do, and what
// it waits for while it is not finished.
func TestReadSaysWhatAWaitingJobLacks(t *testing.T) {
	quota := &sednav1.FederatedLearningJob{ObjectMeta: meta("demo", "quota", "q-uid"), Status: sednav1.FederatedLearningJobStatus{
		Phase: sednav1.FLJobPending, Conditions: []sednav1.JobCondition{
			condition("ReferencesResolved", corev1.ConditionTrue, "Resolved", "every object it names exists"),
			condition("Admitted", corev1.ConditionFalse, "WaitingForQuota", "needs 3 pods, the quota demo has room for 1"),
		}}}
	placed := &sednav1.FederatedLearningJob{ObjectMeta: meta("demo", "placed", "p-uid"), Status: sednav1.FederatedLearningJobStatus{
		Phase: sednav1.FLJobRunning, Round: 3, SlowestRound: 2}}
	done := &sednav1.FederatedLearningJob{ObjectMeta: meta("demo", "done", "d-uid"), Status: sednav1.FederatedLearningJobStatus{
		Phase: sednav1.FLJobSucceeded, Round: 5, SlowestRound: 5, Conditions: []sednav1.JobCondition{
			condition("Admitted", corev1.ConditionFalse, "WaitingForQuota", "stale"),
		}}}
	ji := &sednav1.JointInferenceService{ObjectMeta: meta("demo", "ji", "ji-uid"), Status: sednav1.JointInferenceServiceStatus{
		EdgeReady: "1/1", CloudReady: "0/1", Conditions: []sednav1.JobCondition{condition("Ready", corev1.ConditionFalse, "Unavailable", "")}}}
	c, _, _ := clients("demo", []runtime.Object{
		pod("demo", "placed-train-1", "p-uid", "", corev1.PodPending),
		unschedulable(pod("demo", "placed-train-0", "p-uid", "", corev1.PodPending), "0/3 nodes are available: 3 Insufficient cpu."),
		unschedulable(pod("demo", "placed-agg", "p-uid", "", corev1.PodPending), "0/3 nodes are available: 3 Insufficient memory."),
		unschedulable(pod("demo", "ji-cloud", "ji-uid", "", corev1.PodPending), "node(s) had untolerated taint"),
	}, []runtime.Object{quota, placed, done, ji})
	got, err := readAt(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Kind, Name, Phase, Progress, Waiting string }
	var rows []row
	for _, j := range got.Jobs {
		rows = append(rows, row{j.Kind, j.Name, j.Phase, j.Progress, j.Waiting})
	}
	want := []row{
		{"FederatedLearningJob", "done", "Succeeded", "round 5", ""},
		{"FederatedLearningJob", "placed", "Running", "round 3 (slowest 2)",
			"pod placed-agg Unschedulable: 0/3 nodes are available: 3 Insufficient memory. (and 1 more pods unscheduled)"},
		{"FederatedLearningJob", "quota", "Pending", "", "WaitingForQuota: needs 3 pods, the quota demo has room for 1"},
		{"JointInferenceService", "ji", "Unavailable", "edge 1/1, cloud 0/1", "pod ji-cloud Unschedulable: node(s) had untolerated taint"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("jobs (-want,+got):\n%s", diff)
	}
	wantCond := []Condition{
		{Type: "ReferencesResolved", Status: "True", Reason: "Resolved", Message: "every object it names exists", Since: tp(ago(time.Minute))},
		{Type: "Admitted", Status: "False", Reason: "WaitingForQuota", Message: "needs 3 pods, the quota demo has room for 1", Since: tp(ago(time.Minute))},
	}
	if diff := cmp.Diff(wantCond, got.Jobs[2].Conditions); diff != "" {
		t.Errorf("conditions (-want,+got):\n%s", diff)
	}
}

// A DIJob's replicas are its pods per task, in the spec's order, and node;
// a v1alpha1 job's are per replica type.
func TestReadCountsADIJobsReplicasPerTaskAndNode(t *testing.T) {
	v2 := &div2.DIJob{ObjectMeta: meta("demo", "cartpole", "v2-uid"),
		Spec:   div2.DIJobSpec{Tasks: []div2.Task{{Name: "learner", Type: div2.TaskTypeLearner}, {Name: "collector", Type: div2.TaskTypeCollector}}},
		Status: div2.DIJobStatus{Phase: div2.JobRunning, TasksReady: "learner 1/1, collector 2/3"}}
	v1 := &div2.DIJob{ObjectMeta: meta("demo", "v1", "v1-uid"), Status: div2.DIJobStatus{Phase: div2.JobRunning}}
	task := func(name string) []string { return []string{dijob.LabelTaskName, name} }
	replica := func(name string) []string { return []string{coordinated.LabelReplicaType, name} }
	c, _, _ := clients("demo", []runtime.Object{
		pod("demo", "cartpole-collector-0", "v2-uid", "edge-0", corev1.PodRunning, task("collector")...),
		pod("demo", "cartpole-collector-1", "v2-uid", "edge-0", corev1.PodRunning, task("collector")...),
		pod("demo", "cartpole-collector-2", "v2-uid", "", corev1.PodPending, task("collector")...),
		pod("demo", "cartpole-learner-0", "v2-uid", "cloud-0", corev1.PodRunning, task("learner")...),
		pod("demo", "v1-coordinator", "v1-uid", "cloud-0", corev1.PodRunning, replica("coordinator")...),
		pod("demo", "v1-collector-a", "v1-uid", "edge-1", corev1.PodSucceeded, replica("collector")...),
	}, []runtime.Object{v2, v1})
	got, err := readAt(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Jobs) != 2 {
		t.Fatalf("jobs %+v, want 2", got.Jobs)
	}
	wantV2 := []Replica{
		{Task: "learner", Node: "cloud-0", Running: 1},
		{Task: "collector", Node: "", Pending: 1},
		{Task: "collector", Node: "edge-0", Running: 2},
	}
	if diff := cmp.Diff(wantV2, got.Jobs[0].Replicas); diff != "" {
		t.Errorf("v2alpha1 replicas (-want,+got):\n%s", diff)
	}
	if got.Jobs[0].Progress != "learner 1/1, collector 2/3" || got.Jobs[0].Phase != "Running" {
		t.Errorf("v2alpha1 job phase %q progress %q", got.Jobs[0].Phase, got.Jobs[0].Progress)
	}
	if diff := cmp.Diff([]string{"cloud-0", "edge-0"}, got.Jobs[0].Nodes); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	wantV1 := []Replica{{Task: "collector", Node: "edge-1", Ended: 1}, {Task: "coordinator", Node: "cloud-0", Running: 1}}
	if diff := cmp.Diff(wantV1, got.Jobs[1].Replicas); diff != "" {
		t.Errorf("v1alpha1 replicas (-want,+got):\n%s", diff)
	}
}

// A v1alpha1 DIJob, stored as v2alpha1, reads as DI-orchestrator v0.2
// names its phase and conditions: Created, where v2alpha1 says Starting;
// the condition v1alpha1 has not (Admitted) stays. A v2alpha1 job reads
// as it is.
func TestReadShowsAV1DIJobsPhaseAndConditionsByV1Names(t *testing.T) {
	status := div2.DIJobStatus{Phase: div2.JobStarting, Conditions: []div2.JobCondition{
		{Type: "Admitted", Status: corev1.ConditionTrue, Reason: "Admitted"},
		{Type: "Starting", Status: corev1.ConditionTrue, Reason: "DIJobCreated", Message: "DIJob v1 created"},
	}}
	v1 := &div2.DIJob{ObjectMeta: meta("demo", "v1", "v1-uid"), Status: status}
	v1.Annotations = map[string]string{conversion.AnnotationV1: "{}"}
	v2 := &div2.DIJob{ObjectMeta: meta("demo", "v2", "v2-uid"), Status: *status.DeepCopy()}
	c, _, _ := clients("demo", nil, []runtime.Object{v1, v2})
	got, err := readAt(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	type shown struct {
		Phase      string
		Conditions []string
	}
	gotShown := map[string]shown{}
	for _, j := range got.Jobs {
		s := shown{Phase: j.Phase}
		for _, c := range j.Conditions {
			s.Conditions = append(s.Conditions, c.Type+" "+c.Status+" "+c.Reason)
		}
		gotShown[j.Name] = s
	}
	want := map[string]shown{
		"v1": {Phase: "Created", Conditions: []string{"Admitted True Admitted", "Created True DIJobCreated"}},
		"v2": {Phase: "Starting", Conditions: []string{"Admitted True Admitted", "Starting True DIJobCreated"}},
	}
	if diff := cmp.Diff(want, gotShown); diff != "" {
		t.Errorf("DIJobs (-want,+got):\n%s", diff)
	}
}

// A learning cycle's time line: a finished round as a whole, the current
// round's stages from its transitions.
func TestReadPutsALearningCyclesStagesOnATimeLine(t *testing.T) {
	stage := func(s sednav1.Stage, state sednav1.StageState, at time.Time) sednav1.StageCondition {
		return sednav1.StageCondition{Type: state, Status: corev1.ConditionTrue, Stage: s, LastTransitionTime: metav1.NewTime(at)}
	}
	il := &sednav1.IncrementalLearningJob{ObjectMeta: meta("demo", "helmet", "il-uid"),
		Spec: sednav1.IncrementalLearningJobSpec{Dataset: sednav1.CycleDataset{Name: "d0"}},
		Status: sednav1.IncrementalLearningJobStatus{
			Conditions: []sednav1.StageCondition{
				stage(sednav1.StageTrain, sednav1.StageWaiting, ago(30*time.Minute)),
				stage(sednav1.StageTrain, sednav1.StageReady, ago(20*time.Minute)),
				stage(sednav1.StageTrain, sednav1.StageRunning, ago(19*time.Minute)),
				stage(sednav1.StageTrain, sednav1.StageCompleted, ago(10*time.Minute)),
				stage(sednav1.StageEval, sednav1.StageReady, ago(10*time.Minute)),
				stage(sednav1.StageEval, sednav1.StageRunning, ago(9*time.Minute)),
			},
			CycleStatus: sednav1.CycleStatus{Stage: sednav1.StageEval, State: sednav1.StageRunning, Round: 2, DeployedRound: 1,
				History: []sednav1.RoundStatus{{Round: 1, StartTime: mtime(ago(50 * time.Minute)), CompletionTime: mtime(ago(35 * time.Minute)), Result: "Deployed"}}},
		}}
	c, _, _ := clients("demo", nil, []runtime.Object{il})
	got, err := readAt(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []Stage{
		{Round: 1, Stage: "Round", State: "Deployed", Start: ago(50 * time.Minute), End: tp(ago(35 * time.Minute))},
		{Round: 2, Stage: "Train", State: "Waiting", Start: ago(30 * time.Minute), End: tp(ago(20 * time.Minute))},
		{Round: 2, Stage: "Train", State: "Completed", Start: ago(20 * time.Minute), End: tp(ago(10 * time.Minute))},
		{Round: 2, Stage: "Eval", State: "Running", Start: ago(10 * time.Minute)},
	}
	if diff := cmp.Diff(want, got.Jobs[0].Stages); diff != "" {
		t.Errorf("stages (-want,+got):\n%s", diff)
	}
	if j := got.Jobs[0]; j.Phase != "Eval Running" || j.Progress != "round 2 (deployed 1)" {
		t.Errorf("phase %q progress %q", j.Phase, j.Progress)
	}
}

// An empty cluster is empty lists in JSON, which the dashboard's script
// iterates, never null.
func TestReadOfAnEmptyClusterIsEmptyListsInJSON(t *testing.T) {
	c, _, _ := clients("", nil, nil)
	got, err := readAt(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"taken":"2026-11-27T12:00:00Z","namespace":"","nodes":[],"jobs":[]}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

// A message a tenant made long is read cut to MaxMessageBytes, marked as
// cut, in the job's conditions and in what it waits for.
func TestReadCutsLongMessages(t *testing.T) {
	long := strings.Repeat("é", MaxMessageBytes)
	fl := &sednav1.FederatedLearningJob{ObjectMeta: meta("demo", "long", "long-uid"),
		Status: sednav1.FederatedLearningJobStatus{Phase: sednav1.FLJobPending,
			Conditions: []sednav1.JobCondition{condition("Admitted", corev1.ConditionFalse, "WaitingForQuota", long)}}}
	c, _, _ := clients("demo", nil, []runtime.Object{fl})
	got, err := readAt(t.Context(), c, now)
	if err != nil {
		t.Fatal(err)
	}
	j := got.Jobs[0]
	if n := len(j.Conditions[0].Message); n > MaxMessageBytes || !strings.HasSuffix(j.Conditions[0].Message, sednav1.TruncatedSuffix) {
		t.Errorf("the condition's message is %d bytes, want at most %d, ending %q", n, MaxMessageBytes, sednav1.TruncatedSuffix)
	}
	if n := len(j.Waiting); n > MaxMessageBytes || !strings.HasPrefix(j.Waiting, "WaitingForQuota: é") {
		t.Errorf("waiting is %d bytes (%.40q), want at most %d, its reason first", n, j.Waiting, MaxMessageBytes)
	}
}
