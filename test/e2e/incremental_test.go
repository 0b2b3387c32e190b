package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/learningcycle"
	"github.com/nereid-ml/nereid/test/framework"
)

// hostPathsUnderData moves a template's hostPath volumes under /data, a
// path every real node has of its own, and makes them on node.
func hostPathsUnderData(t *testing.T, spec *corev1.PodSpec, node string) {
	t.Helper()
	for i := range spec.Volumes {
		if hp := spec.Volumes[i].HostPath; hp != nil {
			hp.Path = filepath.Join("/data", hp.Path)
			framework.WriteRealNodeFile(t, node, filepath.Join(hp.Path, ".keep"), "")
		}
	}
}

// TestSednasIncrementalLearningOnARealNodeTrainsEvaluatesAndHotUpdates:
// Sedna's sample job with Sedna's IncrementalLearning classes in real pods
// on a real edge node. The Dataset's real file on the node grows past the
// sample's 500 samples; the node's LocalController (the chart's Pod) sees
// it and fires the trigger; the train and eval workers run; the better
// model is deployed over the deploy Model's file, and the inference worker,
// running from the start with hot update on, loads it by itself (Sedna's
// ModelLoadingThread) and serves it. A new value of the train template
// takes effect at round 2's train pod (respec); the inference pod deleted by
// hand is made again and serves the deployed model (self-healing); the
// deleted job takes its pods with it (cascade).
func TestSednasIncrementalLearningOnARealNodeTrainsEvaluatesAndHotUpdates(t *testing.T) {
	t.Parallel()
	real := framework.RealNodes(t)
	ensureWorkerImage(t, "worker")
	node := real.Edge[0]
	var job sednav1.IncrementalLearningJob
	framework.SednaSample(t, "incrementallearningjob_v1alpha1.yaml", &job, map[string]string{"edge-node": node})
	// The sample checks its trigger every minute from 02:00: every second
	// here, at any hour. Hot update on, polled every second.
	job.Spec.TrainSpec.Trigger.CheckPeriodSeconds, job.Spec.TrainSpec.Trigger.Timer = 1, nil
	job.Spec.DeploySpec.Model.HotUpdateEnabled, job.Spec.DeploySpec.Model.PollPeriodSeconds = true, 1
	runAs(&job.Spec.TrainSpec.Template.Spec, "il-train")
	runAs(&job.Spec.EvalSpec.Template.Spec, "il-eval")
	runAs(&job.Spec.DeploySpec.Template.Spec, "il-inference")
	hostPathsUnderData(t, &job.Spec.DeploySpec.Template.Spec, node)
	untrained := "[[0, 0, 0, 0]]"
	framework.WriteRealNodeFile(t, node, "/models/initial/model.pb", untrained)
	framework.WriteRealNodeFile(t, node, "/models/deploy/model.pb", untrained)
	framework.WriteRealNodeFile(t, node, "/data/helmet/train.txt", "")

	ns := framework.Namespace(t)
	keepLogsOnFailure(t, ns)
	sc := framework.SednaClient(t).SednaV1alpha1()
	ctx := t.Context()
	for name, url := range map[string]string{job.Spec.InitialModel.Name: "/models/initial/model.pb", job.Spec.DeploySpec.Model.Name: "/models/deploy/model.pb"} {
		m := &sednav1.Model{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sednav1.ModelSpec{URL: url, Format: "pb"}}
		if _, err := sc.Models(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: job.Spec.Dataset.Name},
		Spec: sednav1.DatasetSpec{URL: "/data/helmet/train.txt", Format: "txt", NodeName: node}}
	if _, err := sc.Datasets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := sc.IncrementalLearningJobs(ns).Create(ctx, &job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inference := job.Name + "-deploy-0"
	waitReady(t, ns, inference)

	// The dataset grows past the sample's threshold (500), in the node's file.
	var lines strings.Builder
	for i := range 600 {
		fmt.Fprintf(&lines, "images/%d.jpg %d\n", i, i%2)
	}
	framework.WriteRealNodeFile(t, node, "/data/helmet/train.txt", lines.String())

	framework.Eventually(t, 3*time.Minute, "round 1 trained, evaluated and deployed", func(ctx context.Context) (bool, error) {
		j, err := sc.IncrementalLearningJobs(ns).Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if j.Status.State == sednav1.StageFailed {
			return false, fmt.Errorf("the job failed: %+v", j.Status.History)
		}
		return j.Status.DeployedRound == 1 && j.Status.InferenceWorker == inference, nil
	})
	framework.Eventually(t, 60*time.Second, "the inference worker to say it loaded the round's model", func(ctx context.Context) (bool, error) {
		return framework.CountEvents(t, ns, created.UID, "ModelHotUpdated", inference) > 0, nil
	})
	framework.Eventually(t, 30*time.Second, "the inference worker to serve the trained model", func(context.Context) (bool, error) {
		return strings.Contains(podLogs(t, ns, "inference"), "serving a model of weight 1.0"), nil
	})

	respecAtRoundTwo(t, ns, node, job.Name, &lines)

	// Self-healing: the inference pod deleted by hand is made again and
	// serves the deployed model from its start.
	before, err := framework.KubeClient(t).CoreV1().Pods(ns).Get(ctx, inference, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deletePod(t, ns, inference)
	waitRemade(t, ns, inference, before.UID)
	framework.Eventually(t, 30*time.Second, "the remade inference worker to serve the deployed model", func(context.Context) (bool, error) {
		return strings.Contains(podLogs(t, ns, "inference"), "serving a model of weight 1.0"), nil
	})
	// Cascade: the job's pods go with it.
	if err := sc.IncrementalLearningJobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodsGone(t, ns, workerRoleLabel)
}

// respecAtRoundTwo: a new value of the train template of IL job jobName takes
// effect at the next stage: round 2's train pod, which 600 more samples in
// the Dataset's file on node (lines, its content so far) trigger, has it.
func respecAtRoundTwo(t *testing.T, ns, node, jobName string, lines *strings.Builder) {
	t.Helper()
	sc := framework.SednaClient(t).SednaV1alpha1()
	framework.Edit(t, sc.IncrementalLearningJobs(ns).Get, sc.IncrementalLearningJobs(ns).Update, jobName, func(j *sednav1.IncrementalLearningJob) {
		c := &j.Spec.TrainSpec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "NEREID_RESPEC", Value: "1"})
	})
	for i := range 600 {
		fmt.Fprintf(lines, "images/more-%d.jpg %d\n", i, i%2)
	}
	framework.WriteRealNodeFile(t, node, "/data/helmet/train.txt", lines.String())
	framework.Eventually(t, 90*time.Second, "round 2's train pod, from the edited template", func(ctx context.Context) (bool, error) {
		pods, err := framework.KubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
			LabelSelector: workerRoleLabel + "=train," + learningcycle.LabelRound + "=2"})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		if v := envOf(&pods.Items[0], "NEREID_RESPEC"); v != "1" {
			return false, fmt.Errorf("round 2's train pod %s lacks the edited environment", pods.Items[0].Name)
		}
		return true, nil
	})
}
