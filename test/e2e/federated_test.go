package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/test/framework"
)

// runAs makes a worker template's container the worker image running role
// of test/sednalib/py/nereid_workers.py, as Sedna's example images run their
// scripts (in place of the sample's args, which name them): the rest of the
// template is the sample's.
func runAs(spec *corev1.PodSpec, role string) {
	c := &spec.Containers[0]
	c.Image, c.ImagePullPolicy = workerImage, corev1.PullIfNotPresent
	c.Command, c.Args = []string{"python3", "-m", "nereid_workers", role}, nil
}

// separableRows are n rows "x1,x2,label" of two Gaussian clouds a line
// separates: what the trainers' logistic regression learns.
func separableRows(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for i := range n {
		label, centre := i%2, -1.5
		if label == 1 {
			centre = 1.5
		}
		fmt.Fprintf(&b, "%.4f,%.4f,%d\n", centre+r.NormFloat64(), centre+r.NormFloat64(), label)
	}
	return b.String()
}

// TestSednasFederatedLearningTrainsOnRealNodesUntilTheAggregatorExits:
// Sedna's sample job, its aggregation server (Sedna's AggregationServer,
// FedAvg) and its trainers (Sedna's FederatedLearning with a numpy logistic
// regression) in real pods on two real nodes, each trainer on its node's
// Dataset of 300 rows, reporting through its node's LocalController (the
// chart's DaemonSet Pod) from its own address: the job runs exit_round
// rounds, each node's reports reach status.edgeNodes, and it ends Succeeded
// when Sedna's aggregator exits by itself.
func TestSednasFederatedLearningTrainsOnRealNodesUntilTheAggregatorExits(t *testing.T) {
	real := framework.RealNodes(t)
	nodes := real.Edge
	ensureWorkerImage(t, "worker")
	var job sednav1.FederatedLearningJob
	framework.SednaSample(t, "federatedlearningjob_v1alpha1.yaml", &job, map[string]string{"cloud": real.Cloud()[0], "edge1": nodes[0], "edge2": nodes[1]})
	runAs(&job.Spec.AggregationWorker.Template.Spec, "fl-aggregator")
	for i := range job.Spec.TrainingWorkers {
		runAs(&job.Spec.TrainingWorkers[i].Template.Spec, "fl-trainer-logistic")
	}
	ns := framework.Namespace(t)
	sc := framework.SednaClient(t).SednaV1alpha1()
	ctx := t.Context()
	for i, node := range nodes[:2] {
		framework.WriteRealNodeFile(t, node, "/data/fl/train.txt", separableRows(uint64(i), 300))
		ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: job.Spec.TrainingWorkers[i].Dataset.Name},
			Spec: sednav1.DatasetSpec{URL: "/data/fl/train.txt", Format: "txt", NodeName: node}}
		if _, err := sc.Datasets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	model := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: job.Spec.AggregationWorker.Model.Name},
		Spec: sednav1.ModelSpec{URL: "/model/fl", Format: "pb"}}
	if _, err := sc.Models(ns).Create(ctx, model, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.FederatedLearningJobs(ns).Create(ctx, &job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	keepLogsOnFailure(t, ns)

	var got *sednav1.FederatedLearningJob
	framework.Eventually(t, 3*time.Minute, "the job Succeeded", func(ctx context.Context) (bool, error) {
		var err error
		got, err = sc.FederatedLearningJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.Phase == sednav1.FLJobFailed {
			return false, fmt.Errorf("the job failed: %+v", got.Status.Conditions)
		}
		return got.Status.Phase == sednav1.FLJobSucceeded, nil
	})
	rounds := map[string]int32{}
	for _, n := range got.Status.EdgeNodes {
		rounds[n.Name] = n.Round
		if n.ReportsApplied != 3 || n.State != "completed" {
			t.Errorf("%s: %d reports applied, state %q; want Sedna's trainer's 3 (running, running, completed)", n.Name, n.ReportsApplied, n.State)
		}
	}
	if rounds[nodes[0]] != 3 || rounds[nodes[1]] != 3 || got.Status.Round != 3 {
		t.Errorf("rounds %v, job round %d: want both nodes at exit_round 3", rounds, got.Status.Round)
	}
	trainerLogs := podLogs(t, ns, "training")
	if n := strings.Count(trainerLogs, "trained on 300 rows"); n != 6 {
		t.Errorf("the trainers trained %d times on their 300 rows, want 3 rounds each:\n%s", n, trainerLogs)
	}
	if logs := podLogs(t, ns, "aggregation"); strings.Count(logs, "Adding client") != 2 {
		t.Errorf("Sedna's aggregator did not take both trainers:\n%s", logs)
	}

	// Cascade: the job's pods, done, go with it.
	if err := sc.FederatedLearningJobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsGone(t, ns, workerRoleLabel)
}
