package gang

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/nereid-ml/nereid/pkg/globalmanager/placement"
)

func TestGroupNameIsTheJobAndItsKind(t *testing.T) {
	if got := GroupName(newJob(nil, nil), testKind); got != testGroupName {
		t.Errorf("GroupName = %q, want %q", got, testGroupName)
	}
}

// planModeCase is a job's annotations under a --gang-scheduler flag and the
// served APIs, and the plan it gets.
type planModeCase struct {
	flag        Mode
	apis        []*metav1.APIResourceList
	annotations map[string]string
	minOK       bool
	wantMode    Mode
	// wantStatus is what Status says of a job with no pods yet, when
	// wantMode is None; want is every string its message must contain.
	wantReason string
	want       []string
}

func planModeCases() map[string]planModeCase {
	all := []*metav1.APIResourceList{kubernetesAPI, volcanoAPI}
	return map[string]planModeCase{
		"the flag": {
			flag: Kubernetes, apis: all, wantMode: Kubernetes,
		},
		"auto resolves to the first served": {
			flag: Auto, apis: []*metav1.APIResourceList{volcanoAPI, coschedulingAPI}, wantMode: Volcano,
		},
		"the annotation overrides the flag": {
			flag: Kubernetes, apis: all, annotations: map[string]string{AnnotationScheduler: "volcano"}, wantMode: Volcano,
		},
		"annotation auto is the cluster's mode": {
			flag: Volcano, apis: all, annotations: map[string]string{AnnotationScheduler: "auto"}, wantMode: Volcano,
		},
		"annotation none turns the gang off": {
			flag: Kubernetes, apis: all, annotations: map[string]string{AnnotationScheduler: "none"},
			wantMode: None, wantReason: ReasonGangSchedulingOff, want: []string{"annotation nereid.io/gang-scheduler=none"},
		},
		"flag none": {
			flag: None, apis: all,
			wantMode: None, wantReason: ReasonGangSchedulingOff, want: []string{"--gang-scheduler=none"},
		},
		"nothing served": {
			flag:     Auto,
			wantMode: None, wantReason: ReasonNoGangScheduler, want: []string{"serves no gang scheduling API"},
		},
		"annotation auto with nothing served says nothing is served": {
			flag: Auto, annotations: map[string]string{AnnotationScheduler: "auto"},
			wantMode: None, wantReason: ReasonNoGangScheduler, want: []string{"serves no gang scheduling API"},
		},
		"annotation auto with flag none says the flag": {
			flag: None, apis: all, annotations: map[string]string{AnnotationScheduler: "auto"},
			wantMode: None, wantReason: ReasonGangSchedulingOff, want: []string{"--gang-scheduler=none"},
		},
		"an invalid annotation": {
			flag: Kubernetes, apis: all, annotations: map[string]string{AnnotationScheduler: "yunikorn"},
			wantMode: None, wantReason: ReasonInvalidGangAnnotation,
			want: []string{"annotation nereid.io/gang-scheduler", `"yunikorn"`, "auto, kubernetes, volcano, coscheduling, none", "wait for an edit"},
		},
		"an annotation naming a scheduler not served": {
			flag: Kubernetes, apis: all, annotations: map[string]string{AnnotationScheduler: "coscheduling"},
			wantMode: None, wantReason: ReasonGangSchedulerUnavailable,
			want: []string{"annotation nereid.io/gang-scheduler", "asks for coscheduling", "podgroups.scheduling.x-k8s.io/v1alpha1"},
		},
		"a minimum": {
			flag: Kubernetes, apis: all, annotations: map[string]string{AnnotationMinMember: "2"}, minOK: true, wantMode: Kubernetes,
		},
		"a minimum that is not a number": {
			flag: Kubernetes, apis: all, annotations: map[string]string{AnnotationMinMember: "two"}, minOK: true,
			wantMode: None, wantReason: ReasonInvalidGangAnnotation, want: []string{"annotation nereid.io/gang-min-member", `"two"`},
		},
		"a minimum of zero": {
			flag: Kubernetes, apis: all, annotations: map[string]string{AnnotationMinMember: "0"}, minOK: true,
			wantMode: None, wantReason: ReasonInvalidGangAnnotation, want: []string{"annotation nereid.io/gang-min-member", `"0"`},
		},
		"a minimum on a kind without one is ignored": {
			flag: Kubernetes, apis: all, annotations: map[string]string{AnnotationMinMember: "two"}, wantMode: Kubernetes,
		},
		"a timeout that is not a number": {
			flag: Coscheduling, apis: []*metav1.APIResourceList{coschedulingAPI}, annotations: map[string]string{AnnotationScheduleTimeout: "1m"},
			wantMode: None, wantReason: ReasonInvalidGangAnnotation, want: []string{"annotation nereid.io/gang-schedule-timeout-seconds", `"1m"`},
		},
	}
}

