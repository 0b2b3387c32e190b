package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/pkg/globalmanager/gang"
	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
	"github.com/nereid-ml/nereid/test/framework"
)

// bindings records, from a watch opened before any job exists, every pod of
// a namespace that got a node and every pod that stopped holding one, in
// the order the API server reports them: a partial placement cannot hide
// between two samples.
type bindings struct {
	mu     sync.Mutex
	events []binding
	bound  map[types.UID]bool
	err    error
}

type binding struct {
	pod   string
	owner types.UID // the job's, from the owner-uid label
	bound bool      // got a node; false: stopped holding it (finished or deleted)
}

func watchBindings(t *testing.T, ns string) *bindings {
	t.Helper()
	w, err := framework.KubeClient(t).CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := &bindings{bound: map[types.UID]bool{}}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				if ev.Type == watch.Error {
					b.mu.Lock()
					b.err = fmt.Errorf("the pod watch failed: %v", ev.Object)
					b.mu.Unlock()
				}
				continue
			}
			holds := pod.Spec.NodeName != "" && ev.Type != watch.Deleted && !common.PodFinished(pod)
			b.mu.Lock()
			if holds != b.bound[pod.UID] {
				b.bound[pod.UID] = holds
				b.events = append(b.events, binding{pod: pod.Name, owner: types.UID(pod.Labels[common.LabelOwnerUID]), bound: holds})
			}
			b.mu.Unlock()
		}
	}()
	return b
}

// history is what was recorded so far.
func (b *bindings) history(t *testing.T) []binding {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		t.Fatal(b.err)
	}
	return append([]binding(nil), b.events...)
}

// holding is how many pods of owner hold a node after the first n events.
func holding(events []binding, owner types.UID, n int) int {
	held := 0
	for _, e := range events[:n] {
		if e.owner != owner {
			continue
		}
		if e.bound {
			held++
		} else {
			held--
		}
	}
	return held
}

// checkNeverPartial fails when owner ever held a node with some, but not
// all, of its size pods bound before the next pod of another job moved: a
// gang's binds come one after another, so between two of them the job is
// partly bound, but nothing of another job may happen in between.
func checkNeverPartial(t *testing.T, events []binding, owner types.UID, size int, name string) {
	t.Helper()
	for i := range events {
		held := holding(events, owner, i+1)
		if held == 0 || held >= size {
			continue
		}
		// Partly bound: the next event must be this job's.
		if i+1 < len(events) && events[i+1].owner != owner {
			t.Errorf("job %s had %d of %d pods on nodes when pod %s of another job moved (event %d of %v)", name, held, size, events[i+1].pod, i+1, events)
			return
		}
	}
}

// gangPool adds tainted kwok nodes of 4 cpu (labelled like edge nodes when
// edge), used by one test only, and returns how its pods reach them.
func gangPool(t *testing.T, pool string, edge bool, names ...string) []corev1.Toleration {
	t.Helper()
	extra := map[string]string{}
	if edge {
		extra["node-role.kubernetes.io/edge"] = ""
	}
	_, tolerations := allocPool(t, pool, extra, names...)
	return tolerations
}

// cpuTemplate is a worker template pinned to node by spec.nodeName, as
// Sedna's users write it, requesting cpu.
func cpuTemplate(node, cpu string, tolerations []corev1.Toleration) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		NodeName: node, Tolerations: tolerations,
		Containers: []corev1.Container{{Name: "worker", Image: "worker:v1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}},
	}}
}

// pinnedFLJob is a federated learning job whose aggregator runs on
// aggNode and whose training workers run on trainNodes, each pod asking for cpu.
func pinnedFLJob(name, cpu string, tolerations []corev1.Toleration, aggNode string, trainNodes ...string) *sednav1.FederatedLearningJob {
	job := &sednav1.FederatedLearningJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: sednav1.FederatedLearningJobSpec{
			AggregationWorker: sednav1.AggregationWorker{Model: sednav1.ModelRef{Name: "surface-defect-detection-model"}, Template: cpuTemplate(aggNode, cpu, tolerations)},
		},
	}
	for i, node := range trainNodes {
		job.Spec.TrainingWorkers = append(job.Spec.TrainingWorkers, sednav1.TrainingWorker{
			Dataset:  sednav1.DatasetRef{Name: fmt.Sprintf("edge%d-surface-defect-detection-dataset", i%2)},
			Template: cpuTemplate(node, cpu, tolerations),
		})
	}
	return job
}

