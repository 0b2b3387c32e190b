package gang

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nereid-ml/nereid/internal/testwait"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

func TestEnsureCreatesKubernetesWorkloadAndPodGroup(t *testing.T) {
	c := startCluster(t, clusterConfig{flag: Kubernetes, apis: []*metav1.APIResourceList{kubernetesAPI}})
	p := c.m.Plan(newJob(nil, nil), testKind, false)
	if err := p.Ensure(t.Context(), c.children, members(3), nil); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	w, err := c.kube.SchedulingV1beta1().Workloads(testNamespace).Get(t.Context(), testGroupName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Workload: %v", err)
	}
	want := testGroup(Kubernetes, nil, members(3), 0)
	if diff := cmp.Diff(want.workload().Spec, w.Spec); diff != "" {
		t.Errorf("Workload spec (-want,+got):\n%s", diff)
	}
	if !common.IsControlledBy(w, newJob(nil, nil)) {
		t.Errorf("Workload owner references %+v, want the job as controller", w.OwnerReferences)
	}
	pg, err := c.kube.SchedulingV1beta1().PodGroups(testNamespace).Get(t.Context(), testGroupName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the PodGroup: %v", err)
	}
	if diff := cmp.Diff(want.podGroup().Spec, pg.Spec); diff != "" {
		t.Errorf("PodGroup spec (-want,+got):\n%s", diff)
	}
	if got := c.events(); !slices.Equal(got, []string{
		"Normal SuccessfulCreate Created workload: " + testGroupName,
		"Normal SuccessfulCreate Created podgroup: " + testGroupName,
	}) {
		t.Errorf("events %q, want one per object created", got)
	}
}

func TestEnsureCreatesUnstructuredPodGroups(t *testing.T) {
	for name, tc := range map[Mode]struct {
		apis        *metav1.APIResourceList
		annotations map[string]string
		wantSpec    map[string]any
	}{
		Volcano: {
			apis: volcanoAPI, annotations: map[string]string{AnnotationVolcanoQueue: "gpu"},
			wantSpec: map[string]any{"minMember": int64(3), "queue": "gpu", "minResources": map[string]any{"cpu": "1500m", "memory": "3Gi"}},
		},
		Coscheduling: {
			apis: coschedulingAPI, annotations: map[string]string{AnnotationScheduleTimeout: "30"},
			wantSpec: map[string]any{"minMember": int64(3), "scheduleTimeoutSeconds": int64(30), "minResources": map[string]any{"cpu": "1500m", "memory": "3Gi"}},
		},
	} {
		t.Run(string(name), func(t *testing.T) {
			c := startCluster(t, clusterConfig{flag: name, apis: []*metav1.APIResourceList{tc.apis}})
			p := c.m.Plan(newJob(tc.annotations, nil), testKind, false)
			if err := p.Ensure(t.Context(), c.children, members(3), nil); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			u := c.getUnstructured(t, resources(name)[0], testGroupName)
			if got := u.GetAPIVersion() + " " + u.GetKind(); got != tc.apis.GroupVersion+" PodGroup" {
				t.Errorf("created a %s, want a %s PodGroup", got, tc.apis.GroupVersion)
			}
			if diff := cmp.Diff(tc.wantSpec, u.Object["spec"]); diff != "" {
				t.Errorf("spec (-want,+got):\n%s", diff)
			}
			if !common.IsControlledBy(u, newJob(nil, nil)) || u.GetLabels()[common.LabelOwnerUID] != testJobUID {
				t.Errorf("owner references %+v and labels %v, want the job as controller and its UID label", u.GetOwnerReferences(), u.GetLabels())
			}
		})
	}
}

