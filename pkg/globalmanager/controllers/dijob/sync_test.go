package dijob

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	difake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	diinformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/links"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

const ns = "rl"

// exampleJob is examples/dijob/dijob.yaml: a learner, two collectors, an evaluator.
func exampleJob(t *testing.T) *div2.DIJob {
	t.Helper()
	data, err := os.ReadFile("../../../../examples/dijob/dijob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	job := &div2.DIJob{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		t.Fatal(err)
	}
	job.Namespace, job.UID, job.Generation = ns, "job-uid", 1
	return job
}

type fixture struct {
	c    *Controller
	kube *kubefake.Clientset
	di   *difake.Clientset
	pods []*corev1.Pod
}

func newFixture(t *testing.T, job *div2.DIJob, pods ...*corev1.Pod) *fixture {
	t.Helper()
	var kubeObjs []runtime.Object
	for _, p := range pods {
		kubeObjs = append(kubeObjs, p)
	}
	f := &fixture{kube: kubefake.NewClientset(kubeObjs...), di: difake.NewClientset(job)}
	ki := kubeinformers.NewSharedInformerFactory(f.kube, 0)
	di := diinformers.NewSharedInformerFactory(f.di, 0)
	c, err := NewController(kinds.Deps{Kube: f.kube, Client: f.di, KubeInformers: ki, Informers: di, Recorder: record.NewFakeRecorder(100),
		Clock: testingclock.NewFakePassiveClock(time.Unix(1000, 0))},
		Config{ServerURL: "http://di-server:8081"})
	if err != nil {
		t.Fatal(err)
	}
	if err := di.Diengine().V2alpha1().DIJobs().Informer().GetIndexer().Add(job); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := ki.Core().V1().Pods().Informer().GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	f.c = c
	return f
}

// sync syncs the job and returns the pods created and the names deleted.
func (f *fixture) sync(t *testing.T, job *div2.DIJob) (created []*corev1.Pod, deleted []string) {
	t.Helper()
	f.kube.ClearActions()
	if err := f.c.sync(t.Context(), ns+"/"+job.Name); err != nil {
		t.Fatalf("sync: %v", err)
	}
	for _, a := range f.kube.Actions() {
		switch a := a.(type) {
		case clienttesting.CreateAction:
			if p, ok := a.GetObject().(*corev1.Pod); ok {
				created = append(created, p)
			}
		case clienttesting.DeleteAction:
			if a.GetResource().Resource == "pods" {
				deleted = append(deleted, a.GetName())
			}
		}
	}
	// Pods are created in parallel; rank order is what the tests read.
	slices.SortFunc(created, func(a, b *corev1.Pod) int {
		ra, _ := strconv.Atoi(a.Annotations[AnnotationRank])
		rb, _ := strconv.Atoi(b.Annotations[AnnotationRank])
		return ra - rb
	})
	slices.Sort(deleted)
	return created, deleted
}

// restartMark is the AnnotationRestart of pod name, as the API server has it.
func (f *fixture) restartMark(t *testing.T, name string) string {
	t.Helper()
	p, err := f.kube.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Annotations[AnnotationRestart]
}

// marked is pods with pods[i] marked as the failure of restart n.
func marked(pods []*corev1.Pod, i int, n string) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	out[i] = out[i].DeepCopy()
	out[i].Annotations = common.MergeLabels(out[i].Annotations, map[string]string{AnnotationRestart: n})
	return out
}