// flScheduled waits for the job's Scheduled condition to have status and
// reason (and, while waiting, to say what the scheduler says), and returns
// its message.
func flScheduled(t *testing.T, ns, name string, status corev1.ConditionStatus, reason string) string {
	t.Helper()
	return flCondition(t, ns, name, gang.ConditionScheduled, status, reason, func(msg string) bool {
		return reason != gang.ReasonWaitingForGang || strings.Contains(msg, "the scheduler says")
	})
}

// flCondition waits for the job's condition of condType to have status and
// reason and a message that says holds of, and returns the message.
func flCondition(t *testing.T, ns, name, condType string, status corev1.ConditionStatus, reason string, says func(msg string) bool) string {
	t.Helper()
	return waitCondition(t, framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Get, name, condType, status, reason, says)
}

// conditioned is a sedna.io job or service: its conditions are JobConditions.
type conditioned interface {
	ConditionList() *[]sednav1.JobCondition
}

// waitCondition waits a minute for the condition of condType of the
// object get reads by name to have status and reason and a message that
// says holds of, and returns the message.
func waitCondition[T conditioned](t *testing.T, get func(context.Context, string, metav1.GetOptions) (T, error), name, condType string,
	status corev1.ConditionStatus, reason string, says func(msg string) bool) string {
	t.Helper()
	return sednaCondition(t, 60*time.Second, name, conditionsOf(get, name), condType, status, reason, says)
}

// conditionsOf reads the conditions of the object get reads by name, for
// sednaCondition.
func conditionsOf[T conditioned](get func(context.Context, string, metav1.GetOptions) (T, error), name string) func(ctx context.Context) ([]sednav1.JobCondition, error) {
	return func(ctx context.Context) ([]sednav1.JobCondition, error) {
		obj, err := get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return *obj.ConditionList(), nil
	}
}

// sednaCondition waits up to timeout for the condition of condType of a
// Sedna object (what names it), as conds reads its conditions, to have
// status and reason and a message that says holds of, and returns the
// message.
func sednaCondition(t *testing.T, timeout time.Duration, what string, conds func(ctx context.Context) ([]sednav1.JobCondition, error),
	condType string, status corev1.ConditionStatus, reason string, says func(msg string) bool) string {
	t.Helper()
	var msg string
	framework.Eventually(t, timeout, fmt.Sprintf("%s %s=%s %s", what, condType, status, reason), func(ctx context.Context) (bool, error) {
		all, err := conds(ctx)
		if err != nil {
			return false, err
		}
		c := common.FindJobCondition(all, condType)
		if c == nil {
			return false, nil
		}
		msg = c.Message
		return c.Status == status && c.Reason == reason && says(msg), nil
	})
	return msg
}

// finishFLJob plays the aggregator's end: Succeeded, so the job is, and
// its other workers are cleaned up.
func finishFLJob(t *testing.T, ns string, job *sednav1.FederatedLearningJob) {
	t.Helper()
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Labels[common.LabelWorkerRole] == "aggregation" {
			setPodPhase(t, ns, p.Name, corev1.PodSucceeded, "")
		}
	}
	waitForPhase(t, ns, job.Name, sednav1.FLJobSucceeded)
}