// TestPlanModeFromFlagAndAnnotations: the job's annotation overrides the
// cluster's mode; one that cannot be followed is the Problem its condition
// shows, naming the annotation.
func TestPlanModeFromFlagAndAnnotations(t *testing.T) {
	for name, tc := range planModeCases() {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, clusterConfig{flag: tc.flag, apis: tc.apis})
			p := c.m.Plan(newJob(tc.annotations, nil), testKind, tc.minOK)
			if p.Mode != tc.wantMode {
				t.Errorf("Mode = %q, want %q", p.Mode, tc.wantMode)
			}
			if p.Name != testGroupName {
				t.Errorf("Name = %q, want %q", p.Name, testGroupName)
			}
			invalid := tc.wantReason == ReasonInvalidGangAnnotation || tc.wantReason == ReasonGangSchedulerUnavailable
			if invalid != (p.Problem != nil) {
				t.Errorf("Problem = %+v, want one: %v", p.Problem, invalid)
			}
			if tc.wantMode != None {
				return
			}
			st := p.Status(nil, 3)
			if st.Scheduled || st.Reason != tc.wantReason {
				t.Errorf("Status = %+v, want Scheduled=false reason %s", st, tc.wantReason)
			}
			for _, w := range tc.want {
				if !strings.Contains(st.Message, w) {
					t.Errorf("Status message %q does not contain %q", st.Message, w)
				}
			}
		})
	}
}

// TestDecorateByMode: each mode's reference on the pod, and a template's
// node name as a required node affinity the scheduler keeps.
func TestDecorateByMode(t *testing.T) {
	all := []*metav1.APIResourceList{kubernetesAPI, volcanoAPI, coschedulingAPI}
	for name, tc := range decorateCases() {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, clusterConfig{flag: tc.flag, apis: all})
			p := c.m.Plan(newJob(nil, tc.labels), testKind, false)
			got := tc.template()
			p.Decorate(got, members(3))
			if diff := cmp.Diff(tc.want(), got); diff != "" {
				t.Errorf("decorated pod (-want,+got):\n%s", diff)
			}
		})
	}
}

// decorateCase is a job's labels under a --gang-scheduler flag, its pod
// template and the pod Decorate makes of it.
type decorateCase struct {
	flag     Mode
	labels   map[string]string
	template func() *corev1.Pod
	want     func() *corev1.Pod
}

// decorateTemplate is a pod template naming its node.
func decorateTemplate() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "train-trainer-0", Namespace: testNamespace,
			Labels: map[string]string{"app": "fl"}, Annotations: map[string]string{"note": "kept"},
		},
		Spec: corev1.PodSpec{NodeName: "edge-1", Containers: []corev1.Container{{Name: "worker", Image: "worker:1"}}},
	}
}

// pinned is template with spec.nodeName moved into the affinity, as
// common.Pin writes it: a match on the node's metadata.name, and the
// node kept in AnnotationPinnedNode.
func pinnedTemplate() *corev1.Pod {
	p := decorateTemplate()
	p.Spec.NodeName = ""
	p.Annotations[placement.AnnotationPinnedNode] = "edge-1"
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"edge-1"}}},
		}}},
	}}
	return p
}

// withKueue puts Kueue's labels and annotation on a pod of a 3-pod job in
// queue team-a.
func withKueue(p *corev1.Pod) {
	p.Labels["kueue.x-k8s.io/queue-name"] = "team-a"
	p.Labels["kueue.x-k8s.io/pod-group-name"] = testGroupName
	p.Annotations["kueue.x-k8s.io/pod-group-total-count"] = "3"
}

