package common

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
)

func TestAReferenceEnqueuesItsOwnersUnlessOnlyItsStatusChanged(t *testing.T) {
	const byDataset = "test/dataset"
	owners := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{byDataset: func(obj any) ([]string, error) {
		job := obj.(*sednav1.FederatedLearningJob)
		return []string{job.Namespace + "/" + job.Annotations["dataset"]}, nil
	}})
	for _, name := range []string{"a", "b"} {
		job := &sednav1.FederatedLearningJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: map[string]string{"dataset": "d"}}}
		if err := owners.Add(job); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	h := ReferenceHandler(owners, byDataset, func(key string) { got = append(got, key) })

	ds := &sednav1.Dataset{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns", UID: "first", Generation: 1, ResourceVersion: "1",
		Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "1"}}}
	change := func(f func(d *sednav1.Dataset)) *sednav1.Dataset {
		d := ds.DeepCopy()
		d.ResourceVersion = "2"
		f(d)
		return d
	}
	now := metav1.Now()
	for name, tc := range map[string]struct {
		new  *sednav1.Dataset
		want bool
	}{
		"status": {change(func(d *sednav1.Dataset) { d.Status.NumberOfSamples = 7 }), false},
		"readability": {change(func(d *sednav1.Dataset) {
			d.Status.Conditions = []metav1.Condition{{Type: DatasetReadable, Status: metav1.ConditionFalse, Reason: "IndexFileUnreadable"}}
		}), true},
		"resync":            {ds, false},
		"spec (generation)": {change(func(d *sednav1.Dataset) { d.Generation = 2 }), true},
		"labels":            {change(func(d *sednav1.Dataset) { d.Labels["l"] = "2" }), true},
		"annotations":       {change(func(d *sednav1.Dataset) { d.Annotations = nil }), true},
		"finalizers":        {change(func(d *sednav1.Dataset) { d.Finalizers = []string{"f"} }), true},
		"deletion":          {change(func(d *sednav1.Dataset) { d.DeletionTimestamp = &now }), true},
		// Deleted and made again with another spec while the watch was
		// down: the relist's update has the same generation, 1.
		"recreation": {change(func(d *sednav1.Dataset) { d.UID = "another" }), true},
	} {
		got = nil
		h.OnUpdate(ds, tc.new)
		slices.Sort(got)
		if want := []string{"ns/a", "ns/b"}; tc.want && !slices.Equal(got, want) || !tc.want && got != nil {
			t.Errorf("update of the dataset's %s enqueued %v, want owners: %v", name, got, tc.want)
		}
	}
	got = nil
	h.OnAdd(ds, false)
	h.OnDelete(ds)
	if len(got) != 4 {
		t.Errorf("add and delete enqueued %v, want both owners twice", got)
	}
}

// A mark a controller wrote on a pod holds its owner's expectations until
// the pod handler sees the pod carry it, or the pod go, or the write fail.
func TestAMarkIsExpectedUntilThePodHandlerSeesIt(t *testing.T) {
	gvk := sednav1.SchemeGroupVersion.WithKind("FederatedLearningJob")
	exp := NewExpectations()
	h := PodHandler(gvk, exp, func(string) {})
	const key = "ns/job"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "pod-uid", ResourceVersion: "1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: "job", UID: "job-uid", Controller: ptr.To(true)}}}}
	update := func(f func(p *corev1.Pod)) *corev1.Pod {
		p := pod.DeepCopy()
		p.ResourceVersion = "2"
		f(p)
		h.OnUpdate(pod, p)
		return p
	}

	exp.ExpectMark(key, pod.UID, "nereid.io/move", "1")
	if exp.Satisfied(key) {
		t.Fatal("satisfied with a mark not yet seen")
	}
	update(func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
	if exp.Satisfied(key) {
		t.Fatal("satisfied by an update of the pod without the mark")
	}
	update(func(p *corev1.Pod) { p.Annotations = map[string]string{"nereid.io/move": "2"} })
	if exp.Satisfied(key) {
		t.Fatal("satisfied by another value of the mark")
	}
	update(func(p *corev1.Pod) { p.Annotations = map[string]string{"nereid.io/move": "1"} })
	if !exp.Satisfied(key) {
		t.Fatal("not satisfied once the pod carries the mark")
	}

	exp.ExpectMark(key, pod.UID, "nereid.io/move", "2")
	h.OnDelete(pod)
	if !exp.Satisfied(key) {
		t.Fatal("not satisfied once the marked pod is gone")
	}
	exp.ExpectMark(key, pod.UID, "nereid.io/move", "3")
	exp.MarkFailed(key, pod.UID)
	if !exp.Satisfied(key) {
		t.Fatal("not satisfied once the mark's write failed")
	}
}

// A child whose controller is not its owner (a service's pod) syncs the
// owner its owner-uid label names in its own namespace, on every event.
func TestALabelledChildEnqueuesTheOwnerItsLabelNames(t *testing.T) {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &sednav1.JointInferenceService{}, 0, cache.Indexers{})
	owners, err := IndexByUID(inf)
	if err != nil {
		t.Fatal(err)
	}
	if err := owners.Add(&sednav1.JointInferenceService{ObjectMeta: metav1.ObjectMeta{Name: "ji", Namespace: "ns", UID: "ji-uid"}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	h := LabelledChildHandler(owners, func(key string) { got = append(got, key) })
	pod := func(ns, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, Labels: map[string]string{LabelOwnerUID: uid}}}
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want []string
	}{
		"its pod":                     {pod("ns", "ji-uid"), []string{"ns/ji", "ns/ji", "ns/ji", "ns/ji"}},
		"a pod of another namespace":  {pod("other", "ji-uid"), nil},
		"a pod of no owner it caches": {pod("ns", "gone"), nil},
		"a pod without the label":     {pod("ns", ""), nil},
	} {
		got = nil
		h.OnAdd(tc.pod, false)
		h.OnUpdate(tc.pod, tc.pod)
		h.OnDelete(tc.pod)
		h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: tc.pod})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: enqueued %v, want %v", name, got, tc.want)
		}
	}
}
