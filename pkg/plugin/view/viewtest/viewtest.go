// Package viewtest holds a Snapshot and Rounds of every case the plugin's
// renderings must show (a node of each link state, a job of each kind,
// waiting and not, notes), at a fixed time, for their golden tests.
package viewtest

import (
	"time"

	"github.com/nereid-ml/nereid/pkg/plugin/view"
)

// Now is when the fixtures were taken.
var Now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *time.Time {
	t := Now.Add(-d)
	return &t
}

// Snapshot is a fleet of a cloud node, two edge nodes (one connected, one
// disconnected) and one no LocalController ever connected from, with a
// job of each kind and a note.
func Snapshot() *view.Snapshot {
	fl := view.JobRef("FederatedLearningJob", "demo", "surface-defect-detection")
	di := view.JobRef("DIJob", "rl", "cartpole")
	return &view.Snapshot{
		Taken:     Now,
		Namespace: "demo",
		Nodes: []view.Node{
			{Name: "cloud-0", Ready: "True", Objects: 2,
				Workers: []string{"demo/surface-defect-detection-aggregation-0", "rl/cartpole-learner-0"}, Jobs: []string{di, fl}},
			{Name: "edge-0", Link: view.LinkConnected, LastHeard: ago(3 * time.Second), Outbox: "0% (0/10000 reports, 0/67108864 bytes)",
				Ready: "True", Edge: true, Objects: 3, Workers: []string{"demo/surface-defect-detection-training-0", "rl/cartpole-collector-0"},
				Jobs: []string{di, fl}},
			{Name: "edge-1", Link: view.LinkDisconnected, LastHeard: ago(7 * time.Minute), Outbox: "12% (1200/10000 reports, 1024/67108864 bytes)",
				Ready: "False", Edge: true, Objects: 2, Workers: []string{"demo/surface-defect-detection-training-1"}, Jobs: []string{fl}},
			{Name: "edge-2", Link: view.LinkUnknown, Ready: "True", Edge: true},
		},
		Jobs: []view.Job{
			{Kind: "FederatedLearningJob", Namespace: "demo", Name: "surface-defect-detection", Created: *ago(26 * time.Minute),
				Phase: "Running", Progress: "round 3 (slowest 2)", Nodes: []string{"cloud-0", "edge-0", "edge-1"}},
			{Kind: "IncrementalLearningJob", Namespace: "demo", Name: "helmet-detection-demo", Created: *ago(3 * time.Hour),
				Phase: "Train Waiting", Progress: "round 2 (deployed 1)",
				Conditions: []view.Condition{{Type: "Admitted", Status: "False", Reason: "WaitingForQuota",
					Message: "needs requests.cpu=3, 1 free of 4 in quota q", Since: ago(2 * time.Minute)}},
				Waiting: "WaitingForQuota: needs requests.cpu=3, 1 free of 4 in quota q"},
			{Kind: "JointInferenceService", Namespace: "demo", Name: "helmet-detection-inference", Created: *ago(50 * time.Hour),
				Phase: "Unavailable", Progress: "edge 1/1, cloud 0/1",
				Waiting: "pod helmet-detection-inference-cloud-7d9f Unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu."},
			{Kind: "DIJob", Namespace: "rl", Name: "cartpole", Created: *ago(90 * time.Second), Phase: "Running",
				Progress: "learner 1/1, collector 1/1", Nodes: []string{"cloud-0", "edge-0"},
				Replicas: []view.Replica{{Task: "learner", Node: "cloud-0", Running: 1}, {Task: "collector", Node: "edge-0", Running: 1}}},
		},
		Notes: []string{"You may not list lifelonglearningjobs.sedna.io in namespace demo."},
	}
}

// FederatedRounds are a federated learning job's rounds on two nodes, one
// without a metric the other has.
func FederatedRounds() *view.Rounds {
	return &view.Rounds{Kind: "FederatedLearningJob", Namespace: "demo", Name: "surface-defect-detection",
		Metrics: []string{"accuracy", "loss"},
		Points: []view.Point{
			{Node: "edge-0", Round: 3, Stage: "train", State: "completed", Time: ago(20 * time.Second),
				Metrics: map[string]float64{"accuracy": 0.9375, "loss": 0.123456789}},
			{Node: "edge-1", Round: 2, Stage: "train", State: "running", Time: ago(4 * time.Minute),
				Metrics: map[string]float64{"accuracy": 0.875}},
		}}
}

// CycleRounds are a learning cycle's rounds: two finished, one current.
func CycleRounds() *view.Rounds {
	return &view.Rounds{Kind: "IncrementalLearningJob", Namespace: "demo", Name: "helmet-detection-demo",
		Metrics: []string{"precision", "recall"},
		Points: []view.Point{
			{Node: "edge-0", Round: 1, State: "Deployed", Time: ago(2 * time.Hour), Metrics: map[string]float64{"precision": 0.5, "recall": 0.25}},
			{Node: "edge-0", Round: 2, State: "NotDeployed", Time: ago(time.Hour), Metrics: map[string]float64{"precision": 0.4}},
			{Node: "edge-0", Round: 3, Stage: "Eval", State: "Running", Time: ago(5 * time.Minute)},
		}}
}