// allBound waits until every one of the job's n live pods is on a node.
func allBound(t *testing.T, ns string, job metav1.Object, n int) map[string]*corev1.Pod {
	t.Helper()
	var pods map[string]*corev1.Pod
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("all %d pods of %s on nodes", n, job.GetName()), func(ctx context.Context) (bool, error) {
		var err error
		pods, err = livePods(ctx, t, ns, job)
		if err != nil || len(pods) != n {
			return false, err
		}
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	return pods
}

// TestFederatedLearningGangsNeverHalfPlace: two jobs pinned to the same two
// nodes, each needing 6 of their 8 cpu. The first runs whole; the second
// has no pod bound (although one of its trainers would fit on its own) and
// says why; when the first finishes, the second starts whole. Templates
// name their nodes (spec.nodeName): the pods carry that as a required node
// affinity instead, so the scheduler, and the gang, decide.
func TestFederatedLearningGangsNeverHalfPlace(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	pool := "gang-" + ns[len(ns)-5:]
	n1, n2 := pool+"-1", pool+"-2"
	tolerations := gangPool(t, pool, false, n1, n2)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	seen := watchBindings(t, ns)
	framework.StartGlobalManager(t, ns)
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)

	a, err := jobs.Create(t.Context(), pinnedFLJob("a", "2", tolerations, n1, n1, n2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podsA := allBound(t, ns, a, 3)
	flScheduled(t, ns, "a", corev1.ConditionTrue, gang.ReasonGangScheduled)
	for _, p := range podsA {
		if p.Spec.NodeName != p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] {
			t.Errorf("pod %s on %s, not on the node its template names", p.Name, p.Spec.NodeName)
		}
		if p.Spec.SchedulingGroup == nil || *p.Spec.SchedulingGroup.PodGroupName != gang.GroupName(a, sednav1.FederatedLearningJobKind) {
			t.Errorf("pod %s has schedulingGroup %v, want its job's PodGroup", p.Name, p.Spec.SchedulingGroup)
		}
	}
	pg, err := framework.KubeClient(t).SchedulingV1beta1().PodGroups(ns).Get(t.Context(), gang.GroupName(a, sednav1.FederatedLearningJobKind), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pg.Spec.SchedulingPolicy.Gang.MinCount; got != 3 {
		t.Errorf("PodGroup minCount %d, want 3 (the aggregator and both trainers)", got)
	}

	b, err := jobs.Create(t.Context(), pinnedFLJob("b", "2", tolerations, n1, n1, n2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := flScheduled(t, ns, "b", corev1.ConditionFalse, gang.ReasonWaitingForGang)
	t.Logf("job b waits: %s", msg)
	if !strings.Contains(msg, "0 of 3 pods are placed") {
		t.Errorf("waiting job's Scheduled message %q: want how many are placed and what the scheduler says", msg)
	}
	// The condition is written before the event: wait for the events.
	waitForEventsRecordedSoFar(t, ns)
	if n := framework.CountEvents(t, ns, b.UID, gang.ReasonWaitingForGang, "b"); n != 1 {
		t.Errorf("%d WaitingForGang events for job b, want 1", n)
	}
	// Every gang waits when it is made: a normal event, not a warning. (Its
	// trainers are pinned away from their Datasets' nodes on purpose, which
	// is warned of: NodeDiffersFromDataset.)
	if n := countEventsOfType(t, ns, b.UID, corev1.EventTypeWarning) - framework.CountEvents(t, ns, b.UID, "NodeDiffersFromDataset", ""); n != 0 {
		t.Errorf("%d warning events for job b, which only waits for its gang; want none", n)
	}
	if pods, err := livePods(t.Context(), t, ns, b); err != nil || len(pods) != 3 {
		t.Fatalf("job b has pods %v (%v), want its 3 made and waiting", podUIDs(pods), err)
	}

	finishFLJob(t, ns, a)
	allBound(t, ns, b, 3)
	flScheduled(t, ns, "b", corev1.ConditionTrue, gang.ReasonGangScheduled)
	events := seen.history(t)
	checkNeverPartial(t, events, a.UID, 3, "a")
	checkNeverPartial(t, events, b.UID, 3, "b")
	// b's first pod took a node only after a's trainers let theirs go.
	for i, e := range events {
		if e.owner == b.UID && e.bound {
			if held := holding(events, a.UID, i); held > 1 {
				t.Errorf("job b's pod %s was bound while job a still held %d nodes' worth: %v", e.pod, held, events)
			}
			break
		}
	}
}

// scheduledMessages records, from a watch opened before the job exists,
// every message the Scheduled condition of the federated learning job name
// has had, in order: a message that stood for a moment cannot hide between
// two samples.
type scheduledMessages struct {
	mu   sync.Mutex
	seen []string
}

func watchScheduledMessages(t *testing.T, ns, name string) *scheduledMessages {
	t.Helper()
	w, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	m := &scheduledMessages{}
	go func() {
		for ev := range w.ResultChan() {
			job, ok := ev.Object.(*sednav1.FederatedLearningJob)
			if !ok {
				continue
			}
			if c := common.FindJobCondition(job.Status.Conditions, gang.ConditionScheduled); c != nil {
				m.mu.Lock()
				if len(m.seen) == 0 || m.seen[len(m.seen)-1] != c.Message {
					m.seen = append(m.seen, c.Message)
				}
				m.mu.Unlock()
			}
		}
	}()
	return m
}

func (m *scheduledMessages) all() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

var (
	needsPlaced   = regexp.MustCompile(`needs (\d+) placed together`)
	quotesMinimum = regexp.MustCompile(`minCount \((\d+)\)`)
)

// TestFederatedLearningGangNeverQuotesTheMinimumBeforeATrainerWasRemoved:
// a job of an aggregator and two trainers waits for its gang (one trainer's
// node is full), and its condition quotes the scheduler's minCount (3).
// When a trainer is removed the gang needs 2; the scheduler's last message
// still says minCount (3) until it tries again, and the condition never
// quotes it: it says the scheduler has not yet tried the gang as it is now,
// then what the scheduler says of the gang of 2.
func TestFederatedLearningGangNeverQuotesTheMinimumBeforeATrainerWasRemoved(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	pool := "sgang-" + ns[len(ns)-5:]
	free, full := pool+"-1", pool+"-2"
	tolerations := gangPool(t, pool, false, free, full)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	filler := cpuTemplate(full, "4", tolerations)
	if _, err := framework.KubeClient(t).CoreV1().Pods(ns).Create(t.Context(),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "filler", Namespace: ns}, Spec: filler.Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	messages := watchScheduledMessages(t, ns, "fl")
	framework.StartGlobalManager(t, ns)
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	job, err := jobs.Create(t.Context(), pinnedFLJob("fl", "1", tolerations, free, full, free), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	flCondition(t, ns, "fl", gang.ConditionScheduled, corev1.ConditionFalse, gang.ReasonWaitingForGang, func(msg string) bool {
		return strings.Contains(msg, "the scheduler says: minCount (3)")
	})

	framework.Edit(t, jobs.Get, jobs.Update, "fl", func(job *sednav1.FederatedLearningJob) {
		job.Spec.TrainingWorkers = job.Spec.TrainingWorkers[:1]
	})
	framework.Eventually(t, 30*time.Second, "PodGroup minCount 2", func(ctx context.Context) (bool, error) {
		pg, err := framework.KubeClient(t).SchedulingV1beta1().PodGroups(ns).Get(ctx, gang.GroupName(job, sednav1.FederatedLearningJobKind), metav1.GetOptions{})
		return err == nil && pg.Spec.SchedulingPolicy.Gang.MinCount == 2, err
	})
	// The scheduler tries the gang again after its backoff.
	sednaCondition(t, 2*time.Minute, "fl", conditionsOf(jobs.Get, "fl"), gang.ConditionScheduled, corev1.ConditionFalse, gang.ReasonWaitingForGang, func(msg string) bool {
		return strings.Contains(msg, "minCount (2)")
	})
	seen := messages.all()
	for _, msg := range seen {
		needs, quotes := needsPlaced.FindStringSubmatch(msg), quotesMinimum.FindStringSubmatch(msg)
		if needs != nil && quotes != nil && needs[1] != quotes[1] {
			t.Errorf("the Scheduled condition said %q: the gang needs %s, the scheduler's message names minCount %s", msg, needs[1], quotes[1])
		}
	}
	t.Logf("the Scheduled condition said, in order: %q", seen)
}

// diScheduled waits for the DIJob's Scheduled condition to have status
// and reason.
func diScheduled(t *testing.T, ns, name string, status corev1.ConditionStatus, reason string) {
	t.Helper()
	waitForDIJob(t, ns, name, fmt.Sprintf("Scheduled=%s %s", status, reason), func(j *div2.DIJob) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == div2.ConditionScheduled {
				return c.Status == status && c.Reason == reason
			}
		}
		return false
	})
}

// unbound are the names of the job's live pods without a node.
func unbound(t *testing.T, ns string, job metav1.Object) []string {
	t.Helper()
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for name, p := range pods {
		if p.Spec.NodeName == "" {
			out = append(out, name)
		}
	}
	return out
}

// TestDIJobGangsWaitWholeAndScaleTogether: two DIJobs of 6 cpu on 8; the
// second waits with no pod bound, runs whole when the first succeeds;
// scaled past what fits, its two new collectors wait together (neither
// takes the 2 cpu that are free); scaled back to one more, it fits.
// The allocator is off: the gang, not Nereid, decides.
func TestDIJobGangsWaitWholeAndScaleTogether(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	pool := "dgang-" + ns[len(ns)-5:]
	selector, tolerations := allocPool(t, pool, nil, pool+"-1", pool+"-2")
	seen := watchBindings(t, ns)
	framework.StartGlobalManager(t, ns, "--allocator=none")
	jobs := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns)
	newJob := func(name string) *div2.DIJob {
		collectors := poolTask(div2.TaskTypeCollector, "", "2", selector, tolerations)
		collectors.Replicas = 2
		return &div2.DIJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: div2.DIJobSpec{Tasks: []div2.Task{
			poolTask(div2.TaskTypeLearner, "", "2", selector, tolerations), collectors}}}
	}
	a, err := jobs.Create(t.Context(), newJob("a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allBound(t, ns, a, 3)
	diScheduled(t, ns, "a", corev1.ConditionTrue, gang.ReasonGangScheduled)
	b, err := jobs.Create(t.Context(), newJob("b"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	diScheduled(t, ns, "b", corev1.ConditionFalse, gang.ReasonWaitingForGang)
	if left := unbound(t, ns, b); len(left) != 3 {
		t.Fatalf("job b has unbound pods %v, want all 3 waiting", left)
	}
	setPodPhase(t, ns, "a-learner-0", corev1.PodSucceeded, "")
	waitForDIJob(t, ns, "a", "Succeeded", diPhaseIs(div2.JobSucceeded))
	allBound(t, ns, b, 3)
	diScheduled(t, ns, "b", corev1.ConditionTrue, gang.ReasonGangScheduled)

	// 6 of 8 cpu used by b; two more collectors need 4.
	scale := func(replicas int32) {
		t.Helper()
		framework.Edit(t, jobs.Get, jobs.Update, "b", func(job *div2.DIJob) { job.Spec.Tasks[1].Replicas = replicas })
	}
	scale(4)
	diScheduled(t, ns, "b", corev1.ConditionFalse, gang.ReasonWaitingForGang)
	framework.Eventually(t, 30*time.Second, "PodGroup minCount 5", func(ctx context.Context) (bool, error) {
		pg, err := framework.KubeClient(t).SchedulingV1beta1().PodGroups(ns).Get(ctx, gang.GroupName(b, div2.DIJobKind), metav1.GetOptions{})
		return err == nil && pg.Spec.SchedulingPolicy.Gang.MinCount == 5, err
	})
	if left := unbound(t, ns, b); len(left) != 2 {
		t.Fatalf("after scaling to 4 collectors, unbound pods %v: want the two new ones waiting together", left)
	}
	scale(3)
	allBound(t, ns, b, 4)
	diScheduled(t, ns, "b", corev1.ConditionTrue, gang.ReasonGangScheduled)
	events := seen.history(t)
	checkNeverPartial(t, events, a.UID, 3, "a")
	for _, e := range events {
		if e.owner == b.UID && (e.pod == "b-collector-3") && e.bound {
			t.Errorf("collector 3 of b was bound though its gang never fit: %v", events)
		}
	}
}

// TestGangOnEdgeNodesWaitsWholeWhileOneEdgeNodeIsFull: a federated job
// with trainers pinned to two edge nodes, one of them full: no pod of it is
// placed, not even the aggregator in the cloud; when the full node frees,
// the whole job is placed.
//
// Not parallel: its pool nodes are edge nodes, where every test's
// LocalController DaemonSet would put a pod.
func TestGangOnEdgeNodesWaitsWholeWhileOneEdgeNodeIsFull(t *testing.T) {
	ns := framework.Namespace(t)
	pool := "egang-" + ns[len(ns)-5:]
	cloud, e1, e2 := pool+"-c", pool+"-e1", pool+"-e2"
	tolerations := gangPool(t, pool, false, cloud)
	gangPool(t, pool, true, e1, e2)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	kube := framework.KubeClient(t)
	// Something else fills e2 (bound by name, as kubelets are given pods).
	filler := cpuTemplate(e2, "4", tolerations)
	fill := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "filler", Namespace: ns}, Spec: filler.Spec}
	if _, err := kube.CoreV1().Pods(ns).Create(t.Context(), fill, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := watchBindings(t, ns)
	framework.StartGlobalManager(t, ns)
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Create(t.Context(),
		pinnedFLJob("edge", "2", tolerations, cloud, e1, e2), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	msg := flScheduled(t, ns, "edge", corev1.ConditionFalse, gang.ReasonWaitingForGang)
	t.Logf("while e2 is full: %s", msg)
	if left := unbound(t, ns, job); len(left) != 3 {
		t.Fatalf("unbound pods %v while an edge node is full: want all 3 waiting", left)
	}
	framework.DeletePodByHand(t, ns, "filler")
	pods := allBound(t, ns, job, 3)
	flScheduled(t, ns, "edge", corev1.ConditionTrue, gang.ReasonGangScheduled)
	for _, p := range pods {
		if p.Labels[common.LabelWorkerRole] == "training" && p.Spec.NodeName != e1 && p.Spec.NodeName != e2 {
			t.Errorf("trainer %s on %s, want an edge node its template names", p.Name, p.Spec.NodeName)
		}
	}
	checkNeverPartial(t, seen.history(t), job.UID, 3, "edge")
}

// TestGangSchedulingNoneRunsJobsAsBefore: with --gang-scheduler=none a
// job's pods are made as before (a template's nodeName kept, no group
// objects), and its Scheduled condition says why, once.
func TestGangSchedulingNoneRunsJobsAsBefore(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	framework.StartGlobalManager(t, ns, "--gang-scheduler=none")
	job, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Create(t.Context(),
		pinnedFLJob("plain", "1", nil, "cloud-0", "edge-0", "edge-1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForPhase(t, ns, "plain", sednav1.FLJobRunning)
	msg := flScheduled(t, ns, "plain", corev1.ConditionTrue, gang.ReasonGangSchedulingOff)
	if !strings.Contains(msg, "--gang-scheduler=none") {
		t.Errorf("Scheduled message %q does not name the flag", msg)
	}
	pods, err := livePods(t.Context(), t, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.SchedulingGroup != nil || p.Spec.Affinity != nil {
			t.Errorf("pod %s has schedulingGroup %v / affinity %v, want neither", p.Name, p.Spec.SchedulingGroup, p.Spec.Affinity)
		}
	}
	if _, err := framework.KubeClient(t).SchedulingV1beta1().PodGroups(ns).Get(t.Context(), gang.GroupName(job, sednav1.FederatedLearningJobKind), metav1.GetOptions{}); err == nil {
		t.Errorf("a PodGroup exists for a job with gang scheduling off")
	}
}

// installGangCRDs installs Volcano's and coscheduling's PodGroup CRDs (as
// those projects document them) for the test, and removes them after it.
func installGangCRDs(t *testing.T) {
	t.Helper()
	if out, err := framework.Kubectl(t, "apply", "-f", "testdata/gang-podgroup-crds.yaml"); err != nil {
		t.Fatalf("installing the PodGroup CRDs: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = framework.Kubectl(t, "delete", "--wait=false", "-f", "testdata/gang-podgroup-crds.yaml")
	})
	if out, err := framework.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "-f", "testdata/gang-podgroup-crds.yaml"); err != nil {
		t.Fatalf("waiting for the PodGroup CRDs: %v\n%s", err, out)
	}
}

// podGroupSpec waits until the job's PodGroup of gvr has spec want (the
// fields Nereid sets) and a controller reference to owner, and returns it.
func podGroupSpec(t *testing.T, ns string, gvr schema.GroupVersionResource, owner metav1.Object, name string, want map[string]any) {
	t.Helper()
	client := dynamicClient(t).Resource(gvr).Namespace(ns)
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("%s %s with spec %v", gvr.GroupResource(), name, want), func(ctx context.Context) (bool, error) {
		pg, err := client.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
		ref := metav1.GetControllerOf(pg)
		return ref != nil && ref.UID == owner.GetUID() && equality.Semantic.DeepEqual(pg.Object["spec"], want), nil
	})
}

var (
	volcanoGroups      = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
	coschedulingGroups = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
)

// TestVolcanoCoschedulingAndKueueObjectsFollowTheJob: a federated job
// annotated for Volcano and queued in Kueue, a DIJob annotated for
// coscheduling: their PodGroups and pods carry exactly the documented
// fields, labels and annotations; a respec and a scale keep the PodGroup in
// step; deleting the job takes its PodGroup (owner reference, cascade).
//
// Not parallel: it installs Volcano's and scheduler-plugins' PodGroup
// CRDs, and a GlobalManager started meanwhile would gang through them.
func TestVolcanoCoschedulingAndKueueObjectsFollowTheJob(t *testing.T) {
	installGangCRDs(t)
	ns := framework.Namespace(t)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	framework.StartGlobalManager(t, ns, "--allocator=none")

	fl := pinnedFLJob("vc", "2", nil, "cloud-0", "edge-0", "edge-1")
	fl.Annotations = map[string]string{gang.AnnotationScheduler: "volcano", gang.AnnotationVolcanoQueue: "training"}
	fl.Labels = map[string]string{gang.LabelKueueQueue: "team-a"}
	fl.Spec.AggregationWorker.Template.Spec.PriorityClassName = "system-cluster-critical"
	fl, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Create(t.Context(), fl, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	group := gang.GroupName(fl, sednav1.FederatedLearningJobKind)
	podGroupSpec(t, ns, volcanoGroups, fl, group, map[string]any{
		"minMember": int64(3), "queue": "training", "priorityClassName": "system-cluster-critical",
		"minResources": map[string]any{"cpu": "6"},
	})
	framework.Eventually(t, 60*time.Second, "3 pods of the Volcano job", func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, fl)
		return len(pods) == 3, err
	})
	pods, err := livePods(t.Context(), t, ns, fl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.SchedulerName != "volcano" || p.Annotations["scheduling.k8s.io/group-name"] != group {
			t.Errorf("pod %s: schedulerName %q, group-name annotation %q; want volcano and %s", p.Name, p.Spec.SchedulerName, p.Annotations["scheduling.k8s.io/group-name"], group)
		}
		if p.Labels["kueue.x-k8s.io/queue-name"] != "team-a" || p.Labels["kueue.x-k8s.io/pod-group-name"] != group || p.Annotations["kueue.x-k8s.io/pod-group-total-count"] != "3" {
			t.Errorf("pod %s: Kueue labels %v / annotations %v, want queue team-a, group %s, total 3", p.Name, p.Labels, p.Annotations, group)
		}
		if p.Spec.NodeName != "" || p.Spec.Affinity == nil {
			t.Errorf("pod %s: nodeName %q affinity %v, want the template's node as a required affinity", p.Name, p.Spec.NodeName, p.Spec.Affinity)
		}
	}
	// Respec: trainer 0 asks for 1 cpu; the PodGroup's minResources follow.
	fls := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	framework.Edit(t, fls.Get, fls.Update, "vc", func(job *sednav1.FederatedLearningJob) {
		job.Spec.TrainingWorkers[0].Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
	})
	podGroupSpec(t, ns, volcanoGroups, fl, group, map[string]any{
		"minMember": int64(3), "queue": "training", "priorityClassName": "system-cluster-critical",
		"minResources": map[string]any{"cpu": "5"},
	})

	di := &div2.DIJob{ObjectMeta: metav1.ObjectMeta{Name: "co", Annotations: map[string]string{
		gang.AnnotationScheduler: "coscheduling", gang.AnnotationScheduleTimeout: "90"}}, Spec: div2.DIJobSpec{Tasks: []div2.Task{
		poolTask(div2.TaskTypeLearner, "", "1", nil, nil), poolTask(div2.TaskTypeCollector, "", "1", nil, nil)}}}
	di, err = framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Create(t.Context(), di, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	coGroup := gang.GroupName(di, div2.DIJobKind)
	podGroupSpec(t, ns, coschedulingGroups, di, coGroup, map[string]any{
		"minMember": int64(2), "scheduleTimeoutSeconds": int64(90), "minResources": map[string]any{"cpu": "2"},
	})
	framework.Eventually(t, 60*time.Second, "the DIJob's pods labelled with their PodGroup", func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, di)
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for _, p := range pods {
			if p.Labels["scheduling.x-k8s.io/pod-group"] != coGroup {
				return false, fmt.Errorf("pod %s has labels %v, want scheduling.x-k8s.io/pod-group=%s", p.Name, p.Labels, coGroup)
			}
		}
		return true, nil
	})
	dis := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns)
	framework.Edit(t, dis.Get, dis.Update, "co", func(job *div2.DIJob) { job.Spec.Tasks[1].Replicas = 3 })
	podGroupSpec(t, ns, coschedulingGroups, di, coGroup, map[string]any{
		"minMember": int64(4), "scheduleTimeoutSeconds": int64(90), "minResources": map[string]any{"cpu": "4"},
	})

	// Deleting the jobs takes their PodGroups with them.
	if err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Delete(t.Context(), "vc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns).Delete(t.Context(), "co", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the PodGroups gone with their jobs", func(ctx context.Context) (bool, error) {
		for _, g := range []struct {
			gvr  schema.GroupVersionResource
			name string
		}{{volcanoGroups, group}, {coschedulingGroups, coGroup}} {
			_, err := dynamicClient(t).Resource(g.gvr).Namespace(ns).Get(ctx, g.name, metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestAGangPinnedWhereItCannotGoSaysWhichNodeAndWhy: a job whose aggregator
// is pinned to a node whose taint it does not tolerate, and one whose
// trainer is pinned to a node that does not exist, and one whose pods ask
// for more cpu than their node has at all, do not wait as gangs: each is
// Unschedulable, naming the pod, its node and why, not only how many pods
// are placed, with one Warning (a person must act). A gang whose node is
// only full for now waits (TestGangOnEdgeNodesWaitsWholeWhileOneEdgeNodeIsFull).
func TestAGangPinnedWhereItCannotGoSaysWhichNodeAndWhy(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	pool := "pin-" + ns[len(ns)-5:]
	n1 := pool + "-1"
	tolerations := gangPool(t, pool, false, n1)
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	framework.StartGlobalManager(t, ns)
	jobs := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns)
	uids := map[string]types.UID{}
	for _, j := range []*sednav1.FederatedLearningJob{
		pinnedFLJob("tainted", "100m", nil, n1, n1),
		pinnedFLJob("missing", "100m", tolerations, n1, "no-such-node"),
		pinnedFLJob("big", "5", tolerations, n1, n1),
	} {
		made, err := jobs.Create(t.Context(), j, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[j.Name] = made.UID
	}
	for name, want := range map[string]string{
		"tainted": "is pinned to node " + n1 + ", whose taint nereid.io/test-pool=" + pool + ":NoSchedule it does not tolerate",
		"missing": "is pinned to node no-such-node, which does not exist",
		"big":     "is pinned to node " + n1 + ", which has too little free: cpu: it asks for 5,",
	} {
		msg := flCondition(t, ns, name, gang.ConditionScheduled, corev1.ConditionFalse, placement.ReasonUnschedulable, says(want))
		t.Logf("%s: %s", name, msg)
		framework.Eventually(t, 10*time.Second, "a Warning on job "+name, func(context.Context) (bool, error) {
			return unschedulableWarnings(t, ns, uids[name]) > 0, nil
		})
	}
	// Warned once each, however often the jobs sync while they wait.
	for name, uid := range uids {
		if n := unschedulableWarnings(t, ns, uid); n != 1 {
			t.Errorf("job %s has %d Unschedulable warnings, want 1", name, n)
		}
	}
}
