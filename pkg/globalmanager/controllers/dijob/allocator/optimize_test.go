package allocator

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
	"github.com/nereid-ml/nereid/pkg/globalmanager/controllers/common"
)

// A non-preemptible job A fills most of node-1, so the preemptible job B is
// split over node-1 and node-2; once A finishes, Optimize gathers B on one
// node, and then leaves it there.
func TestOptimizeGathersAPreemptibleJobOnceAJobFinishes(t *testing.T) {
	var nodes []*corev1.Node
	for _, name := range []string{"node-1", "node-2"} {
		nodes = append(nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Allocatable: resources("cpu", "4", "memory", "16Gi", "pods", "110"),
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
	}
	a := JobOf(dijob("a", task(learner, 1, resources("cpu", "3"))))
	bObject := dijob("b", task(learner, 1, resources("cpu", "1")), task(none, 1, resources("cpu", "3"), named("replay")))
	bObject.Spec.Preemptible = true
	b := JobOf(bObject)
	// podsOf returns the pods of a job placed as placement, as the DIJob
	// controller creates them.
	podsOf := func(job Job, placement Placement) []*corev1.Pod {
		var pods []*corev1.Pod
		for i, r := range job.Replicas {
			pods = append(pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%s-%d", job.Key[len("ns/"):], r.Task, r.TaskRank),
					Labels: pairs("job", job.Key[len("ns/"):])},
				Spec: corev1.PodSpec{Affinity: common.Pin(r.Affinity, placement[i]),
					Containers: []corev1.Container{{Name: "di", Resources: corev1.ResourceRequirements{Requests: r.Requests}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning},
			})
		}
		return pods
	}
	// Optimize's nodes count every pod but those of the preemptible jobs.
	ofPreemptibleJob := func(p *corev1.Pod) bool { return p.Labels["job"] == "b" }
	policy := PackAndSpread{}

	placeA, err := policy.Allocate(a, Nodes(nodes, nil, nil))
	if err != nil || !cmp.Equal(placeA, Placement{"node-1"}) {
		t.Fatalf("Allocate(a) = %v, %v; want node-1", placeA, err)
	}
	podsA := podsOf(a, placeA)
	placeB, err := policy.Allocate(b, Nodes(nodes, podsA, nil))
	if err != nil || !cmp.Equal(placeB, Placement{"node-1", "node-2"}) {
		t.Fatalf("Allocate(b) = %v, %v; want its learner on node-1, beside a, and its replay on node-2", placeB, err)
	}
	podsB := podsOf(b, placeB)
	jobs := []Job{a, b}

	moves, err := policy.Optimize(jobs, Nodes(nodes, append(podsA, podsB...), ofPreemptibleJob), map[string]Placement{"ns/a": placeA, "ns/b": placeB})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Placement{}, moves); diff != "" {
		t.Errorf("while a runs (-want,+got):\n%s", diff)
	}

	podsA[0].Status.Phase = corev1.PodSucceeded
	moves, err = policy.Optimize(jobs, Nodes(nodes, append(podsA, podsB...), ofPreemptibleJob), map[string]Placement{"ns/a": placeA, "ns/b": placeB})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Placement{"ns/b": {"node-1", "node-1"}}, moves); diff != "" {
		t.Errorf("once a finished (-want,+got):\n%s", diff)
	}

	placeB = moves["ns/b"]
	podsB = podsOf(b, placeB)
	moves, err = policy.Optimize(jobs, Nodes(nodes, append(podsA, podsB...), ofPreemptibleJob), map[string]Placement{"ns/a": placeA, "ns/b": placeB})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Placement{}, moves); diff != "" {
		t.Errorf("once b moved (-want,+got):\n%s", diff)
	}
}

// optimizedJob is ns/<name>, created created+age.
func optimizedJob(name string, preemptible bool, priority v2alpha1.Priority, age time.Duration, tasks ...v2alpha1.Task) Job {
	object := dijob(name, tasks...)
	object.Spec.Preemptible, object.Spec.Priority = preemptible, priority
	object.CreationTimestamp = metav1.NewTime(created.Add(age))
	return JobOf(object)
}

// optimizeCase is the jobs, their previous placements, the nodes, and the
// jobs Optimize moves where.
type optimizeCase struct {
	nodes    []Node
	jobs     []Job
	previous map[string]Placement
	want     map[string]Placement
}

func optimizeCases() map[string]optimizeCase {
	cases := optimizeOneJobCases()
	maps.Copy(cases, optimizeContentionCases())
	return cases
}

