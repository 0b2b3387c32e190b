package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/admission"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
	"github.com/nereid-ml/nereid/test/framework"
)

// quotaNamespace is a namespace with the federated learning example's Model
// and Datasets, a quota q of cpu CPUs, two nodes of 4 CPUs for its pods
// (reached with the tolerations returned), and the record of every pod
// made in it.
func quotaNamespace(t *testing.T, cpu string) (string, []corev1.Toleration, *podsMade) {
	t.Helper()
	ns := framework.Namespace(t)
	pool := "quota-" + ns[len(ns)-5:]
	tolerations := gangPool(t, pool, false, pool+"-1", pool+"-2")
	applyExampleFiles(t, ns, "federatedlearningjob", "00-datasets.yaml", "01-model.yaml")
	cpuQuota(t, ns, "q", cpu)
	return ns, tolerations, watchPodsMade(t, ns)
}

// cpuQuota makes a ResourceQuota of requests.cpu in ns and waits for the
// quota controller to count its usage (until then the API server admits
// no pod the quota limits).
func cpuQuota(t *testing.T, ns, name, cpu string) {
	t.Helper()
	kube := framework.KubeClient(t)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse(cpu)}}}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(t.Context(), q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "quota "+name+" counted", func(ctx context.Context) (bool, error) {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, counted := q.Status.Used[corev1.ResourceRequestsCPU]
		return counted, nil
	})
}

// setQuotaCPU raises or lowers the quota's requests.cpu.
func setQuotaCPU(t *testing.T, ns, name, cpu string) {
	t.Helper()
	quotas := framework.KubeClient(t).CoreV1().ResourceQuotas(ns)
	framework.Edit(t, quotas.Get, quotas.Update, name, func(q *corev1.ResourceQuota) {
		q.Spec.Hard[corev1.ResourceRequestsCPU] = resource.MustParse(cpu)
	})
}

// podsMade records, from a watch opened before any job exists, the name of
// every pod created in a namespace, by the UID of the job that owns it, in
// the order the API server reports them: a pod made and removed between
// two samples is still seen.
type podsMade struct {
	mu    sync.Mutex
	order []string
	by    map[types.UID][]string
}

func watchPodsMade(t *testing.T, ns string) *podsMade {
	t.Helper()
	w, err := framework.KubeClient(t).CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	m := &podsMade{by: map[types.UID][]string{}}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			m.mu.Lock()
			owner := types.UID(pod.Labels[common.LabelOwnerUID])
			m.by[owner] = append(m.by[owner], pod.Name)
			m.order = append(m.order, pod.Name)
			m.mu.Unlock()
		}
	}()
	return m
}

func (m *podsMade) of(uid types.UID) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.by[uid])
}

// firstIndex is where the first pod of a job (by name prefix) was made, -1
// when none was.
func (m *podsMade) firstIndex(prefix string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.IndexFunc(m.order, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// seenIndex waits until the watch has delivered a pod of the job (by name
// prefix) and returns where the first one was made: the API server may
// list a pod before this watch reports it.
func (m *podsMade) seenIndex(t *testing.T, prefix string) int {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "the watch to report a pod named "+prefix+"*", func(context.Context) (bool, error) {
		return m.firstIndex(prefix) >= 0, nil
	})
	return m.firstIndex(prefix)
}

// flAdmitted waits for the job's Admitted condition to have status, reason
// and, unless "", message; it returns the message.
func flAdmitted(t *testing.T, ns, name string, status corev1.ConditionStatus, reason, message string) string {
	t.Helper()
	return flCondition(t, ns, name, admission.ConditionAdmitted, status, reason, func(msg string) bool {
		return message == "" || msg == message
	})
}

// waitForPods waits until the job has n live pods.
func waitForPods(t *testing.T, ns string, job metav1.Object, n int) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, fmt.Sprintf("%d pods of %s", n, job.GetName()), func(ctx context.Context) (bool, error) {
		pods, err := livePods(ctx, t, ns, job)
		return len(pods) == n, err
	})
}

