package conversion

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	div1 "github.com/nereid-ml/nereid/pkg/apis/diengine/v1alpha1"
	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// The annotations the conversion owns (see the package doc).
const (
	// AnnotationV1 marks, on a v2alpha1 DIJob, a job written as v1alpha1,
	// and holds what v2alpha1's spec cannot: JSON of its priorityClassName.
	// Its v1 status is in the v2alpha1 status (V1StatusToV2), which the
	// operator writes through the status subresource: a write there cannot
	// change an annotation.
	AnnotationV1 = "dijob.nereid.io/v1alpha1"
	// AnnotationV2 holds, on a v1alpha1 DIJob, JSON of what v1alpha1 cannot
	// show of the v2alpha1 job.
	AnnotationV2 = "dijob.nereid.io/v2alpha1"
)

// CoordinatorTask is the name of the task a v1 job's coordinator becomes.
const CoordinatorTask = "coordinator"

// The v2alpha1 defaults a v1 job's fields take, as the CRD would set them:
// written out, they read back the same.
const defaultBackoffLimit = 3

// IsV1 says whether a v2alpha1 DIJob is a job written as v1alpha1, which
// the DIJob controller runs as DI-orchestrator v0.2 did (coordinator-driven)
// rather than by its tasks.
func IsV1(job *div2.DIJob) bool {
	_, ok := job.Annotations[AnnotationV1]
	return ok
}

// IsV1InV1alpha1 says whether a v1alpha1 DIJob is a v1 job (not a v2 job
// shown in v1alpha1).
func IsV1InV1alpha1(job *div1.DIJob) bool {
	raw, ok := job.Annotations[AnnotationV2]
	if !ok {
		return true
	}
	var s v2Stash
	return json.Unmarshal([]byte(raw), &s) == nil && s.V1 != nil
}

// v1Extra is AnnotationV1's value: what a v1 job's spec has that v2alpha1
// has no field for. A "status" key that an older Nereid wrote there is
// ignored: the status is in the v2alpha1 status now.
type v1Extra struct {
	PriorityClassName div1.PriorityClassName `json:"priorityClassName,omitempty"`
}

// v2Stash is AnnotationV2's value: a v2alpha1 job without the fields its
// v1alpha1 object shows, and its AnnotationV1 when it is a v1 job.
type v2Stash struct {
	Spec   div2.DIJobSpec   `json:"spec"`
	Status div2.DIJobStatus `json:"status"`
	V1     *string          `json:"v1,omitempty"`
}

// ToV2 converts a v1alpha1 DIJob to v2alpha1.
func ToV2(in *div1.DIJob) (*div2.DIJob, error) {
	if raw, ok := in.Annotations[AnnotationV2]; ok {
		return restore(in, raw)
	}
	return fromV1(in)
}

// ToV1 converts a v2alpha1 DIJob to v1alpha1.
func ToV1(in *div2.DIJob) (*div1.DIJob, error) {
	out := view(in)
	if IsV1(in) {
		// A v1 job that v1alpha1 shows whole needs no stash. Its progress
		// (replicas, readyReplicas, tasksReady) is the operator's count of
		// its pods for the default view, written again at every sync, which
		// v1alpha1 shows as replicaStatus: it needs none either.
		back, err := fromV1(out)
		if err != nil {
			return nil, err
		}
		shown := in.DeepCopy()
		shown.Status.Replicas, shown.Status.ReadyReplicas, shown.Status.TasksReady = 0, 0, ""
		if same, err := sameJSON(back, shown); err != nil {
			return nil, err
		} else if same {
			return out, nil
		}
	}
	s := v2Stash{Spec: *in.Spec.DeepCopy(), Status: *in.Status.DeepCopy()}
	if raw, ok := in.Annotations[AnnotationV1]; ok {
		// The object shows the marker's fields; one that does not parse
		// travels as it is.
		if json.Unmarshal([]byte(raw), &v1Extra{}) == nil {
			raw = "{}"
		}
		s.V1 = &raw
	}
	blank(&s.Spec, slots(&in.Spec, IsV1(in)))
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding annotation %s: %w", AnnotationV2, err)
	}
	setAnnotation(&out.ObjectMeta, AnnotationV2, string(raw))
	return out, nil
}

