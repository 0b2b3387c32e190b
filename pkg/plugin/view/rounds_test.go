package view

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
)

// A federated learning job's rounds are a point per edge node: its last
// report, with the numeric metrics of it.
func TestReadRoundsOfAFederatedLearningJobIsAPointPerNode(t *testing.T) {
	fl := &sednav1.FederatedLearningJob{ObjectMeta: meta("demo", "surface", "fl-uid"), Status: sednav1.FederatedLearningJobStatus{
		EdgeNodes: []sednav1.EdgeNodeStatus{
			{Name: "edge-1", LastHeardTime: metav1.NewTime(ago(time.Minute)), Worker: "surface-train-1", Stage: "train", State: "running", Round: 2,
				Metrics: metrics("accuracy", "0.75", "currentRound", "2", "loss", " 0.5", "per_class", "[0.1,0.2]", sednav1.DroppedMetricsKey, "3", "nan", "NaN")},
			{Name: "edge-0", LastHeardTime: metav1.NewTime(ago(2 * time.Minute)), Stage: "train", State: "completed", Round: 3,
				Metrics: metrics("accuracy", "0.875", "currentRound", "3", "metrics", `{"f1":0.5,"classes":["a","b"],"nested":{"x":1},"per_class":[0.5,0.25]}`)},
		}}}
	c, _, _ := clients("demo", nil, []runtime.Object{fl})
	got, err := ReadRounds(t.Context(), c, "federatedlearningjob", "demo", "surface")
	if err != nil {
		t.Fatal(err)
	}
	// A list's numbers are metrics of their own, "<metric>[<i>]": a
	// list-valued metric was never plotted.
	want := &Rounds{Kind: "FederatedLearningJob", Namespace: "demo", Name: "surface",
		Metrics: []string{"accuracy", "loss", "metrics.f1", "metrics.per_class[0]", "metrics.per_class[1]", "per_class[0]", "per_class[1]"}, Points: []Point{
			{Node: "edge-0", Round: 3, Stage: "train", State: "completed", Time: tp(ago(2 * time.Minute)),
				Metrics: map[string]float64{"accuracy": 0.875, "metrics.f1": 0.5, "metrics.per_class[0]": 0.5, "metrics.per_class[1]": 0.25}},
			{Node: "edge-1", Round: 2, Stage: "train", State: "running", Time: tp(ago(time.Minute)),
				Metrics: map[string]float64{"accuracy": 0.75, "loss": 0.5, "per_class[0]": 0.1, "per_class[1]": 0.2}},
		}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rounds (-want,+got):\n%s", diff)
	}
}

// A learning cycle's rounds are a point per round of its history and one
// for the current round, on the dataset's node, with the models' metrics.
func TestReadRoundsOfAnIncrementalJobIsAPointPerRound(t *testing.T) {
	il := &sednav1.IncrementalLearningJob{ObjectMeta: meta("demo", "helmet", "il-uid"),
		Spec: sednav1.IncrementalLearningJobSpec{Dataset: sednav1.CycleDataset{Name: "d0"}},
		Status: sednav1.IncrementalLearningJobStatus{
			Conditions: []sednav1.StageCondition{{Type: sednav1.StageRunning, Status: corev1.ConditionTrue, Stage: sednav1.StageEval,
				LastTransitionTime: metav1.NewTime(ago(3 * time.Minute))}},
			CycleStatus: sednav1.CycleStatus{Stage: sednav1.StageEval, State: sednav1.StageRunning, Round: 3,
				CurrentRound: &sednav1.RoundStatus{Round: 3, StartTime: mtime(ago(10 * time.Minute)), Models: []sednav1.RoundModel{{URL: "/m3"}}},
				History: []sednav1.RoundStatus{
					{Round: 1, CompletionTime: mtime(ago(time.Hour)), Result: "Deployed",
						Models: []sednav1.RoundModel{{URL: "/m1", Metrics: metrics("precision", "0.5", "recall", "0.25")}}},
					{Round: 2, CompletionTime: mtime(ago(30 * time.Minute)), Result: "NotDeployed", Models: []sednav1.RoundModel{
						{URL: "/m2a", Metrics: metrics("precision", "0.625", "precision_delta", "[0.1,-0.2]")},
						{URL: "/m2b", Metrics: metrics("precision", "0.75")},
					}},
				}},
		}}
	c, _, _ := clients("demo", nil, []runtime.Object{il, dataset("demo", "d0", "edge-0")})
	got, err := ReadRounds(t.Context(), c, "IncrementalLearningJobs.sedna.io", "demo", "helmet")
	if err != nil {
		t.Fatal(err)
	}
	want := &Rounds{Kind: "IncrementalLearningJob", Namespace: "demo", Name: "helmet",
		Metrics: []string{"0:precision", "0:precision_delta[0]", "0:precision_delta[1]", "1:precision", "precision", "recall"},
		Points: []Point{
			{Node: "edge-0", Round: 1, State: "Deployed", Time: tp(ago(time.Hour)), Metrics: map[string]float64{"precision": 0.5, "recall": 0.25}},
			{Node: "edge-0", Round: 2, State: "NotDeployed", Time: tp(ago(30 * time.Minute)), Metrics: map[string]float64{"0:precision": 0.625, "0:precision_delta[0]": 0.1, "0:precision_delta[1]": -0.2, "1:precision": 0.75}},
			{Node: "edge-0", Round: 3, Stage: "Eval", State: "Running", Time: tp(ago(3 * time.Minute))},
		}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rounds (-want,+got):\n%s", diff)
	}
}