// decorateCases are decorateModeCases and decorateAffinityCases.
func decorateCases() map[string]decorateCase {
	cases := decorateModeCases()
	maps.Copy(cases, decorateAffinityCases())
	return cases
}

// decorateModeCases: each mode's reference on the pod, Kueue's with it.
func decorateModeCases() map[string]decorateCase {
	template, pinned := decorateTemplate, pinnedTemplate
	kueue := map[string]string{LabelKueueQueue: "team-a"}
	return map[string]decorateCase{
		"kubernetes": {
			flag: Kubernetes, template: template,
			want: func() *corev1.Pod {
				p := pinned()
				p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(testGroupName)}
				return p
			},
		},
		"volcano": {
			flag: Volcano, template: template,
			want: func() *corev1.Pod {
				p := pinned()
				p.Spec.SchedulerName = "volcano"
				p.Annotations["scheduling.k8s.io/group-name"] = testGroupName
				return p
			},
		},
		"coscheduling": {
			flag: Coscheduling, template: template,
			want: func() *corev1.Pod {
				p := pinned()
				p.Labels["scheduling.x-k8s.io/pod-group"] = testGroupName
				return p
			},
		},
		"kueue with a gang": {
			flag: Kubernetes, labels: kueue, template: template,
			want: func() *corev1.Pod {
				p := pinned()
				p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(testGroupName)}
				withKueue(p)
				return p
			},
		},
		"kueue without a gang": {
			flag: None, labels: kueue,
			template: func() *corev1.Pod {
				p := template()
				p.Spec.NodeName = ""
				return p
			},
			want: func() *corev1.Pod {
				p := template()
				p.Spec.NodeName = ""
				withKueue(p)
				return p
			},
		},
		"kueue without a gang pins a named node by affinity (Kueue gates the pod)": {
			flag: None, labels: kueue, template: template,
			want: func() *corev1.Pod {
				p := pinned()
				withKueue(p)
				return p
			},
		},
		"none keeps the node name": {
			flag: None, template: template, want: template,
		},
	}
}

// decorateAffinityCases: a template's node affinity, or none, with its node
// name.
func decorateAffinityCases() map[string]decorateCase {
	template := decorateTemplate
	return map[string]decorateCase{
		"a template's node affinity terms each also require the node": {
			flag: Kubernetes,
			template: func() *corev1.Pod {
				p := template()
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
					}},
				}}
				return p
			},
			want: func() *corev1.Pod {
				p := template()
				p.Spec.NodeName = ""
				p.Annotations[placement.AnnotationPinnedNode] = "edge-1"
				onNode := []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"edge-1"}}}
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}, MatchFields: onNode},
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}, MatchFields: onNode},
					}},
				}}
				p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(testGroupName)}
				return p
			},
		},
		"a pod without a node name gets no affinity": {
			flag: Coscheduling,
			template: func() *corev1.Pod {
				p := template()
				p.Spec.NodeName = ""
				return p
			},
			want: func() *corev1.Pod {
				p := template()
				p.Spec.NodeName = ""
				p.Labels["scheduling.x-k8s.io/pod-group"] = testGroupName
				return p
			},
		},
	}
}

// TestNilManagerPlansNoGang: a controller built without gangs (unit tests)
// gets a plan that changes nothing.
func TestNilManagerPlansNoGang(t *testing.T) {
	var m *Manager
	job := newJob(map[string]string{AnnotationScheduler: "volcano"}, map[string]string{LabelKueueQueue: "team-a"})
	p := m.Plan(job, testKind, true)
	if p.Mode != None || p.Problem != nil || p.Name != testGroupName {
		t.Errorf("Plan = mode %q, problem %+v, name %q; want none, no problem, %q", p.Mode, p.Problem, p.Name, testGroupName)
	}
	po := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{"app": "fl"}}, Spec: corev1.PodSpec{NodeName: "edge-1"}}
	want := po.DeepCopy()
	p.Decorate(po, members(2))
	if diff := cmp.Diff(want, po); diff != "" {
		t.Errorf("decorated pod (-want,+got):\n%s", diff)
	}
	if err := p.Ensure(t.Context(), nil, members(2), nil); err != nil {
		t.Errorf("Ensure: %v", err)
	}
	if st := p.Status([]*corev1.Pod{po}, 1); st != (Status{Scheduled: true, Reason: ReasonGangSchedulingOff, Message: "gang scheduling is not set up"}) {
		t.Errorf("Status = %+v, want Scheduled with reason %s", st, ReasonGangSchedulingOff)
	}
	if synced := m.Watch(testKind, func(string) {}); !synced() {
		t.Errorf("a nil Manager's Watch is not synced")
	}
}