func (f *fixture) status(t *testing.T, job *div2.DIJob) div2.DIJobStatus {
	t.Helper()
	got, err := f.di.DiengineV2alpha1().DIJobs(ns).Get(t.Context(), job.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func env(p *corev1.Pod, name string) string {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// withPhase returns copies of pods in a phase, as the kubelet reports them.
func withPhase(pods []*corev1.Pod, phase corev1.PodPhase) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		p = p.DeepCopy()
		p.UID = types.UID("uid-" + p.Name)
		p.Status.Phase = phase
		p.Spec.NodeName = "node-" + p.Labels[LabelTaskName]
		if phase == corev1.PodRunning {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		out = append(out, p)
	}
	return out
}

func TestPodsCarryWhatDIEngineReads(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, job)
	created, _ := f.sync(t, job)
	want := []string{"cartpole-dqn-learner-0", "cartpole-dqn-collector-0", "cartpole-dqn-collector-1", "cartpole-dqn-evaluator-0"}
	if got := names(created); !slices.Equal(got, want) {
		t.Fatalf("created %v, want %v", got, want)
	}
	fqdn := func(pod string) string { return pod + ".di-cartpole-dqn.rl.svc.cluster.local" }
	var all []string
	for _, n := range want {
		all = append(all, fqdn(n))
	}
	for rank, p := range created {
		if p.Spec.Hostname != p.Name || p.Spec.Subdomain != "di-cartpole-dqn" {
			t.Errorf("%s: hostname %q subdomain %q, want the pod name and di-cartpole-dqn", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
		}
		if p.Spec.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: restartPolicy %s, want Never", p.Name, p.Spec.RestartPolicy)
		}
		checks := map[string]string{
			"DI_JOB_ID": "rl/cartpole-dqn", "DI_RANK": strconv.Itoa(rank),
			"DI_NODES": strings.Join(all, ","), "DI_LEARNER_NODES": fqdn(want[0]),
			"DI_COLLECTOR_NODES": fqdn(want[1]) + "," + fqdn(want[2]), "DI_EVALUATOR_NODES": fqdn(want[3]),
			"DI_SERVER_URL": "http://di-server:8081",
		}
		for k, v := range checks {
			if got := env(p, k); got != v {
				t.Errorf("%s: %s = %q, want %q", p.Name, k, got, v)
			}
		}
		if p.Labels[LabelJob] != "cartpole-dqn" || p.Labels[LabelPod] != p.Name || p.Labels[LabelTaskType] == "" {
			t.Errorf("%s: labels %v", p.Name, p.Labels)
		}
		if p.Annotations[AnnotationRank] != checks["DI_RANK"] || p.Annotations[AnnotationReplicas] != "4" {
			t.Errorf("%s: annotations %v", p.Name, p.Annotations)
		}
		if !hasVolume(p.Spec.Volumes, "cache-volume") {
			t.Errorf("%s: the job's volume is not added", p.Name)
		}
	}
	if got := created[2].Annotations[AnnotationTaskRank]; got != "1" {
		t.Errorf("collector-1's task rank = %q, want 1", got)
	}
	svc, err := f.kube.CoreV1().Services(ns).Get(t.Context(), "di-cartpole-dqn", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("headless Service: %v", err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Ports[0].Port != 22270 || svc.Spec.Ports[0].Name != "di-port" {
		t.Errorf("Service spec %+v, want headless on di-port 22270", svc.Spec)
	}
	// The pods just made count, though not in the cache yet: the status
	// written is the one the next sync computes, so it is written once.
	if st := f.status(t, job); st.Phase != div2.JobStarting || st.Replicas != 4 || st.TaskStatus["collector"][corev1.PodPending] != 2 {
		t.Errorf("status phase %s replicas %d tasks %v, want Starting 4 with 2 collectors pending (pods made, not seen yet)", st.Phase, st.Replicas, st.TaskStatus)
	}
}

func TestPhasesRestartsAndBackoff(t *testing.T) {
	job := exampleJob(t)
	made, _ := newFixture(t, job).sync(t, job)

	// All running: Running.
	running := withPhase(made, corev1.PodRunning)
	f := newFixture(t, job, running...)
	if created, deleted := f.sync(t, job); len(created)+len(deleted) != 0 {
		t.Fatalf("a running job: created %v, deleted %v", names(created), deleted)
	}
	st := f.status(t, job)
	if st.Phase != div2.JobRunning || st.ReadyReplicas != 4 || st.TaskStatus["collector"][corev1.PodRunning] != 2 {
		t.Fatalf("status %+v, want Running, 4 ready, 2 collectors running", st)
	}
	if want := []string{"node-learner", "node-collector", "node-collector", "node-evaluator"}; !slices.Equal(st.Allocation, want) {
		t.Errorf("allocation %v, want %v", st.Allocation, want)
	}

	// A collector fails: every pod goes, restarts counts it.
	failed := append([]*corev1.Pod(nil), running...)
	failed[1] = withPhase(made[1:2], corev1.PodFailed)[0]
	failed[1].Status.Message = "OOMKilled"
	// First the failure is marked and counted, and nothing is deleted: a
	// count the status lost would be lost for good once the pods are gone.
	job.Status = st
	f = newFixture(t, job, failed...)
	_, deleted := f.sync(t, job)
	if len(deleted) != 0 {
		t.Fatalf("deleted %v before the restart is in the status", deleted)
	}
	if mark := f.restartMark(t, "cartpole-dqn-collector-0"); mark != "1" {
		t.Fatalf("the failed pod's %s is %q, want 1", AnnotationRestart, mark)
	}
	st = f.status(t, job)
	if st.Phase != div2.JobRestarting || st.Restarts != 1 {
		t.Fatalf("status phase %s restarts %d, want Restarting 1", st.Phase, st.Restarts)
	}
	// A sync whose status write was lost counts the marked failure again,
	// once.
	f = newFixture(t, job, marked(failed, 1, "1")...)
	if _, deleted := f.sync(t, job); len(deleted) != 0 || f.status(t, job).Restarts != 1 {
		t.Fatalf("after a lost status write: deleted %v, restarts %d; want nothing deleted and 1", deleted, f.status(t, job).Restarts)
	}
	// The count written: every pod goes, and the count stays.
	job.Status = st
	f = newFixture(t, job, marked(failed, 1, "1")...)
	_, deleted = f.sync(t, job)
	if want := []string{"cartpole-dqn-collector-0", "cartpole-dqn-collector-1", "cartpole-dqn-evaluator-0", "cartpole-dqn-learner-0"}; !slices.Equal(deleted, want) {
		t.Fatalf("after the count was written deleted %v, want every pod %v", deleted, want)
	}
	st = f.status(t, job)
	if st.Phase != div2.JobRestarting || st.Restarts != 1 {
		t.Fatalf("status phase %s restarts %d, want Restarting 1", st.Phase, st.Restarts)
	}
	if msg := conditionMessage(&st, div2.JobRestarting); !strings.Contains(msg, "cartpole-dqn-collector-0 failed: OOMKilled") {
		t.Errorf("Restarting condition says %q, want the pod and its failure", msg)
	}

	// The backoff limit spent: Failed, the running pods cleaned.
	job.Status = st
	job.Status.Restarts = 3
	f = newFixture(t, job, failed...)
	_, deleted = f.sync(t, job)
	st = f.status(t, job)
	if st.Phase != div2.JobFailed || st.CompletionTimestamp == nil {
		t.Fatalf("status phase %s, want Failed with a completion time", st.Phase)
	}
	if msg := conditionMessage(&st, div2.JobFailed); !strings.Contains(msg, "backoffLimit") {
		t.Errorf("Failed condition says %q, want the backoff limit named", msg)
	}
	if slices.Contains(deleted, "cartpole-dqn-collector-0") || len(deleted) != 3 {
		t.Errorf("cleanPodPolicy Running deleted %v, want the 3 running pods, not the failed one", deleted)
	}
	for _, c := range st.Conditions {
		if c.Type != div2.ConditionType(div2.JobFailed) && c.Type != div2.ConditionScheduled && c.Status == corev1.ConditionTrue {
			t.Errorf("condition %s still True beside Failed", c.Type)
		}
	}

	// A finished job never resurrects.
	job.Status = st
	f = newFixture(t, job)
	if created, _ := f.sync(t, job); len(created) != 0 {
		t.Errorf("a failed job made pods %v", names(created))
	}
}

func TestLearnerAndEvaluatorDecideSuccess(t *testing.T) {
	job := exampleJob(t)
	made, _ := newFixture(t, job).sync(t, job)
	pods := withPhase(made, corev1.PodRunning)
	pods[0] = withPhase(made[0:1], corev1.PodSucceeded)[0]
	f := newFixture(t, job, pods...)
	f.sync(t, job)
	if st := f.status(t, job); st.Phase != div2.JobRunning {
		t.Fatalf("learner done, evaluator running: phase %s, want Running", st.Phase)
	}
	pods[3] = withPhase(made[3:4], corev1.PodSucceeded)[0]
	// A collector stopped with an error after the learner ended does not
	// turn a success into a restart.
	pods[1] = withPhase(made[1:2], corev1.PodFailed)[0]
	f = newFixture(t, job, pods...)
	_, deleted := f.sync(t, job)
	st := f.status(t, job)
	if st.Phase != div2.JobSucceeded || st.Restarts != 0 {
		t.Fatalf("learner and evaluator done: phase %s restarts %d, want Succeeded 0", st.Phase, st.Restarts)
	}
	job.Status = st
	f = newFixture(t, job, pods...)
	_, deleted = f.sync(t, job)
	if want := []string{"cartpole-dqn-collector-1"}; !slices.Equal(deleted, want) {
		t.Errorf("cleanPodPolicy Running on success deleted %v, want %v", deleted, want)
	}
	// Once the collectors are gone the job still says where it ran.
	job.Status = f.status(t, job)
	f = newFixture(t, job, pods[0], pods[3])
	f.sync(t, job)
	if got := f.status(t, job).Allocation; len(got) != 4 || slices.Contains(got, "") {
		t.Errorf("a finished job's allocation %v, want the 4 nodes it ran on", got)
	}
}

func TestScalingAddsAndRemovesExactlyThoseReplicas(t *testing.T) {
	job := exampleJob(t)
	made, _ := newFixture(t, job).sync(t, job)
	running := withPhase(made, corev1.PodRunning)

	job.Spec.Tasks[1].Replicas = 4
	job.Generation = 2
	f := newFixture(t, job, running...)
	created, deleted := f.sync(t, job)
	if want := []string{"cartpole-dqn-collector-2", "cartpole-dqn-collector-3"}; !slices.Equal(names(created), want) || len(deleted) != 0 {
		t.Fatalf("scaled collectors 2→4: created %v deleted %v, want %v and none", names(created), deleted, want)
	}
	if got := env(created[1], "DI_COLLECTOR_NODES"); strings.Count(got, ",") != 3 {
		t.Errorf("a new collector's DI_COLLECTOR_NODES = %q, want the 4 collectors", got)
	}
	if st := f.status(t, job); st.Replicas != 6 || st.ObservedGeneration != 2 {
		t.Errorf("status replicas %d observedGeneration %d, want 6 and 2", st.Replicas, st.ObservedGeneration)
	}

	job.Spec.Tasks[1].Replicas = 1
	job.Generation = 3
	f = newFixture(t, job, running...)
	created, deleted = f.sync(t, job)
	if want := []string{"cartpole-dqn-collector-1"}; !slices.Equal(deleted, want) || len(created) != 0 {
		t.Fatalf("scaled collectors 2→1: deleted %v created %v, want the highest rank %v only", deleted, names(created), want)
	}
}

func TestScaleSubresourceSetsTheOnlyTask(t *testing.T) {
	job := exampleJob(t)
	job.Spec.Tasks = job.Spec.Tasks[:1]
	job.Spec.Replicas = ptr.To[int32](3)
	f := newFixture(t, job)
	created, _ := f.sync(t, job)
	if want := []string{"cartpole-dqn-learner-0", "cartpole-dqn-learner-1", "cartpole-dqn-learner-2"}; !slices.Equal(names(created), want) {
		t.Fatalf("spec.replicas 3 on a one-task job made %v, want %v", names(created), want)
	}
	if st := f.status(t, job); st.Selector != "nereid.io/owner-uid=job-uid" {
		t.Errorf("status.selector %q, want the owner-uid selector", st.Selector)
	}
}

// downLinks is a LinkChecker whose down nodes went down at the given times.
type downLinks map[string]time.Time

func (l downLinks) LinkDown(_ context.Context, node string, _ time.Time) (bool, time.Time, error) {
	since, ok := l[node]
	return ok, since, nil
}

func TestACollectorBehindADownEdgeLinkIsHeldForTheGrace(t *testing.T) {
	job := exampleJob(t)
	job.Spec.Tasks[1].Template.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/edge": ""}
	made, _ := newFixture(t, job).sync(t, job)
	var tolerates int64
	for _, tol := range made[1].Spec.Tolerations {
		if tol.Key == corev1.TaintNodeUnreachable && tol.Effect == corev1.TaintEffectNoExecute && tol.TolerationSeconds != nil {
			tolerates = *tol.TolerationSeconds
		}
	}
	if tolerates != int64(DefaultEdgeLinkGrace/time.Second) {
		t.Errorf("an edge collector tolerates the unreachable taint for %d s, want the grace %v", tolerates, DefaultEdgeLinkGrace)
	}
	if len(made[0].Spec.Tolerations) != 0 {
		t.Errorf("a cloud learner got tolerations %v", made[0].Spec.Tolerations)
	}

	pods := withPhase(made, corev1.PodRunning)
	pods[1] = withPhase(made[1:2], corev1.PodFailed)[0] // on node-collector
	pods[1].Status.Reason = "NodeLost"
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name      string
		downSince time.Time
		restarts  int32
		phase     div2.Phase
	}{
		{"link down a minute ago: held", now.Add(-time.Minute), 0, div2.JobRunning},
		{"link down past the grace: a failure", now.Add(-DefaultEdgeLinkGrace - time.Second), 1, div2.JobRestarting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, job, pods...)
			f.c.config.Links = downLinks{"node-collector": tc.downSince}
			_, deleted := f.sync(t, job)
			st := f.status(t, job)
			if st.Phase != tc.phase || st.Restarts != tc.restarts {
				t.Fatalf("phase %s restarts %d (deleted %v), want %s %d", st.Phase, st.Restarts, deleted, tc.phase, tc.restarts)
			}
			if tc.phase == div2.JobRunning && !strings.Contains(conditionMessage(&st, div2.JobRunning), "cartpole-dqn-collector-0 on node-collector (held until") {
				t.Errorf("Running says %q, want the held pod named", conditionMessage(&st, div2.JobRunning))
			}
		})
	}
}