// quotaJob is a federated learning job of an aggregator and trainers, each
// pod asking for cpu, placed on the pool's nodes by the scheduler.
func quotaJob(name, cpu string, trainers int, class string, tolerations []corev1.Toleration) *sednav1.FederatedLearningJob {
	nodes := make([]string, trainers)
	job := pinnedFLJob(name, cpu, tolerations, "", nodes...)
	job.Spec.AggregationWorker.Template.Spec.PriorityClassName = class
	for i := range job.Spec.TrainingWorkers {
		job.Spec.TrainingWorkers[i].Template.Spec.PriorityClassName = class
	}
	return job
}

func createFL(t *testing.T, ns string, job *sednav1.FederatedLearningJob) *sednav1.FederatedLearningJob {
	t.Helper()
	made, err := framework.SednaClient(t).SednaV1alpha1().FederatedLearningJobs(ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return made
}

// TestQuotaAdmitsOneJobWholeAndTheOtherWaits is the scenario: a
// quota of 4 CPUs, two jobs of 3 applied together. One runs whole; the
// other has no pod, says why (condition, event, kubectl get); when the
// first finishes, the second is made whole.
func TestQuotaAdmitsOneJobWholeAndTheOtherWaits(t *testing.T) {
	t.Parallel()
	ns, tolerations, made := quotaNamespace(t, "4")
	framework.StartGlobalManager(t, ns)

	// Applied together: whichever asks first is admitted (neither waits
	// yet, so no order is owed), the other waits.
	jobs := map[string]*sednav1.FederatedLearningJob{
		"qa": createFL(t, ns, quotaJob("qa", "1", 2, "", tolerations)),
		"qb": createFL(t, ns, quotaJob("qb", "1", 2, "", tolerations)),
	}
	var first, second *sednav1.FederatedLearningJob
	framework.Eventually(t, 60*time.Second, "one job with all its pods", func(ctx context.Context) (bool, error) {
		for name, job := range jobs {
			pods, err := livePods(ctx, t, ns, job)
			if err != nil {
				return false, err
			}
			if len(pods) == 3 {
				first, second = job, jobs[map[string]string{"qa": "qb", "qb": "qa"}[name]]
				return true, nil
			}
		}
		return false, nil
	})
	allBound(t, ns, first, 3)
	flAdmitted(t, ns, second.Name, corev1.ConditionFalse, admission.ReasonWaitingForQuota, "needs requests.cpu=3, 1 free of 4 in quota q")
	flAdmitted(t, ns, first.Name, corev1.ConditionTrue, admission.ReasonQuotaAdmitted, "")
	framework.Eventually(t, 30*time.Second, "a WaitingForQuota event for "+second.Name, func(context.Context) (bool, error) {
		return framework.CountEvents(t, ns, second.UID, admission.ReasonWaitingForQuota, "in quota q") > 0, nil
	})
	out, err := framework.Kubectl(t, "get", "federatedlearningjobs", "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get federatedlearningjobs:\n%s", out)
	if !strings.Contains(out, "ADMISSION") || !containsLine(out, second.Name, admission.ReasonWaitingForQuota) || !containsLine(out, first.Name, admission.ReasonQuotaAdmitted) {
		t.Errorf("kubectl get does not show %s waiting for quota and %s admitted:\n%s", second.Name, first.Name, out)
	}
	if got := made.of(second.UID); len(got) != 0 {
		t.Fatalf("%s had pods %v while waiting, want none", second.Name, got)
	}

	finishFLJob(t, ns, first)
	allBound(t, ns, second, 3)
	flAdmitted(t, ns, second.Name, corev1.ConditionTrue, admission.ReasonQuotaAdmitted, "")
	if got := made.of(second.UID); len(got) != 3 {
		t.Errorf("%s made pods %v, want its 3 once", second.Name, got)
	}
	framework.Eventually(t, 30*time.Second, "a QuotaAdmitted event for "+second.Name, func(context.Context) (bool, error) {
		return framework.CountEvents(t, ns, second.UID, admission.ReasonQuotaAdmitted, "") > 0, nil
	})
	// Said once each: the condition's transitions, not every sync.
	for _, reason := range []string{admission.ReasonWaitingForQuota, admission.ReasonQuotaAdmitted} {
		if n := framework.CountEvents(t, ns, second.UID, reason, ""); n != 1 {
			t.Errorf("%d %s events for %s, want 1", n, reason, second.Name)
		}
	}
}

// containsLine says whether a line of out has every one of words.
func containsLine(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && fields[0] == words[0] && strings.Contains(line, strings.Join(words[1:], " ")) {
			return true
		}
	}
	return false
}

