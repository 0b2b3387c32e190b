package common

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// The recorder remembers EventCacheKeys recent events: a repeat among them
// updates its Event's count, one after a wave of more others makes a new
// Event, and what it remembers stays bounded however many objects a fleet's
// wave touches.
func TestTheEventRecorderRemembersABoundedNumberOfEvents(t *testing.T) {
	client := kubefake.NewClientset()
	recorder := NewEventRecorder(t.Context(), client)
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: "uid"}}
	}
	recorded := 0
	// record records the event of pod i and waits until it is written: the
	// broadcaster drops what a full queue cannot take.
	record := func(i int) clienttesting.Action {
		t.Helper()
		recorder.Event(pod(i), corev1.EventTypeNormal, "Linked", "its node's LocalController connected")
		recorded++
		deadline := time.Now().Add(10 * time.Second)
		for {
			var writes []clienttesting.Action
			for _, a := range client.Actions() {
				if a.GetResource().Resource == "events" {
					writes = append(writes, a)
				}
			}
			if len(writes) == recorded {
				return writes[len(writes)-1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d events written, want %d", len(writes), recorded)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	record(0)
	for i := 1; i <= 10; i++ {
		record(i)
	}
	if a := record(0); a.GetVerb() != "patch" {
		t.Fatalf("a repeat after 10 other events was a %s, want the first Event's count patched", a.GetVerb())
	}
	for i := 11; i <= EventCacheKeys+10; i++ {
		record(i)
	}
	if a := record(0); a.GetVerb() != "create" {
		t.Fatalf("a repeat after %d other events was a %s, want a new Event (the recorder remembers only %d)", EventCacheKeys, a.GetVerb(), EventCacheKeys)
	}
}