// optimizeOneJobCases: when a job moves, on its own.
func optimizeOneJobCases() map[string]optimizeCase {
	cpu1, cpu2 := resources("cpu", "1"), resources("cpu", "2")
	job := optimizedJob
	normal := v2alpha1.PriorityNormal
	return map[string]optimizeCase{
		"a job that is not preemptible never moves": {
			nodes:    []Node{cloudNode("n1", "4", withUsed("cpu", "1")), cloudNode("n2", "4", withUsed("cpu", "1"))},
			jobs:     []Job{job("x", false, normal, 0, task(learner, 2, cpu1))},
			previous: map[string]Placement{"ns/x": {"n1", "n2"}},
			want:     map[string]Placement{},
		},
		"a job that is not preemptible does not move even from a node that is gone": {
			nodes:    []Node{cloudNode("n1", "4")},
			jobs:     []Job{job("x", false, normal, 0, task(learner, 1, cpu1))},
			previous: map[string]Placement{"ns/x": {"gone"}},
			want:     map[string]Placement{},
		},
		"an equally good placement does not move a job": {
			nodes:    []Node{cloudNode("node-1", "4"), cloudNode("node-2", "4")},
			jobs:     []Job{job("x", true, normal, 0, task(learner, 1, cpu2), task(collector, 2, cpu1))},
			previous: map[string]Placement{"ns/x": {"node-2", "node-1", "node-2"}},
			want:     map[string]Placement{},
		},
		"a job on a node that is gone moves": {
			nodes:    []Node{cloudNode("n1", "4")},
			jobs:     []Job{job("x", true, normal, 0, task(learner, 1, cpu1))},
			previous: map[string]Placement{"ns/x": {"gone"}},
			want:     map[string]Placement{"ns/x": {"n1"}},
		},
		"a job on a cordoned node moves, even to a placement no better": {
			nodes:    []Node{cloudNode("n1", "4", cordoned), cloudNode("n2", "4"), cloudNode("n3", "4")},
			jobs:     []Job{job("x", true, normal, 0, task(learner, 2, cpu1))},
			previous: map[string]Placement{"ns/x": {"n1", "n1"}},
			want:     map[string]Placement{"ns/x": {"n2", "n2"}},
		},
		"a job whose node is gone and that fits nowhere stays": {
			nodes:    []Node{cloudNode("n1", "4", withUsed("cpu", "4"))},
			jobs:     []Job{job("x", true, normal, 0, task(learner, 1, cpu1))},
			previous: map[string]Placement{"ns/x": {"gone"}},
			want:     map[string]Placement{},
		},
		"a job whose number of replicas changed is placed again": {
			nodes:    []Node{cloudNode("n1", "4")},
			jobs:     []Job{job("x", true, normal, 0, task(learner, 2, cpu1))},
			previous: map[string]Placement{"ns/x": {"n1"}},
			want:     map[string]Placement{"ns/x": {"n1", "n1"}},
		},
		"a job without a placement is left to Allocate": {
			nodes: []Node{cloudNode("n1", "4")},
			jobs:  []Job{job("x", true, normal, 0, task(learner, 1, cpu1))},
			want:  map[string]Placement{},
		},
		"an edge collector whose node is gone moves to another edge node, never to the cloud": {
			nodes:    []Node{cloudNode("cloud-1", "4"), edgeNode("edge-2", "4", withUsed("cpu", "3"))},
			jobs:     []Job{job("x", true, normal, 0, task(collector, 1, cpu1, selecting(EdgeNodeLabel, "")))},
			previous: map[string]Placement{"ns/x": {"edge-1"}},
			want:     map[string]Placement{"ns/x": {"edge-2"}},
		},
	}
}

// optimizeContentionCases: which of two jobs contending for room moves.
func optimizeContentionCases() map[string]optimizeCase {
	cpu2 := resources("cpu", "2")
	job := optimizedJob
	normal, high := v2alpha1.PriorityNormal, v2alpha1.PriorityHigh
	// Two jobs X and Y, each split over two nodes that have room for one of
	// its replicas only, and room for one of them on big.
	contention := []Node{
		cloudNode("big", "8", withUsed("cpu", "4")),
		cloudNode("n-a", "4", withUsed("cpu", "2")), cloudNode("n-b", "4", withUsed("cpu", "2")),
		cloudNode("n-c", "4", withUsed("cpu", "2")), cloudNode("n-d", "4", withUsed("cpu", "2")),
	}
	contended := map[string]Placement{"ns/x": {"n-a", "n-b"}, "ns/y": {"n-c", "n-d"}}
	return map[string]optimizeCase{
		"the high-priority job takes the room first": {
			nodes: contention,
			jobs: []Job{
				job("y", true, high, time.Hour, task(learner, 2, cpu2)),
				job("x", true, normal, 0, task(learner, 2, cpu2)),
			},
			previous: contended,
			want:     map[string]Placement{"ns/y": {"big", "big"}},
		},
		"of equal priority the older job takes the room first": {
			nodes: contention,
			jobs: []Job{
				job("y", true, normal, 0, task(learner, 2, cpu2)),
				job("x", true, normal, time.Hour, task(learner, 2, cpu2)),
			},
			previous: contended,
			want:     map[string]Placement{"ns/y": {"big", "big"}},
		},
		"of equal priority and age the first by key takes the room first": {
			nodes: contention,
			jobs: []Job{
				job("y", true, normal, 0, task(learner, 2, cpu2)),
				job("x", true, normal, 0, task(learner, 2, cpu2)),
			},
			previous: contended,
			want:     map[string]Placement{"ns/x": {"big", "big"}},
		},
		"a job moves only into room no other job holds, even one considered after it": {
			nodes: contention,
			jobs: []Job{
				job("y", true, high, 0, task(learner, 2, cpu2)),
				job("z", true, normal, 0, task(learner, 2, cpu2)),
			},
			previous: map[string]Placement{"ns/y": {"n-c", "n-d"}, "ns/z": {"big", "big"}},
			want:     map[string]Placement{},
		},
	}
}

func TestOptimizeMovesOnlyPreemptibleJobsThatGainOrMust(t *testing.T) {
	tests := optimizeCases()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := PackAndSpread{}.Optimize(tc.jobs, tc.nodes, tc.previous)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestOptimizeRefusesAJobListedTwice(t *testing.T) {
	job := jobOf(task(learner, 1, resources("cpu", "1")))
	got, err := PackAndSpread{}.Optimize([]Job{job, job}, []Node{cloudNode("n1", "4")}, nil)
	if got != nil || err == nil {
		t.Errorf("Optimize = %v, %v; want an error", got, err)
	}
}