// TestEnsureKeepsTheGroupInStepOnAScale: a scale changes the group's
// minimum (a stale one would hold the new pods forever); an unchanged job
// writes nothing.
func TestEnsureKeepsTheGroupInStepOnAScale(t *testing.T) {
	all := []*metav1.APIResourceList{kubernetesAPI, volcanoAPI, coschedulingAPI}
	for _, mode := range schedulers {
		t.Run(string(mode), func(t *testing.T) {
			c := startCluster(t, clusterConfig{flag: mode, apis: all})
			job := newJob(nil, nil)
			if err := c.m.Plan(job, testKind, false).Ensure(t.Context(), c.children, members(3), nil); err != nil {
				t.Fatalf("first Ensure: %v", err)
			}
			testwait.Eventually(t, 10*time.Second, "the group in the cache", c.cached(mode, testGroupName, 3))
			c.events()
			_, updatesBefore := c.writes()

			if err := c.m.Plan(job, testKind, false).Ensure(t.Context(), c.children, members(5), nil); err != nil {
				t.Fatalf("Ensure after the scale: %v", err)
			}
			switch mode {
			case Kubernetes:
				w, err := c.kube.SchedulingV1beta1().Workloads(testNamespace).Get(t.Context(), testGroupName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := w.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount; got != 5 {
					t.Errorf("Workload minCount = %d, want 5", got)
				}
				pg, err := c.kube.SchedulingV1beta1().PodGroups(testNamespace).Get(t.Context(), testGroupName, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := pg.Spec.SchedulingPolicy.Gang.MinCount; got != 5 {
					t.Errorf("PodGroup minCount = %d, want 5", got)
				}
			default:
				spec := c.getUnstructured(t, resources(mode)[0], testGroupName).Object["spec"].(map[string]any)
				if spec["minMember"] != int64(5) {
					t.Errorf("minMember = %v, want 5", spec["minMember"])
				}
				if diff := cmp.Diff(map[string]any{"cpu": "2500m", "memory": "5Gi"}, spec["minResources"]); diff != "" {
					t.Errorf("minResources (-want,+got):\n%s", diff)
				}
			}
			for _, e := range c.events() {
				if !strings.HasPrefix(e, "Normal SuccessfulUpdate Updated ") {
					t.Errorf("event %q, want only updates", e)
				}
			}
			_, updatesAfter := c.writes()
			wantUpdates := 1
			if mode == Kubernetes {
				wantUpdates = 2 // the Workload and the PodGroup
			}
			if updatesAfter-updatesBefore != wantUpdates {
				t.Errorf("the scale wrote %d updates, want %d", updatesAfter-updatesBefore, wantUpdates)
			}

			testwait.Eventually(t, 10*time.Second, "the scaled group in the cache", c.cached(mode, testGroupName, 5))
			if err := c.m.Plan(job, testKind, false).Ensure(t.Context(), c.children, members(5), nil); err != nil {
				t.Fatalf("Ensure unchanged: %v", err)
			}
			if _, updates := c.writes(); updates != updatesAfter {
				t.Errorf("an unchanged job wrote %d updates", updates-updatesAfter)
			}
		})
	}
}

// TestEnsureLeavesAnotherOwnersGroupAlone: an object of the group's name
// that is not the job's is an error, and is not changed. One with the
// owner-uid label is in the Manager's cache; one without is found by
// the create's AlreadyExists.
func TestEnsureLeavesAnotherOwnersGroupAlone(t *testing.T) {
	all := []*metav1.APIResourceList{kubernetesAPI, volcanoAPI, coschedulingAPI}
	othersMeta := func(labelled bool) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: testGroupName, Namespace: testNamespace, OwnerReferences: otherOwnerRef()}
		if labelled {
			m.Labels = map[string]string{common.LabelOwnerUID: "uid-other"}
		}
		return m
	}
	othersWorkload := func(labelled bool) *schedulingv1beta1.Workload {
		return &schedulingv1beta1.Workload{ObjectMeta: othersMeta(labelled), Spec: schedulingv1beta1.WorkloadSpec{
			PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{Name: "workers", SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 7},
			}}},
		}}
	}
	othersPodGroup := func(mode Mode, labelled bool) *unstructured.Unstructured {
		u := testGroup(mode, nil, Members{Count: 7}, 0).unstructuredPodGroup(resources(mode)[0], map[string]any{"minMember": int64(7)})
		meta := othersMeta(labelled)
		u.SetLabels(meta.Labels)
		u.SetOwnerReferences(meta.OwnerReferences)
		return u
	}
	for name, tc := range map[string]struct {
		mode    Mode
		kube    []runtime.Object
		dynamic []runtime.Object
		want    string
	}{
		"kubernetes, in the cache": {
			mode: Kubernetes, kube: []runtime.Object{othersWorkload(true)},
			want: "Workload ns/" + testGroupName + " exists and is not the job's",
		},
		"kubernetes, not in the cache": {
			mode: Kubernetes, kube: []runtime.Object{othersWorkload(false)},
			want: "Workload " + testGroupName + " already exists and is not controlled by train",
		},
		"volcano, in the cache": {
			mode: Volcano, dynamic: []runtime.Object{othersPodGroup(Volcano, true)},
			want: "PodGroup ns/" + testGroupName + " exists and is not the job's",
		},
		"volcano, not in the cache": {
			mode: Volcano, dynamic: []runtime.Object{othersPodGroup(Volcano, false)},
			want: "PodGroup " + testGroupName + " already exists and is not controlled by train",
		},
		"coscheduling, in the cache": {
			mode: Coscheduling, dynamic: []runtime.Object{othersPodGroup(Coscheduling, true)},
			want: "PodGroup ns/" + testGroupName + " exists and is not the job's",
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, clusterConfig{flag: tc.mode, apis: all, kube: tc.kube, dynamic: tc.dynamic})
			err := c.m.Plan(newJob(nil, nil), testKind, false).Ensure(t.Context(), c.children, members(3), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ensure error %v, want one saying %q", err, tc.want)
			}
			if _, updates := c.writes(); updates != 0 {
				t.Errorf("Ensure wrote %d updates to another owner's object", updates)
			}
			if tc.mode == Kubernetes {
				w, err := c.kube.SchedulingV1beta1().Workloads(testNamespace).Get(t.Context(), testGroupName, metav1.GetOptions{})
				if err != nil || w.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount != 7 || common.IsControlledBy(w, newJob(nil, nil)) {
					t.Errorf("the other owner's Workload changed: %+v, %v", w, err)
				}
				if _, err := c.kube.SchedulingV1beta1().PodGroups(testNamespace).Get(t.Context(), testGroupName, metav1.GetOptions{}); err == nil {
					t.Errorf("a PodGroup was made beside another owner's Workload")
				}
				return
			}
			u := c.getUnstructured(t, resources(tc.mode)[0], testGroupName)
			if min, _, _ := unstructured.NestedInt64(u.Object, "spec", "minMember"); min != 7 || common.IsControlledBy(u, newJob(nil, nil)) {
				t.Errorf("the other owner's PodGroup changed: %v", u.Object)
			}
		})
	}
}