// fromV1 is the v2alpha1 job of a v1 job.
func fromV1(in *div1.DIJob) (*div2.DIJob, error) {
	out := &div2.DIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: div2.SchemeGroupVersion.String(), Kind: div2.DIJobKind.Kind},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: div2.DIJobSpec{
			Group:          in.Spec.Group,
			Priority:       div2.PriorityNormal,
			CleanPodPolicy: div2.CleanPodPolicy(in.Spec.CleanPodPolicy),
			BackoffLimit:   ptr.To[int32](defaultBackoffLimit),
			Volumes:        deepCopyVolumes(in.Spec.Volumes),
			JobLifecycle:   lifecycleToV2(&in.Spec.JobLifecycle),
		},
		Status: V1StatusToV2(&in.Status),
	}
	if c := in.Spec.Coordinator; c != nil {
		out.Spec.Tasks = append(out.Spec.Tasks, div2.Task{Type: div2.TaskTypeNone, Name: CoordinatorTask, Replicas: 1, Template: *c.Template.DeepCopy()})
	}
	if c := in.Spec.Collector; c != nil {
		out.Spec.Tasks = append(out.Spec.Tasks, div2.Task{Type: div2.TaskTypeCollector, Replicas: 1, Template: *c.Template.DeepCopy()})
	}
	if l := in.Spec.Learner; l != nil {
		out.Spec.Tasks = append(out.Spec.Tasks, div2.Task{Type: div2.TaskTypeLearner, Replicas: 1, Template: *l.Template.DeepCopy()})
	}
	marker, err := v1ExtraOf(in)
	if err != nil {
		return nil, err
	}
	setAnnotation(&out.ObjectMeta, AnnotationV1, marker)
	return out, nil
}

// v1ExtraOf is AnnotationV1's value for a v1 job.
func v1ExtraOf(in *div1.DIJob) (string, error) {
	extra := v1Extra{PriorityClassName: in.Spec.PriorityClassName}
	raw, err := json.Marshal(extra)
	if err != nil {
		return "", fmt.Errorf("encoding annotation %s: %w", AnnotationV1, err)
	}
	return string(raw), nil
}

// view is the v1alpha1 object of a v2alpha1 job, without its stash.
func view(in *div2.DIJob) *div1.DIJob {
	out := &div1.DIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: div1.SchemeGroupVersion.String(), Kind: div1.DIJobKind.Kind},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec: div1.DIJobSpec{
			Group:          in.Spec.Group,
			CleanPodPolicy: div1.CleanPodPolicy(in.Spec.CleanPodPolicy),
			Volumes:        deepCopyVolumes(in.Spec.Volumes),
			JobLifecycle:   div1.JobLifecycle(*in.Spec.JobLifecycle.DeepCopy()),
		},
	}
	deleteAnnotation(&out.ObjectMeta, AnnotationV1)
	v1 := IsV1(in)
	if v1 {
		var extra v1Extra
		// A marker that does not parse reads as empty: ToV1 then stashes
		// the whole job, marker included.
		_ = json.Unmarshal([]byte(in.Annotations[AnnotationV1]), &extra)
		out.Spec.PriorityClassName = extra.PriorityClassName
		out.Status = V1StatusOf(&in.Status)
	} else {
		out.Status = statusToV1(&in.Status)
	}
	s := slots(&in.Spec, v1)
	if s.coordinator >= 0 {
		out.Spec.Coordinator = &div1.CoordinatorSpec{Template: *in.Spec.Tasks[s.coordinator].Template.DeepCopy()}
	}
	if s.collector >= 0 {
		out.Spec.Collector = &div1.CollectorSpec{Template: *in.Spec.Tasks[s.collector].Template.DeepCopy()}
	}
	if s.learner >= 0 {
		out.Spec.Learner = &div1.LearnerSpec{Template: *in.Spec.Tasks[s.learner].Template.DeepCopy()}
	}
	return out
}

