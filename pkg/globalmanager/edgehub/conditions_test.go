package edgehub

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	sednav1 "github.com/nereid-ml/nereid/pkg/apis/sedna/v1alpha1"
	sednafake "github.com/nereid-ml/nereid/pkg/client/clientset/versioned/fake"
	sednainformers "github.com/nereid-ml/nereid/pkg/client/informers/externalversions"
	"github.com/nereid-ml/nereid/pkg/edgeproto"
	"github.com/nereid-ml/nereid/pkg/globalmanager/edgehub/edgehubtest"
	"github.com/nereid-ml/nereid/pkg/globalmanager/kinds"
)

// Every kind the hub sends keeps the EdgeSynced condition in its status, once,
// and writes it with its own client.
func TestEveryKindKeepsTheEdgeSyncedCondition(t *testing.T) {
	objs := map[string]runtime.Object{
		"Dataset":                edgehubtest.Dataset("ds", "edge-a"),
		"Model":                  edgehubtest.Model("m"),
		"FederatedLearningJob":   edgehubtest.FederatedJob("fl", "cloud", "edge-a"),
		"JointInferenceService":  &sednav1.JointInferenceService{ObjectMeta: edgehubtest.Meta("ji")},
		"IncrementalLearningJob": edgehubtest.IncrementalJob("il", "ds", "edge-a"),
		"LifelongLearningJob":    &sednav1.LifelongLearningJob{ObjectMeta: edgehubtest.Meta("ll")},
	}
	var all []runtime.Object
	for _, o := range objs {
		all = append(all, o)
	}
	client := sednafake.NewSimpleClientset(all...)
	sent := edgeKinds(kinds.All(), client, sednainformers.NewSharedInformerFactory(client, 0))
	if len(sent) != len(objs) {
		t.Fatalf("%d kinds, the test covers %d: every kind sent to the edge must keep a condition list the hub knows", len(sent), len(objs))
	}
	now := metav1.NewTime(time.Unix(1000, 0))
	failed := unsendableCondition(edgeproto.ErrTooLarge)
	for _, k := range sent {
		obj := objs[k.Name].DeepCopyObject().(metav1.Object)
		if got, _ := k.conditions.status(obj, ConditionEdgeSynced); got != "" {
			t.Errorf("%s: status %q before any was set", k.Name, got)
		}
		if !k.conditions.set(obj, failed, now) {
			t.Errorf("%s: setting the condition changed nothing", k.Name)
		}
		if k.conditions.set(obj, failed, now) {
			t.Errorf("%s: setting the same condition again changed something", k.Name)
		}
		if got, _ := k.conditions.status(obj, ConditionEdgeSynced); got != corev1.ConditionFalse {
			t.Errorf("%s: status %q, want False", k.Name, got)
		}
		if err := k.conditions.update(t.Context(), obj); err != nil {
			t.Fatalf("%s: %v", k.Name, err)
		}
		if !k.conditions.set(obj, sentCondition, now) || func() bool { st, _ := k.conditions.status(obj, ConditionEdgeSynced); return st != corev1.ConditionTrue }() {
			t.Errorf("%s: setting it True did not take", k.Name)
		}
	}
	il, err := client.SednaV1alpha1().IncrementalLearningJobs("default").Get(t.Context(), "il", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A learning cycle's conditions are its stage transitions, as Sedna's;
	// the condition goes with the job's other conditions about itself.
	if len(il.Status.Conditions) != 0 || len(il.Status.JobConditions) != 1 || il.Status.JobConditions[0].Type != ConditionEdgeSynced {
		t.Errorf("IncrementalLearningJob status %+v, want the condition in jobConditions alone", il.Status)
	}
}

// A wave of wanted conditions (every object of a fleet, once) does not keep
// its room once written: the emptied map is made again. A small one is kept.
func TestConditionWriterGivesBackTheRoomOfAWave(t *testing.T) {
	w := newConditionWriter(&Hub{clock: clocktesting.NewFakeClock(time.Now())})
	defer w.queue.ShutDown()
	ref := func(i int) edgeproto.ObjectRef {
		return edgeproto.ObjectRef{Kind: "Dataset", Namespace: "ns", Name: fmt.Sprintf("d-%d", i)}
	}
	same := func(a, b map[conditionKey]syncCondition) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	for _, c := range []struct {
		objects int
		remade  bool
	}{{shrinkPast, false}, {1000, true}} {
		before := w.want
		for i := range c.objects {
			w.wants(ref(i), sentCondition)
		}
		for i := range c.objects - 1 {
			w.forget(ref(i), sentCondition)
		}
		if !same(before, w.want) {
			t.Fatalf("%d wanted: the map was made again before it was empty", c.objects)
		}
		w.forget(ref(c.objects-1), sentCondition)
		if len(w.want) != 0 || same(before, w.want) != !c.remade {
			t.Errorf("%d wanted, then written: %d left, made again %v, want 0 left, made again %v", c.objects, len(w.want), !same(before, w.want), c.remade)
		}
	}
}