func TestRestartsAfterTheFirstBackOff(t *testing.T) {
	job := exampleJob(t)
	made, _ := newFixture(t, job).sync(t, job)
	pods := withPhase(made, corev1.PodRunning)
	pods[1] = withPhase(made[1:2], corev1.PodFailed)[0]
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name           string
		recovered      time.Time
		wantDeletes    bool
		wantRestarts   int32
		wantMessageHas string
	}{
		{"back from restart 1 a second ago: waits", now.Add(-time.Second), false, 1, "restarting in 9s"},
		{"back from restart 1 a minute ago: restarts", now.Add(-time.Minute), true, 2, "restart 2 of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := job.DeepCopy()
			job.Status = div2.DIJobStatus{Phase: div2.JobRunning, Restarts: 1, Conditions: []div2.JobCondition{
				{Type: div2.ConditionType(div2.JobRestarting), Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(tc.recovered)},
				{Type: div2.ConditionType(div2.JobRunning), Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(tc.recovered)},
			}}
			f := newFixture(t, job, pods...)
			_, deleted := f.sync(t, job)
			st := f.status(t, job)
			if tc.wantDeletes {
				// Counted first, then the pods go.
				job.Status = st
				f = newFixture(t, job, marked(pods, 1, strconv.Itoa(int(tc.wantRestarts)))...)
				_, deleted = f.sync(t, job)
				st = f.status(t, job)
			}
			if (len(deleted) > 0) != tc.wantDeletes || st.Restarts != tc.wantRestarts {
				t.Fatalf("deleted %v restarts %d, want deletes %v and %d restarts", deleted, st.Restarts, tc.wantDeletes, tc.wantRestarts)
			}
			if msg := conditionMessage(&st, div2.JobRestarting); !strings.Contains(msg, tc.wantMessageHas) {
				t.Errorf("Restarting says %q, want %q in it", msg, tc.wantMessageHas)
			}
		})
	}
	if d := restartDelay(20); d != restartBackoffMax {
		t.Errorf("the delay after 20 restarts is %v, want the cap %v", d, restartBackoffMax)
	}
}