// restore is the v2alpha1 job of a v1alpha1 object that carries a stash:
// the stash, with the fields the object shows taken from it.
func restore(in *div1.DIJob, raw string) (*div2.DIJob, error) {
	var s v2Stash
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return nil, fmt.Errorf("annotation %s does not parse: %w", AnnotationV2, err)
	}
	out := &div2.DIJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: div2.SchemeGroupVersion.String(), Kind: div2.DIJobKind.Kind},
		ObjectMeta: *in.ObjectMeta.DeepCopy(),
		Spec:       s.Spec,
		Status:     s.Status,
	}
	deleteAnnotation(&out.ObjectMeta, AnnotationV2)
	spec := &out.Spec
	spec.Group, spec.CleanPodPolicy, spec.Volumes = in.Spec.Group, div2.CleanPodPolicy(in.Spec.CleanPodPolicy), deepCopyVolumes(in.Spec.Volumes)
	spec.JobLifecycle = lifecycleToV2(&in.Spec.JobLifecycle)
	v1 := s.V1 != nil
	if v1 {
		marker := *s.V1
		if json.Unmarshal([]byte(marker), &v1Extra{}) == nil {
			var err error
			if marker, err = v1ExtraOf(in); err != nil {
				return nil, err
			}
		}
		setAnnotation(&out.ObjectMeta, AnnotationV1, marker)
	}
	// The templates the object shows, into the tasks they came from; the
	// collector and learner last, so they win where a template was shown
	// twice. A collector or learner the object no longer has goes.
	at := slots(spec, v1)
	drop := map[int]bool{}
	put := func(i int, t *corev1.PodTemplateSpec, shown bool) {
		switch {
		case i < 0:
		case !shown:
			drop[i] = i != at.coordinator
		default:
			spec.Tasks[i].Template = *t.DeepCopy()
		}
	}
	if c := in.Spec.Coordinator; c != nil {
		put(at.coordinator, &c.Template, true)
	}
	if c := in.Spec.Collector; c != nil {
		put(at.collector, &c.Template, true)
	} else {
		put(at.collector, nil, false)
	}
	if l := in.Spec.Learner; l != nil {
		put(at.learner, &l.Template, true)
	} else {
		put(at.learner, nil, false)
	}
	tasks := spec.Tasks[:0]
	for i, t := range spec.Tasks {
		if !drop[i] {
			tasks = append(tasks, t)
		}
	}
	if len(tasks) < len(spec.Tasks) {
		spec.Tasks = tasks
	}
	return out, nil
}

// taskSlots are the indexes of the tasks a v1alpha1 object shows as its
// coordinator, collector and learner; -1 for none.
type taskSlots struct{ coordinator, collector, learner int }

// slots finds them: a v1 job's coordinator is its task of type none named
// coordinator, a v2 job's its first task.
func slots(spec *div2.DIJobSpec, v1 bool) taskSlots {
	s := taskSlots{-1, -1, -1}
	for i, t := range spec.Tasks {
		switch {
		case v1 && s.coordinator < 0 && t.Type == div2.TaskTypeNone && t.Name == CoordinatorTask:
			s.coordinator = i
		case t.Type == div2.TaskTypeCollector && s.collector < 0:
			s.collector = i
		case t.Type == div2.TaskTypeLearner && s.learner < 0:
			s.learner = i
		}
	}
	if !v1 && len(spec.Tasks) > 0 {
		s.coordinator = 0
	}
	return s
}

// blank clears in a stash's spec what the v1alpha1 object shows, at.
func blank(spec *div2.DIJobSpec, at taskSlots) {
	spec.Group, spec.CleanPodPolicy, spec.Volumes = "", "", nil
	spec.JobLifecycle = div2.JobLifecycle{}
	for _, i := range []int{at.coordinator, at.collector, at.learner} {
		if i >= 0 {
			spec.Tasks[i].Template = corev1.PodTemplateSpec{}
		}
	}
}

// lifecycleToV2 is a v1alpha1 job's lifecycle fields in v2alpha1, the same
// fields.
func lifecycleToV2(in *div1.JobLifecycle) div2.JobLifecycle {
	return div2.JobLifecycle(*in.DeepCopy())
}

func deepCopyVolumes(in []corev1.Volume) []corev1.Volume {
	if in == nil {
		return nil
	}
	out := make([]corev1.Volume, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

func setAnnotation(m *metav1.ObjectMeta, key, value string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
}

func deleteAnnotation(m *metav1.ObjectMeta, key string) {
	if _, ok := m.Annotations[key]; !ok {
		return
	}
	delete(m.Annotations, key)
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
}

// sameJSON says whether a and b encode alike: what the API server sees.
func sameJSON(a, b any) (bool, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ja, jb), nil
}
