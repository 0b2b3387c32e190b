package conversion

import (
	"time"

	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "di-container", Image: image}}}}
}

var v2Meta = metav1.TypeMeta{APIVersion: "diengine.opendilab.org/v2alpha1", Kind: "DIJob"}
var v1Meta = metav1.TypeMeta{APIVersion: "diengine.opendilab.org/v1alpha1", Kind: "DIJob"}

func TestToV2MapsAV1Job(t *testing.T) {
	volumes := []corev1.Volume{{Name: "work-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	cases := map[string]struct {
		in   div1.DIJob
		want div2.DIJob
	}{
		"coordinator, collector and learner become three tasks of one replica": {
			in: div1.DIJob{TypeMeta: v1Meta, ObjectMeta: metav1.ObjectMeta{Name: "cartpole-dqn", Namespace: "ns"}, Spec: div1.DIJobSpec{
				Group: "xxx", PriorityClassName: "high", CleanPodPolicy: div1.CleanPodPolicyRunning, Volumes: volumes,
				Coordinator: &div1.CoordinatorSpec{Template: template("coordinator")},
				Collector:   &div1.CollectorSpec{Template: template("collector")},
				Learner:     &div1.LearnerSpec{Template: template("learner")},
			}},
			want: div2.DIJob{TypeMeta: v2Meta, ObjectMeta: metav1.ObjectMeta{Name: "cartpole-dqn", Namespace: "ns",
				Annotations: map[string]string{AnnotationV1: `{"priorityClassName":"high"}`}}, Spec: div2.DIJobSpec{
				Group: "xxx", Priority: div2.PriorityNormal, CleanPodPolicy: div2.CleanPodPolicyRunning, BackoffLimit: ptr.To[int32](3), Volumes: volumes,
				Tasks: []div2.Task{
					{Type: div2.TaskTypeNone, Name: "coordinator", Replicas: 1, Template: template("coordinator")},
					{Type: div2.TaskTypeCollector, Replicas: 1, Template: template("collector")},
					{Type: div2.TaskTypeLearner, Replicas: 1, Template: template("learner")},
				},
			}},
		},
		"a coordinator alone is one task; its status is in the v2 status": {
			in: div1.DIJob{TypeMeta: v1Meta, ObjectMeta: metav1.ObjectMeta{Name: "serial"}, Spec: div1.DIJobSpec{
				CleanPodPolicy: div1.CleanPodPolicyAll, Coordinator: &div1.CoordinatorSpec{Template: template("c")},
			}, Status: div1.DIJobStatus{Phase: div1.JobCreated, Conditions: []div1.DIJobCondition{{Type: div1.JobCreated, Status: corev1.ConditionTrue}},
				ReplicaStatus: map[div1.ReplicaType]*div1.ReplicaStatus{div1.ReplicaTypeCoordinator: {Active: 1}}}},
			want: div2.DIJob{TypeMeta: v2Meta, ObjectMeta: metav1.ObjectMeta{Name: "serial", Annotations: map[string]string{
				AnnotationV1: `{}`,
			}}, Spec: div2.DIJobSpec{
				Priority: div2.PriorityNormal, CleanPodPolicy: div2.CleanPodPolicyAll, BackoffLimit: ptr.To[int32](3),
				Tasks: []div2.Task{{Type: div2.TaskTypeNone, Name: "coordinator", Replicas: 1, Template: template("c")}},
			}, Status: div2.DIJobStatus{Phase: div2.JobStarting, Conditions: []div2.JobCondition{{Type: "Starting", Status: corev1.ConditionTrue}},
				TaskStatus: map[string]div2.TaskStatus{"coordinator": {corev1.PodRunning: 1, corev1.PodSucceeded: 0, corev1.PodFailed: 0}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ToV2(&tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tc.want, got); diff != "" {
				t.Errorf("ToV2 (-want,+got):\n%s", diff)
			}
		})
	}
}

func v2Job() *div2.DIJob {
	return &div2.DIJob{TypeMeta: v2Meta, ObjectMeta: metav1.ObjectMeta{Name: "tasks", Annotations: map[string]string{"a": "b"}}, Spec: div2.DIJobSpec{
		Group: "g", Priority: div2.PriorityHigh, CleanPodPolicy: div2.CleanPodPolicyNone, Preemptible: true, BackoffLimit: ptr.To[int32](5),
		Tasks: []div2.Task{
			{Type: div2.TaskTypeEvaluator, Name: "eval", Replicas: 2, Template: template("evaluator")},
			{Type: div2.TaskTypeCollector, Replicas: 4, Template: template("collector")},
			{Type: div2.TaskTypeLearner, Replicas: 1, Template: template("learner")},
		},
	}, Status: div2.DIJobStatus{Phase: div2.JobRestarting, Restarts: 1, Conditions: []div2.JobCondition{
		{Type: "Restarting", Status: corev1.ConditionTrue}, {Type: div2.ConditionScheduled, Status: corev1.ConditionTrue},
	}}}
}

func TestToV1ShowsAV2Job(t *testing.T) {
	got, err := ToV1(v2Job())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Annotations[AnnotationV2]; !ok {
		t.Fatalf("no %s on a v2 job read in v1alpha1: %v", AnnotationV2, got.Annotations)
	}
	if IsV1InV1alpha1(got) {
		t.Error("a v2 job read in v1alpha1 counts as a v1 job")
	}
	delete(got.Annotations, AnnotationV2)
	want := &div1.DIJob{TypeMeta: v1Meta, ObjectMeta: metav1.ObjectMeta{Name: "tasks", Annotations: map[string]string{"a": "b"}}, Spec: div1.DIJobSpec{
		Group: "g", CleanPodPolicy: div1.CleanPodPolicyNone,
		Coordinator: &div1.CoordinatorSpec{Template: template("evaluator")},
		Collector:   &div1.CollectorSpec{Template: template("collector")},
		Learner:     &div1.LearnerSpec{Template: template("learner")},
	}, Status: div1.DIJobStatus{Phase: div1.JobCreated, Conditions: []div1.DIJobCondition{
		{Type: div1.JobCreated, Status: corev1.ConditionTrue}, {Type: div1.ConditionScheduled, Status: corev1.ConditionTrue},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToV1 (-want,+got):\n%s", diff)
	}
}

// TestV2JobTakesEditsThroughV1: what v1alpha1 shows of a v2 job, edited
// there, is edited in v2alpha1; the rest stays.
func TestV2JobTakesEditsThroughV1(t *testing.T) {
	cases := map[string]struct {
		edit func(*div1.DIJob)
		want func(*div2.DIJob)
	}{
		"nothing":    {edit: func(*div1.DIJob) {}, want: func(*div2.DIJob) {}},
		"the group":  {edit: func(j *div1.DIJob) { j.Spec.Group = "h" }, want: func(j *div2.DIJob) { j.Spec.Group = "h" }},
		"the policy": {edit: func(j *div1.DIJob) { j.Spec.CleanPodPolicy = "All" }, want: func(j *div2.DIJob) { j.Spec.CleanPodPolicy = "All" }},
		"the learner's template": {
			edit: func(j *div1.DIJob) { j.Spec.Learner.Template = template("learner:2") },
			want: func(j *div2.DIJob) { j.Spec.Tasks[2].Template = template("learner:2") },
		},
		"the coordinator's template, the first task's": {
			edit: func(j *div1.DIJob) { j.Spec.Coordinator.Template = template("evaluator:2") },
			want: func(j *div2.DIJob) { j.Spec.Tasks[0].Template = template("evaluator:2") },
		},
		"the collector removed": {
			edit: func(j *div1.DIJob) { j.Spec.Collector = nil },
			want: func(j *div2.DIJob) { j.Spec.Tasks = append(j.Spec.Tasks[:1], j.Spec.Tasks[2]) },
		},
		"the status, not taken": {edit: func(j *div1.DIJob) { j.Status.Phase = div1.JobFailed }, want: func(*div2.DIJob) {}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v1, err := ToV1(v2Job())
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(v1)
			got, err := ToV2(v1)
			if err != nil {
				t.Fatal(err)
			}
			want := v2Job()
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ToV2 (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestToV2RefusesAStashThatDoesNotParse(t *testing.T) {
	job := &div1.DIJob{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationV2: "{"}}}
	if _, err := ToV2(job); err == nil {
		t.Error("ToV2 of a job whose annotation does not parse: no error")
	}
}

func TestPhasesMapToTheNearest(t *testing.T) {
	for v1, v2 := range map[div1.Phase]div2.Phase{"Created": "Starting", "Running": "Running", "Succeeded": "Succeeded", "Failed": "Failed", "Unknown": "Unknown", "Odd": "Unknown"} {
		if got := toV2Phase(v1); got != v2 {
			t.Errorf("toV2Phase(%s) = %s, want %s", v1, got, v2)
		}
	}
	for v2, v1 := range map[div2.Phase]div1.Phase{"Pending": "Created", "Starting": "Created", "Restarting": "Created", "Rescheduling": "Created", "Running": "Running", "Succeeded": "Succeeded", "Failed": "Failed", "Odd": "Unknown"} {
		if got := toV1Phase(v2); got != v1 {
			t.Errorf("toV1Phase(%s) = %s, want %s", v2, got, v1)
		}
	}
}

// TestV1StatusWrittenAsV2ReadsBackExactly: the status the operator writes
// (a v1 status as V1StatusToV2 has it) reads back in v1alpha1 exactly, with
// no stash; an older annotation's status is ignored.
func TestV1StatusWrittenAsV2ReadsBackExactly(t *testing.T) {
	at := metav1.NewTime(time.Unix(1000, 0).UTC())
	status := div1.DIJobStatus{
		Phase: div1.JobSucceeded,
		Conditions: []div1.DIJobCondition{
			{Type: div1.JobCreated, Status: corev1.ConditionTrue, Reason: "DIJobCreated", Message: "created", LastUpdateTime: at, LastTransitionTime: at},
			{Type: div1.JobRunning, Status: corev1.ConditionFalse, Reason: "DIJobRunning", LastUpdateTime: at, LastTransitionTime: at},
			{Type: div1.JobSucceeded, Status: corev1.ConditionTrue, Reason: "DIJobSucceeded", LastUpdateTime: at, LastTransitionTime: at},
		},
		ReplicaStatus: map[div1.ReplicaType]*div1.ReplicaStatus{
			div1.ReplicaTypeCoordinator: {Succeeded: 1},
			div1.ReplicaTypeCollector:   {Active: 2, Failed: 1},
			div1.ReplicaTypeLearner:     {Succeeded: 1},
			div1.ReplicaTypeAggregator:  {},
		},
	}
	v1 := &div1.DIJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "rl"}, Spec: div1.DIJobSpec{
		PriorityClassName: "high", Coordinator: &div1.CoordinatorSpec{Template: template("c")},
	}}
	v2, err := ToV2(v1)
	if err != nil {
		t.Fatal(err)
	}
	v2.Status = V1StatusToV2(&status)
	// What an older Nereid kept in the marker is not read.
	v2.Annotations[AnnotationV1] = `{"priorityClassName":"high","status":{"phase":"Failed"}}`
	if got := v2.Status.TaskStatus["collector"]; got[corev1.PodRunning] != 2 || got[corev1.PodFailed] != 1 {
		t.Errorf("collector's task status %v, want Running 2 and Failed 1", got)
	}
	back, err := ToV1(v2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(status, back.Status); diff != "" {
		t.Errorf("v1 status read back (-want,+got):\n%s", diff)
	}
	if back.Spec.PriorityClassName != "high" {
		t.Errorf("priorityClassName %q, want high", back.Spec.PriorityClassName)
	}
	if got := V1StatusOf(&v2.Status); !cmp.Equal(status, got) {
		t.Errorf("V1StatusOf (-want,+got):\n%s", cmp.Diff(status, got))
	}
}