// TestQuotaForTwoOfThreeJobsAdmitsAHighPriorityJobFirst: room for two jobs
// of three; the third waits. A high-priority job created after it waits
// too, and is admitted first when room frees; the older one when room
// frees again. Without a gang scheduler: admission is the same.
func TestQuotaForTwoOfThreeJobsAdmitsAHighPriorityJobFirst(t *testing.T) {
	t.Parallel()
	ns, tolerations, made := quotaNamespace(t, "4")
	kube := framework.KubeClient(t)
	class := "nereid-high-" + ns[len(ns)-5:]
	if _, err := kube.SchedulingV1().PriorityClasses().Create(t.Context(), &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000, PreemptionPolicy: ptr.To(corev1.PreemptNever),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.SchedulingV1().PriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	framework.StartGlobalManager(t, ns, "--gang-scheduler=none")

	a := createFL(t, ns, quotaJob("a", "1", 1, "", tolerations))
	b := createFL(t, ns, quotaJob("b", "1", 1, "", tolerations))
	waitForPods(t, ns, a, 2)
	waitForPods(t, ns, b, 2)
	c := createFL(t, ns, quotaJob("c", "1", 1, "", tolerations))
	flAdmitted(t, ns, "c", corev1.ConditionFalse, admission.ReasonWaitingForQuota, "")
	urgent := createFL(t, ns, quotaJob("urgent", "1", 1, class, tolerations))
	flAdmitted(t, ns, "urgent", corev1.ConditionFalse, admission.ReasonWaitingForQuota, "")

	finishFLJob(t, ns, a)
	waitForPods(t, ns, urgent, 2)
	flAdmitted(t, ns, "urgent", corev1.ConditionTrue, admission.ReasonQuotaAdmitted, "")
	if got := made.of(c.UID); len(got) != 0 {
		t.Fatalf("the older normal job c made pods %v when room for one job freed, want the high-priority one admitted first", got)
	}
	finishFLJob(t, ns, b)
	waitForPods(t, ns, c, 2)
	if made.seenIndex(t, "c-") < made.seenIndex(t, "urgent-") {
		t.Errorf("c's pods were made before urgent's")
	}
}

// TestQuotaLetsSmallJobsPassALargeOneUpToTheLimit: with
// --quota-backfill-limit=1, a large job that does not fit lets one small
// job pass it; the next small one, which fits, waits behind it, and is
// admitted only after the large one.
func TestQuotaLetsSmallJobsPassALargeOneUpToTheLimit(t *testing.T) {
	t.Parallel()
	ns, tolerations, made := quotaNamespace(t, "6")
	framework.StartGlobalManager(t, ns, "--quota-backfill-limit=1")

	running := createFL(t, ns, quotaJob("running", "1", 2, "", tolerations))
	waitForPods(t, ns, running, 3)
	large := createFL(t, ns, quotaJob("large", "1", 3, "", tolerations))
	flAdmitted(t, ns, "large", corev1.ConditionFalse, admission.ReasonWaitingForQuota, "needs requests.cpu=4, 3 free of 6 in quota q")
	small1 := createFL(t, ns, quotaJob("small1", "500m", 1, "", tolerations))
	waitForPods(t, ns, small1, 2)
	createFL(t, ns, quotaJob("small2", "500m", 1, "", tolerations))
	msg := flAdmitted(t, ns, "small2", corev1.ConditionFalse, admission.ReasonWaitingForQuota, "")
	if !strings.Contains(msg, "waits behind federatedlearningjob large") {
		t.Errorf("small2 waits with %q, want it behind large, passed once (the limit)", msg)
	}
	// small2 fits (2 CPUs free) and still has nothing.
	if i := made.firstIndex("small2-"); i >= 0 {
		t.Fatalf("small2 made a pod while it waited behind large")
	}
	finishFLJob(t, ns, running)
	// Room for both: large first in order, then small2.
	waitForPods(t, ns, large, 4)
	flAdmitted(t, ns, "small2", corev1.ConditionTrue, admission.ReasonQuotaAdmitted, "")
	if got := made.of(large.UID); len(got) != 4 {
		t.Errorf("large made pods %v, want its 4 once", got)
	}
}

// TestQuotaHoldsADIJobScaleUpWhole: a DIJob scaled past its quota makes
// none of its new replicas and says why; the quota raised, they are made
// together.
func TestQuotaHoldsADIJobScaleUpWhole(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	pool := "dquota-" + ns[len(ns)-5:]
	selector, tolerations := allocPool(t, pool, nil, pool+"-1", pool+"-2")
	cpuQuota(t, ns, "q", "4")
	framework.StartGlobalManager(t, ns, "--allocator=none")
	jobs := framework.SednaClient(t).DiengineV2alpha1().DIJobs(ns)
	collectors := poolTask(div2.TaskTypeCollector, "", "1", selector, tolerations)
	collectors.Replicas = 2
	job, err := jobs.Create(t.Context(), &div2.DIJob{ObjectMeta: metav1.ObjectMeta{Name: "rl"}, Spec: div2.DIJobSpec{Tasks: []div2.Task{
		poolTask(div2.TaskTypeLearner, "", "1", selector, tolerations), collectors}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allBound(t, ns, job, 3)
	framework.Edit(t, jobs.Get, jobs.Update, "rl", func(j *div2.DIJob) { j.Spec.Tasks[1].Replicas = 4 })
	got := waitForDIJob(t, ns, "rl", "Admitted=False WaitingForQuota", func(j *div2.DIJob) bool {
		return diCondition(j, div2.ConditionAdmitted, admission.ReasonWaitingForQuota) != nil
	})
	if c := diCondition(got, div2.ConditionAdmitted, admission.ReasonWaitingForQuota); c.Message != "needs requests.cpu=2, 1 free of 4 in quota q" {
		t.Errorf("Admitted message %q, want what the two new collectors need", c.Message)
	}
	if pods, err := livePods(t.Context(), t, ns, job); err != nil || len(pods) != 3 {
		t.Fatalf("pods %v (%v) while the scale-up waits, want the 3 of before and no new one", podUIDs(pods), err)
	}
	setQuotaCPU(t, ns, "q", "5")
	waitForDIJob(t, ns, "rl", "Admitted=True", func(j *div2.DIJob) bool {
		return diCondition(j, div2.ConditionAdmitted, admission.ReasonQuotaAdmitted) != nil
	})
	allBound(t, ns, job, 5)
}

func diCondition(j *div2.DIJob, t div2.ConditionType, reason string) *div2.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == t && c.Reason == reason {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// TestQuotaAdmissionSurvivesAGlobalManagerKilledMidCreation: job qa is
// admitted and has two of its three pods when the GlobalManager is killed
// (a policy refuses its third, as a slow or failing API server would);
// while it is down, qb is created. The new GlobalManager finishes qa whole
// and qb waits with no pod: qa's room is not given away.
func TestQuotaAdmissionSurvivesAGlobalManagerKilledMidCreation(t *testing.T) {
	t.Parallel()
	ns, tolerations, made := quotaNamespace(t, "4")
	refuse := refusePod(t, ns, "qa-training-1-")
	gm := framework.StartGlobalManager(t, ns, "--gang-scheduler=none")

	qa := createFL(t, ns, quotaJob("qa", "1", 2, "", tolerations))
	waitForPods(t, ns, qa, 2)
	gm.Kill(t)
	qb := createFL(t, ns, quotaJob("qb", "1", 2, "", tolerations))
	refuse()
	if err := gm.Start(); err != nil {
		t.Fatal(err)
	}
	waitForPods(t, ns, qa, 3)
	flAdmitted(t, ns, "qb", corev1.ConditionFalse, admission.ReasonWaitingForQuota, "")
	if got := made.of(qb.UID); len(got) != 0 {
		t.Fatalf("qb made pods %v while qa's room was held, want none", got)
	}
}

// refusePod makes the API server refuse creating a pod whose name starts
// with name in ns,
// as a ValidatingAdmissionPolicy; the function returned lifts it and waits
// until the API server admits such a pod again.
func refusePod(t *testing.T, ns, name string) func() {
	t.Helper()
	kube := framework.KubeClient(t)
	policyName := "nereid-test-refuse-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("!object.metadata.name.startsWith(%q)", name),
				Message:    "refused by the test",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	policies := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bindings := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if _, err := policies.Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bindings.Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lift := func() {
		_ = bindings.Delete(context.Background(), policyName, metav1.DeleteOptions{})
		_ = policies.Delete(context.Background(), policyName, metav1.DeleteOptions{})
	}
	t.Cleanup(lift)
	probe := func(ctx context.Context) error {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-probe", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "probe", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}}}}}}
		_, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	// The policy takes effect once the API server has loaded it.
	framework.Eventually(t, 30*time.Second, "the policy refusing "+name, func(ctx context.Context) (bool, error) {
		err := probe(ctx)
		return err != nil && strings.Contains(err.Error(), "refused by the test"), nil
	})
	return func() {
		lift()
		framework.Eventually(t, 30*time.Second, "the policy lifted", func(ctx context.Context) (bool, error) {
			err := probe(ctx)
			return err == nil || !strings.Contains(err.Error(), "refused by the test"), nil
		})
	}
}

// TestQuotaRefusalAfterAdmissionRemovesWhatWasMade: the API server charges
// more than admission counted (a RuntimeClass's overhead, which the API
// server adds to each pod: 1 CPU more per pod here), so it refuses the
// third pod of a job that was admitted. The pods made of the job are
// removed, not left holding the quota: the job says so (a QuotaExceeded
// warning, Admitted=False naming the refusal) and waits with none.
func TestQuotaRefusalAfterAdmissionRemovesWhatWasMade(t *testing.T) {
	t.Parallel()
	ns, tolerations, made := quotaNamespace(t, "4")
	kube := framework.KubeClient(t)
	class := "nereid-overhead-" + ns[len(ns)-5:]
	if _, err := kube.NodeV1().RuntimeClasses().Create(t.Context(), &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Handler: "runc",
		Overhead: &nodev1.Overhead{PodFixed: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.NodeV1().RuntimeClasses().Delete(context.Background(), class, metav1.DeleteOptions{}) })
	framework.StartGlobalManager(t, ns, "--gang-scheduler=none")
	job := quotaJob("heavy", "1", 2, "", tolerations)
	job.Spec.AggregationWorker.Template.Spec.RuntimeClassName = &class
	for i := range job.Spec.TrainingWorkers {
		job.Spec.TrainingWorkers[i].Template.Spec.RuntimeClassName = &class
	}
	heavy := createFL(t, ns, job)
	framework.Eventually(t, 60*time.Second, "a QuotaExceeded warning", func(context.Context) (bool, error) {
		return framework.CountEvents(t, ns, heavy.UID, admission.ReasonQuotaExceeded, "exceeded quota") > 0, nil
	})
	msg := flAdmitted(t, ns, "heavy", corev1.ConditionFalse, admission.ReasonWaitingForQuota, "")
	if !strings.Contains(msg, "the API server refused a pod of it for quota after it was admitted") {
		t.Errorf("Admitted message %q, want it to name the refusal and the backoff", msg)
	}
	if got := made.of(heavy.UID); len(got) == 0 {
		t.Fatal("no pod of heavy was ever made: the refusal was not met")
	}
	// Removed, all of them: nothing of the job holds the quota.
	waitForPods(t, ns, heavy, 0)
	q, err := kube.CoreV1().ResourceQuotas(ns).Get(t.Context(), "q", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pods made and removed: %v; quota used %s", made.of(heavy.UID), q.Status.Used.Name(corev1.ResourceRequestsCPU, resource.DecimalSI))
}
