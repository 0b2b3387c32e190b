package dashboard

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestReadEventsIsTheJobsOwnOldestFirst(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	event := func(name, kind, object string, last time.Time, series *corev1.EventSeries) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Namespace: "demo", Name: name, CreationTimestamp: metav1.NewTime(t0)},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: "demo", Name: object},
			Type:           corev1.EventTypeNormal, Reason: name, Message: "m " + name,
			Source:        corev1.EventSource{Component: "nereid-globalmanager"},
			LastTimestamp: metav1.NewTime(last), Series: series,
		}
	}
	kube := fake.NewClientset(
		event("late", "FederatedLearningJob", "fl", t0.Add(2*time.Minute), nil),
		event("early", "FederatedLearningJob", "fl", t0.Add(time.Minute), nil),
		event("series", "FederatedLearningJob", "fl", t0, &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(t0.Add(3 * time.Minute))}),
		event("other-object", "FederatedLearningJob", "fl-2", t0, nil),
		event("other-kind", "Pod", "fl", t0, nil),
	)
	got, err := readEvents(t.Context(), kube, "FederatedLearningJob", "demo", "fl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Type: "Normal", Reason: "early", Message: "m early", From: "nereid-globalmanager", Count: 1, Last: t0.Add(time.Minute)},
		{Type: "Normal", Reason: "late", Message: "m late", From: "nereid-globalmanager", Count: 1, Last: t0.Add(2 * time.Minute)},
		{Type: "Normal", Reason: "series", Message: "m series", From: "nereid-globalmanager", Count: 7, Last: t0.Add(3 * time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("readEvents (-want,+got):\n%s", diff)
	}
}