// TestEnsureDoesNothingWithoutAGang: no gang, or an annotation that holds
// the job, writes nothing.
func TestEnsureDoesNothingWithoutAGang(t *testing.T) {
	for name, tc := range map[string]struct {
		flag        Mode
		annotations map[string]string
	}{
		"flag none":          {flag: None},
		"annotation none":    {flag: Kubernetes, annotations: map[string]string{AnnotationScheduler: "none"}},
		"invalid annotation": {flag: Kubernetes, annotations: map[string]string{AnnotationScheduler: "bogus"}},
		"invalid minimum":    {flag: Kubernetes, annotations: map[string]string{AnnotationMinMember: "-1"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, clusterConfig{flag: tc.flag, apis: []*metav1.APIResourceList{kubernetesAPI}})
			if err := c.m.Plan(newJob(tc.annotations, nil), testKind, true).Ensure(t.Context(), c.children, members(3), nil); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if creates, updates := c.writes(); creates+updates != 0 {
				t.Errorf("Ensure wrote %d creates and %d updates, want none", creates, updates)
			}
		})
	}
}

func TestEnsureWaitsForTheCaches(t *testing.T) {
	c := newCluster(t, clusterConfig{flag: Volcano, apis: []*metav1.APIResourceList{volcanoAPI}}) // caches not started
	err := c.m.Plan(newJob(nil, nil), testKind, false).Ensure(t.Context(), c.children, members(3), nil)
	if !errors.Is(err, errNotSynced) {
		t.Errorf("Ensure before the caches are filled: %v, want %v", err, errNotSynced)
	}
	if creates, _ := c.writes(); creates != 0 {
		t.Errorf("Ensure created %d objects from an empty cache", creates)
	}
}