// statusCase is a job's pods under a flag and annotations, and the
// Scheduled condition they make.
type statusCase struct {
	flag        Mode
	annotations map[string]string
	// pods are made by the plan: name, node ("" unplaced), the scheduler's message.
	pods  [][3]string
	extra []*corev1.Pod
	count int
	want  Status
}

const unschedulable = "0/4 nodes are available: 4 Insufficient cpu."

var statusCases = map[string]statusCase{
	"waiting, with the scheduler's message on the first unplaced pod": {
		flag:  Kubernetes,
		pods:  [][3]string{{"w-2", "", "a later pod's message"}, {"w-0", "edge-1", ""}, {"w-1", "", unschedulable}},
		count: 3,
		want: Status{Reason: ReasonWaitingForGang, Message: "1 of 3 pods are placed; the kubernetes gang " + testGroupName +
			" needs 3 placed together; the scheduler says: " + unschedulable},
	},
	"waiting for pods not made yet": {
		flag:  Volcano,
		pods:  [][3]string{{"w-0", "", ""}},
		count: 3,
		want: Status{Reason: ReasonWaitingForGang, Message: "0 of 3 pods are placed; the volcano gang " + testGroupName +
			" needs 3 placed together; 1 of its pods are made"},
	},
	"all placed": {
		flag:  Coscheduling,
		pods:  [][3]string{{"w-0", "edge-1", ""}, {"w-1", "edge-2", ""}},
		count: 2,
		want:  Status{Scheduled: true, Reason: ReasonGangScheduled, Message: "all 2 pods are placed (coscheduling gang " + testGroupName + ")"},
	},
	"the annotation's minimum met": {
		flag: Kubernetes, annotations: map[string]string{AnnotationMinMember: "2"},
		pods:  [][3]string{{"w-0", "edge-1", ""}, {"w-1", "edge-2", ""}, {"w-2", "", unschedulable}},
		count: 3,
		want: Status{Scheduled: true, Reason: ReasonGangScheduled,
			Message: "2 of 3 pods are placed, the gang's minimum of 2 is met (kubernetes gang " + testGroupName + ")"},
	},
	"the annotation's minimum not met": {
		flag: Kubernetes, annotations: map[string]string{AnnotationMinMember: "2"},
		pods:  [][3]string{{"w-0", "edge-1", ""}, {"w-1", "", ""}, {"w-2", "", ""}},
		count: 3,
		want: Status{Reason: ReasonWaitingForGang,
			Message: "1 of 3 pods are placed; the kubernetes gang " + testGroupName + " needs 2 placed together"},
	},
	"terminating pods are not counted": {
		flag: Volcano,
		pods: [][3]string{{"w-0", "edge-1", ""}},
		extra: []*corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "w-1", DeletionTimestamp: ptr.To(metav1.Now()), Annotations: map[string]string{AnnotationVolcanoGroup: testGroupName}},
			Spec:       corev1.PodSpec{NodeName: "edge-2"},
		}},
		count: 2,
		want: Status{Reason: ReasonWaitingForGang, Message: "1 of 2 pods are placed; the volcano gang " + testGroupName +
			" needs 2 placed together; 1 of its pods are made"},
	},
	"without a gang, placed": {
		flag:  None,
		pods:  [][3]string{{"w-0", "edge-1", ""}, {"w-1", "edge-2", ""}},
		count: 2,
		want:  Status{Scheduled: true, Reason: ReasonGangSchedulingOff, Message: "--gang-scheduler=none: pods are placed one by one"},
	},
	"without a gang, not yet placed": {
		flag:  None,
		pods:  [][3]string{{"w-0", "edge-1", ""}, {"w-1", "", ""}},
		count: 2,
		want:  Status{Reason: ReasonGangSchedulingOff, Message: "--gang-scheduler=none: pods are placed one by one"},
	},
	"without a gang, one the scheduler cannot place": {
		flag:  None,
		pods:  [][3]string{{"w-0", "edge-1", ""}, {"w-1", "", unschedulable}},
		count: 2,
		want:  Status{Reason: placement.ReasonUnschedulable, Message: "pod w-1 cannot be placed; the scheduler says: " + unschedulable},
	},
	"without a gang, one bound to a node that does not exist": {
		flag:  None,
		pods:  [][3]string{{"w-0", "edge-9", ""}, {"w-1", "edge-2", ""}},
		count: 2,
		want:  Status{Reason: placement.ReasonUnschedulable, Message: "pod w-0 is pinned to node edge-9, which does not exist"},
	},
	"an invalid annotation is the status": {
		flag: Kubernetes, annotations: map[string]string{AnnotationScheduler: "bogus"},
		pods:  [][3]string{{"w-0", "edge-1", ""}},
		count: 1,
		want: Status{Reason: ReasonInvalidGangAnnotation,
			Message: `annotation nereid.io/gang-scheduler: "bogus" is not a gang scheduler (one of auto, kubernetes, volcano, coscheduling, none); the job's pods wait for an edit`},
	},
}

