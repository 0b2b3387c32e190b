package dashboard

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// maxEvents is how many of a job's events the page shows: the latest.
const maxEvents = 50

// Event is one event about a job, as `kubectl describe` lists them.
type Event struct {
	Type    string `json:"type"` // Normal or Warning
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// From is the component that reported it.
	From  string    `json:"from,omitempty"`
	Count int32     `json:"count"`
	Last  time.Time `json:"last"`
}

// readEvents reads the events about the job kind namespace/name, oldest
// first, the last maxEvents of them.
func readEvents(ctx context.Context, kube kubernetes.Interface, kind, namespace, name string) ([]Event, error) {
	selector := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	list, err := kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing the events of %s %s/%s: %w", kind, namespace, name, err)
	}
	var events []Event
	for i := range list.Items {
		e := &list.Items[i]
		// The API server selects; this keeps a server (or a fake) that
		// ignores field selectors from showing another object's events.
		if e.InvolvedObject.Kind != kind || e.InvolvedObject.Name != name {
			continue
		}
		events = append(events, toEvent(e))
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].Last.Before(events[j].Last) })
	if len(events) > maxEvents {
		events = events[len(events)-maxEvents:]
	}
	return events, nil
}

// toEvent is what the page shows of e: its last time is the latest it
// has of the series, the last seen, the event time, or its creation.
func toEvent(e *corev1.Event) Event {
	last := e.CreationTimestamp.Time
	for _, t := range []time.Time{e.EventTime.Time, e.FirstTimestamp.Time, e.LastTimestamp.Time} {
		if t.After(last) {
			last = t
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(last) {
		last = e.Series.LastObservedTime.Time
	}
	count := e.Count
	if e.Series != nil && e.Series.Count > count {
		count = e.Series.Count
	}
	from := e.ReportingController
	if from == "" {
		from = e.Source.Component
	}
	return Event{Type: e.Type, Reason: e.Reason, Message: e.Message, From: from, Count: max(count, 1), Last: last}
}
