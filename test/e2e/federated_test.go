package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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

// setEnv sets env in c's environment, in place of a value it has.
func setEnv(c *corev1.Container, env []corev1.EnvVar) {
	for _, e := range env {
		i := slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == e.Name })
		if i < 0 {
			c.Env = append(c.Env, e)
		} else {
			c.Env[i] = e
		}
	}
}

// startFederatedJob starts Sedna's sample federated job as the tests run it:
// its aggregation server and its trainers (Sedna's FederatedLearning with a
// numpy logistic regression) in real pods, the aggregator on the real cloud
// node, a trainer on each real edge node with its node's Dataset of 300
// rows; aggregatorEnv and trainerEnv are set in their containers'. It returns the job's namespace and
// the job as made.
func startFederatedJob(t *testing.T, aggregatorEnv, trainerEnv []corev1.EnvVar) (string, *sednav1.FederatedLearningJob) {
	t.Helper()
	real := framework.RealNodes(t)
	nodes := real.Edge
	ensureWorkerImage(t, "worker")
	var job sednav1.FederatedLearningJob
	framework.SednaSample(t, "federatedlearningjob_v1alpha1.yaml", &job, map[string]string{"cloud": real.Cloud()[0], "edge1": nodes[0], "edge2": nodes[1]})
	runAs(&job.Spec.AggregationWorker.Template.Spec, "fl-aggregator")
	agg := &job.Spec.AggregationWorker.Template.Spec.Containers[0]
	setEnv(agg, aggregatorEnv)
	for i := range job.Spec.TrainingWorkers {
		runAs(&job.Spec.TrainingWorkers[i].Template.Spec, "fl-trainer-logistic")
		c := &job.Spec.TrainingWorkers[i].Template.Spec.Containers[0]
		setEnv(c, trainerEnv)
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
	created, err := sc.FederatedLearningJobs(ns).Create(ctx, &job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keepLogsOnFailure(t, ns)
	return ns, created
}

// TestSednasFederatedLearningTrainsOnRealNodesUntilTheAggregatorExits:
// Sedna's sample job, its aggregation server (Sedna's AggregationServer,
// FedAvg) and its trainers (Sedna's FederatedLearning with a numpy logistic
// regression) in real pods on two real nodes, each trainer on its node's
// Dataset of 300 rows, reporting through its node's LocalController (the
// chart's DaemonSet Pod) from its own address: the job runs exit_round
// rounds, each node's reports reach status.edgeNodes, and it ends Succeeded
// when Sedna's aggregator exits by itself; deleted, it takes its pods with
// it.
func TestSednasFederatedLearningTrainsOnRealNodesUntilTheAggregatorExits(t *testing.T) {
	t.Parallel()
	ns, job := startFederatedJob(t, nil, nil)
	nodes := framework.RealNodes(t).Edge
	sc := framework.SednaClient(t).SednaV1alpha1()
	ctx := t.Context()

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

// TestSednasFederatedLearningOnRealNodesHealsRollsAndGoesWithItsJob: the
// sample job made long (exit_round 1000, half a second a round): a trainer pod
// deleted by hand is made again, under its name, and Sedna's aggregator
// takes the new one; a new value of a trainer's template rolls that
// trainer's pod (its name has the spec's hash); the deleted job takes its
// running pods with it.
func TestSednasFederatedLearningOnRealNodesHealsRollsAndGoesWithItsJob(t *testing.T) {
	t.Parallel()
	ns, job := startFederatedJob(t, []corev1.EnvVar{{Name: "exit_round", Value: "1000"}},
		[]corev1.EnvVar{{Name: "NEREID_ROUND_SECONDS", Value: "0.5"}})
	sc := framework.SednaClient(t).SednaV1alpha1()
	ctx := t.Context()
	// running is trainer i's running pod, or nil.
	running := func(ctx context.Context, i int) (*corev1.Pod, error) {
		pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: workerRoleLabel + "=training"})
		if err != nil {
			return nil, err
		}
		for j := range pods.Items {
			p := &pods.Items[j]
			if strings.HasPrefix(p.Name, fmt.Sprintf("%s-training-%d-", job.Name, i)) && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				return p, nil
			}
		}
		return nil, nil
	}
	trainer := func(i int) *corev1.Pod {
		t.Helper()
		var pod *corev1.Pod
		framework.Eventually(t, 90*time.Second, fmt.Sprintf("trainer %d running", i), func(ctx context.Context) (bool, error) {
			p, err := running(ctx, i)
			pod = p
			return p != nil, err
		})
		return pod
	}
	framework.Eventually(t, 2*time.Minute, "the job past round 2", func(ctx context.Context) (bool, error) {
		j, err := sc.FederatedLearningJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if j.Status.Phase == sednav1.FLJobFailed {
			return false, fmt.Errorf("the job failed: %+v", j.Status.Conditions)
		}
		return j.Status.Round > 2, nil
	})

	// Self-healing: trainer 0's pod, deleted by hand, is made again.
	first := trainer(0)
	deletePod(t, ns, first.Name)
	waitRemade(t, ns, first.Name, first.UID)
	framework.Eventually(t, 60*time.Second, "Sedna's aggregator to take the trainer made again", func(context.Context) (bool, error) {
		return strings.Count(podLogs(t, ns, "aggregation"), "Adding client "+first.Name) == 2, nil
	})

	// Respec: a new value of trainer 1's template rolls its pod.
	before := trainer(1)
	framework.Edit(t, sc.FederatedLearningJobs(ns).Get, sc.FederatedLearningJobs(ns).Update, job.Name, func(j *sednav1.FederatedLearningJob) {
		c := &j.Spec.TrainingWorkers[1].Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "NEREID_RESPEC", Value: "1"})
	})
	framework.Eventually(t, 90*time.Second, "trainer 1 rolled to the edited template", func(ctx context.Context) (bool, error) {
		p, err := running(ctx, 1)
		return p != nil && p.Name != before.Name && envOf(p, "NEREID_RESPEC") == "1", err
	})
	// While the rolled pod starts the job is Pending; then Running again.
	framework.Eventually(t, 60*time.Second, "the job Running after the faults", func(ctx context.Context) (bool, error) {
		j, err := sc.FederatedLearningJobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if j.Status.Phase == sednav1.FLJobFailed {
			return false, fmt.Errorf("the job failed: %+v", j.Status.Conditions)
		}
		return j.Status.Phase == sednav1.FLJobRunning, nil
	})

	// Cascade: the running job's pods go with it.
	if err := sc.FederatedLearningJobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsGone(t, ns, workerRoleLabel)
}