func TestStatusCountsPlacedPods(t *testing.T) {
	all := []*metav1.APIResourceList{kubernetesAPI, volcanoAPI, coschedulingAPI}
	for name, tc := range statusCases {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, clusterConfig{flag: tc.flag, apis: all, kube: []runtime.Object{
				&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-2"}}}})
			p := c.m.Plan(newJob(tc.annotations, nil), testKind, true)
			var live []*corev1.Pod
			for _, po := range tc.pods {
				live = append(live, pod(p, po[0], po[1], po[2]))
			}
			live = append(live, tc.extra...)
			if diff := cmp.Diff(tc.want, p.Status(live, tc.count)); diff != "" {
				t.Errorf("Status (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestAGangWhosePinnedNodeRefusesItUntilAPersonActsIsUnschedulable: a gang
// whose pod is pinned to a node that does not exist, or that can never hold
// it, is Unschedulable (a Warning); one whose node is only full for now
// keeps waiting (WaitingForGang, a Normal event).
func TestAGangWhosePinnedNodeRefusesItUntilAPersonActsIsUnschedulable(t *testing.T) {
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	c := newCluster(t, clusterConfig{flag: Kubernetes, apis: []*metav1.APIResourceList{kubernetesAPI}, kube: []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Status: corev1.NodeStatus{Allocatable: cpu("250m")}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "full"}, Status: corev1.NodeStatus{Allocatable: cpu("1")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "there", Namespace: "other"},
			Spec: corev1.PodSpec{NodeName: "full", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: cpu("800m")}}}}},
	}})
	p := c.m.Plan(newJob(nil, nil), testKind, true)
	for _, tc := range []struct {
		node, reason, says, event string
	}{
		{"gone", placement.ReasonUnschedulable, "pod w-1 is pinned to node gone, which does not exist", corev1.EventTypeWarning},
		{"small", placement.ReasonUnschedulable, "pod w-1 is pinned to node small, which has too little free: cpu: it asks for 500m, 250m of the node's 250m allocatable is free", corev1.EventTypeWarning},
		{"full", ReasonWaitingForGang, "pod w-1 is pinned to node full, which has too little free: cpu: it asks for 500m, 200m of the node's 1 allocatable is free", corev1.EventTypeNormal},
	} {
		t.Run(tc.node, func(t *testing.T) {
			placed := pod(p, "w-0", "edge-1", "")
			pinned := pod(p, "w-1", "", "")
			pinned.Annotations = map[string]string{placement.AnnotationPinnedNode: tc.node}
			pinned.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: cpu("500m")}}}
			st := p.Status([]*corev1.Pod{placed, pinned}, 2)
			if st.Scheduled || st.Reason != tc.reason || !strings.Contains(st.Message, tc.says) {
				t.Errorf("Status = %+v, want reason %s saying %q", st, tc.reason, tc.says)
			}
			if events := Events(false, false, "", st); len(events) != 1 || events[0].Type != tc.event {
				t.Errorf("events %+v, want one %s", events, tc.event)
			}
		})
	}
}