// TestStatusQuotesTheGroupsCondition: what the scheduler wrote on the
// group object comes before a pod's message.
func TestStatusQuotesTheGroupsCondition(t *testing.T) {
	const says = "minCount (3) cannot be satisfied: 1 scheduled, 2 remaining"
	labels := map[string]string{common.LabelOwnerUID: testJobUID}
	kubePodGroup := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: testGroupName, Namespace: testNamespace, Labels: labels},
		Status: schedulingv1beta1.PodGroupStatus{Conditions: []metav1.Condition{
			{Type: schedulingv1beta1.DisruptionTarget, Status: metav1.ConditionFalse, Message: "not this one"},
			{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse, Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: says},
		}},
	}
	volcanoPodGroup := testGroup(Volcano, nil, members(3), 0).volcanoPodGroup()
	volcanoPodGroup.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "Scheduled", "status": "False", "message": "not this one"},
		map[string]any{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": says},
	}}
	for name, tc := range map[Mode]struct {
		kube    []runtime.Object
		dynamic []runtime.Object
	}{
		Kubernetes: {kube: []runtime.Object{kubePodGroup}},
		Volcano:    {dynamic: []runtime.Object{volcanoPodGroup}},
	} {
		t.Run(string(name), func(t *testing.T) {
			c := startCluster(t, clusterConfig{flag: name, apis: []*metav1.APIResourceList{kubernetesAPI, volcanoAPI}, kube: tc.kube, dynamic: tc.dynamic})
			p := c.m.Plan(newJob(nil, nil), testKind, false)
			live := []*corev1.Pod{pod(p, "w-0", "edge-1", ""), pod(p, "w-1", "", "a pod's message"), pod(p, "w-2", "", "")}
			want := Status{Reason: ReasonWaitingForGang, Message: "1 of 3 pods are placed; the " + string(name) + " gang " + testGroupName +
				" needs 3 placed together; the scheduler says: " + says}
			if diff := cmp.Diff(want, p.Status(live, 3)); diff != "" {
				t.Errorf("Status (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestStatusNeverQuotesASchedulerMessageOfAnotherMinimum: after a trainer
// is removed the gang needs fewer pods, but what the scheduler last wrote,
// on the group or on a pod, still names the old minimum until it tries
// again; such a message is left out, and the condition says the scheduler
// has not yet tried the gang as it is now.
func TestStatusNeverQuotesASchedulerMessageOfAnotherMinimum(t *testing.T) {
	const (
		kubeStale    = "minCount (3) cannot be satisfied: 1 scheduled, 2 remaining"
		kubeCurrent  = "minCount (2) cannot be satisfied: 1 scheduled, 0 remaining"
		volcanoStale = "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable"
		coschedStale = "0/3 nodes are available: pre-filter pod w-0 cannot find enough sibling pods, current pods number: 2, minMember of group: 3."
		notYet       = "; the scheduler has not yet tried the gang as it is now"
	)
	kubeGroup := func(says string) runtime.Object {
		pg := testGroup(Kubernetes, nil, members(2), 0).podGroup()
		pg.Status.Conditions = []metav1.Condition{{Type: schedulingv1beta1.PodGroupInitiallyScheduled, Status: metav1.ConditionFalse,
			Reason: schedulingv1beta1.PodGroupReasonUnschedulable, Message: says}}
		return pg
	}
	volcanoGroup := testGroup(Volcano, nil, members(2), 0).volcanoPodGroup()
	volcanoGroup.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": volcanoStale},
	}}
	waiting := func(mode Mode, needs int, rest string) Status {
		return Status{Reason: ReasonWaitingForGang, Message: fmt.Sprintf("0 of 2 pods are placed; the %s gang %s needs %d placed together%s", mode, testGroupName, needs, rest)}
	}
	for name, tc := range map[string]struct {
		flag        Mode
		annotations map[string]string
		kube        []runtime.Object
		dynamic     []runtime.Object
		podSays     [2]string // the scheduler's message on w-0 and w-1
		made        int       // how many of the 2 pods are made
		count       int
		want        Status
	}{
		"kubernetes: the group and its pods name the minimum before a trainer was removed": {
			flag: Kubernetes, kube: []runtime.Object{kubeGroup(kubeStale)}, podSays: [2]string{kubeStale, kubeStale}, made: 2, count: 2,
			want: waiting(Kubernetes, 2, notYet),
		},
		"kubernetes: the group names the old minimum, its new pods were never tried": {
			flag: Kubernetes, kube: []runtime.Object{kubeGroup(kubeStale)}, count: 2,
			want: waiting(Kubernetes, 2, notYet+"; 0 of its pods are made"),
		},
		"kubernetes: the group names the old minimum, a pod's message is of the gang as it is now": {
			flag: Kubernetes, kube: []runtime.Object{kubeGroup(kubeStale)}, podSays: [2]string{kubeCurrent, kubeStale}, made: 2, count: 2,
			want: waiting(Kubernetes, 2, "; the scheduler says: "+kubeCurrent),
		},
		"kubernetes: the group names the minimum it has": {
			flag: Kubernetes, kube: []runtime.Object{kubeGroup(kubeCurrent)}, podSays: [2]string{kubeStale, kubeStale}, made: 2, count: 2,
			want: waiting(Kubernetes, 2, "; the scheduler says: "+kubeCurrent),
		},
		"kubernetes: the annotation's minimum, named": {
			flag: Kubernetes, annotations: map[string]string{AnnotationMinMember: "2"}, kube: []runtime.Object{kubeGroup(kubeCurrent)}, made: 2, count: 3,
			want: Status{Reason: ReasonWaitingForGang, Message: "0 of 3 pods are placed; the kubernetes gang " + testGroupName +
				" needs 2 placed together; the scheduler says: " + kubeCurrent},
		},
		"volcano: the group names the old minAvailable": {
			flag: Volcano, dynamic: []runtime.Object{volcanoGroup}, made: 2, count: 2,
			want: waiting(Volcano, 2, notYet),
		},
		"coscheduling: a pod names the old minMember": {
			flag: Coscheduling, podSays: [2]string{coschedStale, ""}, made: 2, count: 2,
			want: waiting(Coscheduling, 2, notYet),
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := startCluster(t, clusterConfig{flag: tc.flag, apis: []*metav1.APIResourceList{kubernetesAPI, volcanoAPI, coschedulingAPI},
				kube: tc.kube, dynamic: tc.dynamic})
			p := c.m.Plan(newJob(tc.annotations, nil), testKind, true)
			var live []*corev1.Pod
			for i := range tc.made {
				live = append(live, pod(p, fmt.Sprintf("w-%d", i), "", tc.podSays[i]))
			}
			if diff := cmp.Diff(tc.want, p.Status(live, tc.count)); diff != "" {
				t.Errorf("Status (-want,+got):\n%s", diff)
			}
		})
	}
}