// A learning cycle's round is on the node its stage ran on: the cloud-0
// train pod's round read edge-0, the dataset's node. A finished round is
// on its eval pod's node (its metrics are the eval's), else its train
// pod's; a round whose pods are gone on the dataset's node.
func TestReadRoundsPutsACyclesRoundOnTheNodeItsStageRanOn(t *testing.T) {
	il := &sednav1.IncrementalLearningJob{ObjectMeta: meta("demo", "helmet", "il-uid"),
		Spec: sednav1.IncrementalLearningJobSpec{Dataset: sednav1.CycleDataset{Name: "d0"}},
		Status: sednav1.IncrementalLearningJobStatus{CycleStatus: sednav1.CycleStatus{Stage: sednav1.StageTrain, State: sednav1.StageRunning, Round: 4,
			History: []sednav1.RoundStatus{{Round: 1, Result: "Deployed"}, {Round: 2, Result: "Deployed"}, {Round: 3, Result: "NotDeployed"}}}}}
	stagePod := func(name, role, round, node string, phase corev1.PodPhase) runtime.Object {
		return pod("demo", name, "il-uid", node, phase, common.LabelWorkerRole, role, learningcycle.LabelRound, round)
	}
	c, _, _ := clients("demo", []runtime.Object{
		stagePod("helmet-train-2", "train", "2", "cloud-0", corev1.PodSucceeded),
		stagePod("helmet-eval-2", "eval", "2", "edge-1", corev1.PodSucceeded),
		stagePod("helmet-train-3", "train", "3", "cloud-0", corev1.PodSucceeded),
		stagePod("helmet-train-4", "train", "4", "cloud-0", corev1.PodRunning),
		pod("demo", "someone-elses", "other-uid", "cloud-9", corev1.PodRunning, common.LabelWorkerRole, "train", learningcycle.LabelRound, "4"),
	}, []runtime.Object{il, dataset("demo", "d0", "edge-0")})
	got, err := ReadRounds(t.Context(), c, "incrementallearningjob", "demo", "helmet")
	if err != nil {
		t.Fatal(err)
	}
	gotNodes := map[int32]string{}
	for _, p := range got.Points {
		gotNodes[p.Round] = p.Node
	}
	want := map[int32]string{1: "edge-0", 2: "edge-1", 3: "cloud-0", 4: "cloud-0"}
	if diff := cmp.Diff(want, gotNodes); diff != "" {
		t.Errorf("rounds' nodes (-want,+got):\n%s", diff)
	}
}

// The kind is any name kubectl takes, short names from discovery; errors
// name what is wrong.
func TestReadRoundsNamesWhatIsWrong(t *testing.T) {
	c, kube, _ := clients("demo", nil, []runtime.Object{&sednav1.LifelongLearningJob{ObjectMeta: meta("demo", "ll", "ll-uid")}})
	kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "sedna.io/v1alpha1", APIResources: []metav1.APIResource{
		{Name: "federatedlearningjobs", ShortNames: []string{"fl"}}, {Name: "lifelonglearningjobs", ShortNames: []string{"ll"}},
		{Name: "jointinferenceservices", ShortNames: []string{"ji"}},
	}}}
	if got, err := ReadRounds(t.Context(), c, "ll", "demo", "ll"); err != nil || got.Kind != "LifelongLearningJob" || len(got.Points) != 0 {
		t.Errorf("ll: got %+v, %v; want the lifelong job's no points", got, err)
	}
	for name, tc := range map[string]struct{ kind, ns, job, want string }{
		"missing job":  {"fl", "demo", "x", "no federatedlearningjob demo/x: not found"},
		"unknown kind": {"flj", "demo", "x", `unknown kind "flj": want one of dijob, federatedlearningjob (fl), incrementallearningjob, jointinferenceservice (ji), lifelonglearningjob (ll)`},
		"no rounds":    {"ji", "demo", "x", "a JointInferenceService has no rounds: want a federatedlearningjob, incrementallearningjob, lifelonglearningjob"},
		"no namespace": {"fl", "", "x", "no namespace"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadRounds(t.Context(), c, tc.kind, tc.ns, tc.job)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("got %v, want an error starting %q", err, tc.want)
			}
		})
	}
}

// A failed round's point says why, as the dashboard's rounds table shows it.
func TestAFailedRoundSaysWhy(t *testing.T) {
	st := &sednav1.CycleStatus{Round: 2, Stage: sednav1.StageTrain, State: sednav1.StageWaiting, History: []sednav1.RoundStatus{
		{Round: 1, Result: sednav1.RoundFailed, Message: "Deploy failed: no model"},
	}}
	points := cyclePoints(st, nil, roundNodes{dataset: "edge-0"})
	if len(points) != 2 || points[0].State != sednav1.RoundFailed || points[0].Message != "Deploy failed: no model" || points[1].Message != "" {
		t.Errorf("points %+v, want round 1 Failed saying why, round 2 without a message", points)
	}
}