// With a token audience and a CA for the replicas API, every container of
// every pod finds a token for that audience, bound to its pod, and the CA,
// in files the environment names; a template volume of the same name is
// the author's and is left alone.
func TestPodsCarryTheReplicasAPIsTokenAndCA(t *testing.T) {
	job := exampleJob(t)
	f := newFixture(t, job)
	f.c.config.ServerURL = "https://nereid-di-server.nereid-system.svc:8081"
	f.c.config.ServerTokenAudience = "nereid-di-server"
	f.c.config.ServerCA = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	created, _ := f.sync(t, job)
	if len(created) == 0 {
		t.Fatal("no pods made")
	}
	for _, p := range created {
		if p.Annotations[AnnotationServerCA] != string(f.c.config.ServerCA) {
			t.Errorf("%s: annotation %s = %q, want the CA", p.Name, AnnotationServerCA, p.Annotations[AnnotationServerCA])
		}
		i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == serverVolume })
		if i < 0 || p.Spec.Volumes[i].Projected == nil || len(p.Spec.Volumes[i].Projected.Sources) != 2 {
			t.Fatalf("%s: volumes %+v, want a projected %s of a token and the CA", p.Name, p.Spec.Volumes, serverVolume)
		}
		token, ca := p.Spec.Volumes[i].Projected.Sources[0].ServiceAccountToken, p.Spec.Volumes[i].Projected.Sources[1].DownwardAPI
		if token == nil || token.Audience != "nereid-di-server" || token.Path != "token" || token.ExpirationSeconds == nil || *token.ExpirationSeconds != ServerTokenLifetime {
			t.Errorf("%s: token projection %+v, want audience nereid-di-server at token, %d s", p.Name, token, ServerTokenLifetime)
		}
		if ca == nil || ca.Items[0].Path != "ca.crt" || ca.Items[0].FieldRef.FieldPath != "metadata.annotations['"+AnnotationServerCA+"']" {
			t.Errorf("%s: CA projection %+v, want the annotation at ca.crt", p.Name, ca)
		}
		for _, c := range p.Spec.Containers {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == serverVolume && m.MountPath == ServerCredentialsDir && m.ReadOnly
			}) {
				t.Errorf("%s/%s: mounts %+v, want %s read-only at %s", p.Name, c.Name, c.VolumeMounts, serverVolume, ServerCredentialsDir)
			}
		}
		if got := env(p, "DI_SERVER_TOKEN_FILE"); got != ServerCredentialsDir+"/token" {
			t.Errorf("%s: DI_SERVER_TOKEN_FILE = %q", p.Name, got)
		}
		if got := env(p, "DI_SERVER_CA_FILE"); got != ServerCredentialsDir+"/ca.crt" {
			t.Errorf("%s: DI_SERVER_CA_FILE = %q", p.Name, got)
		}
	}

	// A template volume of that name is the author's.
	job = exampleJob(t)
	job.Spec.Tasks[0].Template.Spec.Volumes = append(job.Spec.Tasks[0].Template.Spec.Volumes,
		corev1.Volume{Name: serverVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	f = newFixture(t, job)
	f.c.config = Config{ServerURL: "https://x:8081", ServerTokenAudience: "nereid-di-server"}
	created, _ = f.sync(t, job)
	if i := slices.IndexFunc(created[0].Spec.Volumes, func(v corev1.Volume) bool { return v.Name == serverVolume }); i < 0 || created[0].Spec.Volumes[i].EmptyDir == nil {
		t.Errorf("%s: the template's own %s volume was replaced: %+v", created[0].Name, serverVolume, created[0].Spec.Volumes)
	}
}

// A move of a preemptible job is counted before its pods go, as a restart
// is: the move's number is marked on a pod, written to status, and only
// then is every pod deleted; a lost status write neither loses the move nor
// counts it twice, and a mark found after a restart of the GlobalManager is
// carried out.
func TestAMoveIsCountedBeforeItsPodsGo(t *testing.T) {
	job := exampleJob(t)
	job.Spec.Preemptible = true
	made, _ := newFixture(t, job).sync(t, job)
	running := withPhase(made, corev1.PodRunning)
	f := newFixture(t, job, running...)
	f.sync(t, job)
	job.Status = f.status(t, job)

	// The move chosen: one pod is marked, the count goes to status, nothing
	// is deleted.
	f = newFixture(t, job, running...)
	status := job.Status.DeepCopy()
	if _, err := f.c.move(t.Context(), ns+"/"+job.Name, job, status, running, 0, false, true, metav1.Now()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.kube.Actions()); n != 1 {
		t.Errorf("%d API calls, want the one mark: %v", n, f.kube.Actions())
	}
	got, err := f.kube.CoreV1().Pods(ns).Get(t.Context(), "cartpole-dqn-collector-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[AnnotationMove] != "1" || status.Reschedules != 1 || status.Phase != div2.JobRescheduling {
		t.Fatalf("after the move was chosen: mark %q, reschedules %d, phase %s; want 1, 1, Rescheduling",
			got.Annotations[AnnotationMove], status.Reschedules, status.Phase)
	}

	markedPods := append([]*corev1.Pod(nil), running...)
	markedPods[1] = got // collector-0, rank 1
	// A sync whose status write was lost (or a GlobalManager that started
	// again) finds the mark and counts it, once, deleting nothing.
	f = newFixture(t, job, markedPods...)
	if _, deleted := f.sync(t, job); len(deleted) != 0 || f.status(t, job).Reschedules != 1 {
		t.Fatalf("with the mark, the count not written: deleted %v, reschedules %d; want nothing and 1", deleted, f.status(t, job).Reschedules)
	}
	// The count written: every pod goes, and the count stays.
	job.Status.Reschedules = 1
	f = newFixture(t, job, markedPods...)
	_, deleted := f.sync(t, job)
	if want := []string{"cartpole-dqn-collector-0", "cartpole-dqn-collector-1", "cartpole-dqn-evaluator-0", "cartpole-dqn-learner-0"}; !slices.Equal(deleted, want) {
		t.Fatalf("after the count was written deleted %v, want every pod %v", deleted, want)
	}
	if st := f.status(t, job); st.Reschedules != 1 || st.Phase != div2.JobRescheduling {
		t.Errorf("status reschedules %d phase %s, want 1 Rescheduling", st.Reschedules, st.Phase)
	}
}

// The mark of a move or restart is awaited in the cache: a sync that reads
// the pods before their mark (the watch behind the patch) neither takes the
// job back to Running in the middle of a move, nor counts a restart twice
// and fails the job on a count that already holds it.
func TestAMarkNotYetInTheCacheDecidesNothingAgain(t *testing.T) {
	job := exampleJob(t)
	job.Spec.Preemptible = true
	made, _ := newFixture(t, job).sync(t, job)
	running := withPhase(made, corev1.PodRunning)
	key := ns + "/" + job.Name

	// The move is marked and counted (status Rescheduling, reschedules 1);
	// the cache still has the pods without the mark.
	moving := job.DeepCopy()
	moving.Status.Reschedules = 1
	moving.Status.Phase = div2.JobRescheduling
	f := newFixture(t, moving, running...)
	if err := f.c.mark(t.Context(), key, running[1], AnnotationMove, 1); err != nil {
		t.Fatal(err)
	}
	if _, deleted := f.sync(t, moving); len(deleted) != 0 {
		t.Fatalf("deleted %v before the mark was seen", deleted)
	}
	if st := f.status(t, moving); st.Phase != div2.JobRescheduling || st.Reschedules != 1 {
		t.Fatalf("with the mark not yet seen: phase %s reschedules %d, want Rescheduling 1 (the old pods are not the new placement)", st.Phase, st.Reschedules)
	}
	// The mark seen: every pod goes.
	got, err := f.kube.CoreV1().Pods(ns).Get(t.Context(), running[1].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.c.children.Expectations.MarkObserved(key, got)
	if err := f.c.syncer.Pods.Update(got); err != nil {
		t.Fatal(err)
	}
	if _, deleted := f.sync(t, moving); len(deleted) != len(running) {
		t.Fatalf("with the mark seen deleted %v, want every pod", deleted)
	}

	// A restart marked and counted up to the backoff limit (1), the cache
	// without the mark: the job waits, it does not fail.
	restarting := exampleJob(t)
	restarting.Spec.BackoffLimit = ptr.To[int32](1)
	restarting.Status.Restarts = 1
	restarting.Status.Phase = div2.JobRestarting
	failed := append([]*corev1.Pod(nil), running...)
	failed[1] = withPhase(made[1:2], corev1.PodFailed)[0]
	f = newFixture(t, restarting, failed...)
	if err := f.c.mark(t.Context(), key, failed[1], AnnotationRestart, 1); err != nil {
		t.Fatal(err)
	}
	if _, deleted := f.sync(t, restarting); len(deleted) != 0 {
		t.Fatalf("deleted %v before the restart's mark was seen", deleted)
	}
	if st := f.status(t, restarting); st.Phase != div2.JobRestarting || st.Restarts != 1 {
		t.Fatalf("with the restart's mark not yet seen: phase %s restarts %d, want Restarting 1", st.Phase, st.Restarts)
	}
}

// TestADIJobSaysWhichEdgeLinksAreDownAndWhenTheyReturn: a running job whose
// pod is on an edge node whose link is down says so in its EdgeLinked
// condition, in the words Sedna's kinds use, with a Warning; its phase
// stays Running. Back, the condition is True and a Normal event says so.
func TestADIJobSaysWhichEdgeLinksAreDownAndWhenTheyReturn(t *testing.T) {
	if links.ConditionEdgeLinked != string(div2.ConditionEdgeLinked) {
		t.Fatalf("DIJob's EdgeLinked %q is not the hub's %q", div2.ConditionEdgeLinked, links.ConditionEdgeLinked)
	}
	job := exampleJob(t)
	made, _ := newFixture(t, job).sync(t, job)
	pods := withPhase(made, corev1.PodRunning)
	down := time.Unix(900, 0)

	f := newFixture(t, job, pods...)
	recorder := f.c.syncer.Recorder.(*record.FakeRecorder)
	f.c.config.Links = downLinks{"node-collector": down}
	f.sync(t, job)
	st := f.status(t, job)
	want := wantLinkDown(t, st, "node-collector", down)
	if st.Phase != div2.JobRunning {
		t.Errorf("phase %s with a link down, want Running", st.Phase)
	}
	if ev := drain(recorder); !slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, "Warning LinkDown "+want) }) {
		t.Errorf("events %q, want a Warning LinkDown naming the node", ev)
	}

	job.Status = st
	f = newFixture(t, job, pods...)
	recorder = f.c.syncer.Recorder.(*record.FakeRecorder)
	f.c.config.Links = downLinks{}
	f.sync(t, job)
	if c := findCondition(f.status(t, job), div2.ConditionEdgeLinked); c == nil || c.Status != corev1.ConditionTrue || c.Reason != links.ReasonLinked {
		t.Errorf("EdgeLinked %+v once the link is back, want True %s", c, links.ReasonLinked)
	}
	if ev := drain(recorder); !slices.ContainsFunc(ev, func(e string) bool { return strings.HasPrefix(e, "Normal Linked") }) {
		t.Errorf("events %q, want a Normal Linked", ev)
	}

	// A job that never missed a link has no such condition.
	f = newFixture(t, exampleJob(t), pods...)
	f.c.config.Links = downLinks{}
	f.sync(t, job)
	if c := findCondition(f.status(t, exampleJob(t)), div2.ConditionEdgeLinked); c != nil {
		t.Errorf("a job always linked has EdgeLinked %+v, want none", c)
	}
}

// wantLinkDown fails t unless st's EdgeLinked condition is False, LinkDown,
// saying node's link is down since down, and returns its message.
func wantLinkDown(t *testing.T, st div2.DIJobStatus, node string, down time.Time) string {
	t.Helper()
	want := "the link of edge node " + node + " is down since " + down.UTC().Format(time.RFC3339)
	if c := findCondition(st, div2.ConditionEdgeLinked); c == nil || c.Status != corev1.ConditionFalse || c.Reason != links.ReasonLinkDown || c.Message != want {
		t.Fatalf("EdgeLinked %+v, want False %s %q", c, links.ReasonLinkDown, want)
	}
	return want
}

func findCondition(st div2.DIJobStatus, typ div2.ConditionType) *div2.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == typ {
			return &st.Conditions[i]
		}
	}
	return nil
}

// drain is what the recorder recorded so far.
func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
