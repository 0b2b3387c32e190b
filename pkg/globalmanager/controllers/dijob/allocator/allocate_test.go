package allocator

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// allocateCase is a job, the nodes, and where Allocate places each replica.
type allocateCase struct {
	nodes []Node
	job   Job
	want  Placement
}

func allocateCases() map[string]allocateCase {
	cases := allocateCloudCases()
	maps.Copy(cases, allocateEdgeAndResourceCases())
	return cases
}

// allocateCloudCases: packing, spreading, and the nodes a replica may use.
func allocateCloudCases() map[string]allocateCase {
	cpu1 := resources("cpu", "1")
	return map[string]allocateCase{
		"learners pack onto the fullest node they fit on": {
			nodes: []Node{cloudNode("a", "4", withUsed("cpu", "1")), cloudNode("b", "4", withUsed("cpu", "2")), cloudNode("c", "4")},
			job:   jobOf(task(learner, 2, cpu1)),
			want:  Placement{"b", "b"},
		},
		"a learner goes to an emptier node when the fullest has no room": {
			nodes: []Node{cloudNode("a", "4", withUsed("cpu", "3500m")), cloudNode("b", "4", withUsed("cpu", "1"))},
			job:   jobOf(task(learner, 1, cpu1)),
			want:  Placement{"b"},
		},
		"collectors spread: the node with the fewest replicas of the job, then the emptiest": {
			nodes: []Node{cloudNode("a", "4"), cloudNode("b", "4", withUsed("cpu", "1")), cloudNode("c", "4")},
			job:   jobOf(task(learner, 1, cpu1), task(collector, 3, cpu1)),
			want:  Placement{"b", "a", "c", "a"},
		},
		"a collector goes to a node without the job's replicas before an emptier one with them": {
			nodes: []Node{cloudNode("a", "16"), cloudNode("b", "4", withUsed("cpu", "1"))},
			job:   jobOf(task(collector, 2, cpu1)),
			want:  Placement{"a", "b"},
		},
		"evaluators and tasks of type none pack like learners": {
			nodes: []Node{cloudNode("a", "4"), cloudNode("b", "4")},
			job:   jobOf(task(evaluator, 1, cpu1), task(none, 2, cpu1, named("replay"))),
			want:  Placement{"a", "a", "a"},
		},
		"packed replicas are placed before the collectors, the placement stays in rank order": {
			nodes: []Node{cloudNode("a", "4"), cloudNode("b", "4")},
			job:   jobOf(task(collector, 2, cpu1), task(learner, 1, cpu1)),
			want:  Placement{"b", "a", "a"},
		},
		"ties go to the first name, whatever the order of the nodes": {
			nodes: []Node{cloudNode("z", "4"), cloudNode("m", "4"), cloudNode("a", "4")},
			job:   jobOf(task(learner, 1, cpu1)),
			want:  Placement{"a"},
		},
		"a nodeSelector keeps a replica to the nodes it selects": {
			nodes: []Node{cloudNode("a", "4", withUsed("cpu", "3")), cloudNode("b", "4", withLabels("gpu", "true"))},
			job:   jobOf(task(learner, 1, cpu1, selecting("gpu", "true"))),
			want:  Placement{"b"},
		},
		"required node affinity is honoured, preferred node affinity ignored": {
			nodes: []Node{
				cloudNode("a", "4", withLabels("zone", "1"), withUsed("cpu", "3")),
				cloudNode("b", "4", withLabels("zone", "2"), withUsed("cpu", "1")),
				cloudNode("c", "4", withLabels("zone", "3")),
			},
			job: jobOf(task(learner, 1, cpu1,
				requiring(expression("zone", corev1.NodeSelectorOpNotIn, "1")),
				preferring(100, expression("zone", corev1.NodeSelectorOpIn, "3")))),
			want: Placement{"b"},
		},
		"required node affinity may name the node": {
			nodes: []Node{cloudNode("a", "4", withUsed("cpu", "3")), cloudNode("b", "4")},
			job: jobOf(task(learner, 1, cpu1, requiring(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}}))),
			want: Placement{"b"},
		},
		"a NoSchedule or NoExecute taint keeps off a replica without a toleration, PreferNoSchedule does not": {
			nodes: []Node{
				cloudNode("a", "4", withUsed("cpu", "3"), withTaint("gpu", "true", corev1.TaintEffectNoSchedule)),
				cloudNode("b", "4", withUsed("cpu", "2"), withTaint("maintenance", "", corev1.TaintEffectNoExecute)),
				cloudNode("c", "4", withUsed("cpu", "1"), withTaint("spot", "true", corev1.TaintEffectPreferNoSchedule)),
				cloudNode("d", "4"),
			},
			job:  jobOf(task(learner, 1, cpu1)),
			want: Placement{"c"},
		},
		"a tolerated taint is no bar": {
			nodes: []Node{cloudNode("a", "4", withUsed("cpu", "2"), withTaint("gpu", "true", corev1.TaintEffectNoSchedule)), cloudNode("b", "4")},
			job:   jobOf(task(learner, 1, cpu1, tolerating("gpu", corev1.TolerationOpExists, "", ""))),
			want:  Placement{"a"},
		},
		"cordoned and not-ready nodes take no replica": {
			nodes: []Node{cloudNode("a", "4", withUsed("cpu", "2"), cordoned), cloudNode("b", "4")},
			job:   jobOf(task(learner, 1, cpu1)),
			want:  Placement{"b"},
		},
	}
}

// allocateEdgeAndResourceCases: edge nodes, and resources beyond cpu.
func allocateEdgeAndResourceCases() map[string]allocateCase {
	cpu1 := resources("cpu", "1")
	return map[string]allocateCase{
		"a replica that does not ask for edge nodes never lands on one": {
			nodes: []Node{edgeNode("edge-1", "4", withUsed("cpu", "2")), cloudNode("cloud-1", "4")},
			job:   jobOf(task(learner, 1, cpu1), task(collector, 2, cpu1)),
			want:  Placement{"cloud-1", "cloud-1", "cloud-1"},
		},
		"a collector that selects edge nodes goes only to edge nodes, spread": {
			nodes: []Node{cloudNode("cloud-1", "4"), edgeNode("edge-1", "4"), edgeNode("edge-2", "4")},
			job:   jobOf(task(learner, 1, cpu1), task(collector, 2, cpu1, selecting(EdgeNodeLabel, ""))),
			want:  Placement{"cloud-1", "edge-1", "edge-2"},
		},
		"a required node affinity that needs the edge label asks for edge nodes": {
			nodes: []Node{cloudNode("cloud-1", "4"), edgeNode("edge-1", "4")},
			job:   jobOf(task(collector, 1, cpu1, requiring(expression(EdgeNodeLabel, corev1.NodeSelectorOpExists)))),
			want:  Placement{"edge-1"},
		},
		"DoesNotExist on the edge label is no ask for edge nodes": {
			nodes: []Node{cloudNode("cloud-1", "4"), edgeNode("edge-1", "4", withUsed("cpu", "2"))},
			job:   jobOf(task(collector, 1, cpu1, requiring(expression(EdgeNodeLabel, corev1.NodeSelectorOpDoesNotExist)))),
			want:  Placement{"cloud-1"},
		},
		"a term of the affinity that does not need the edge label keeps the replica in the cloud": {
			nodes: []Node{cloudNode("cloud-1", "4", withLabels("zone", "1")), edgeNode("edge-1", "4", withLabels("zone", "1"), withUsed("cpu", "2"))},
			job: jobOf(task(collector, 1, cpu1, requiring(
				expression(EdgeNodeLabel, corev1.NodeSelectorOpExists),
				expression("zone", corev1.NodeSelectorOpIn, "1")))),
			want: Placement{"cloud-1"},
		},
		"extended resources fit and pack": {
			nodes: []Node{
				cloudNode("a", "4", withUsed("cpu", "3")),
				cloudNode("b", "4", withAllocatable("nvidia.com/gpu", "4"), withUsed("nvidia.com/gpu", "1")),
				cloudNode("c", "4", withAllocatable("nvidia.com/gpu", "4")),
			},
			job:  jobOf(task(learner, 2, resources("cpu", "1", "nvidia.com/gpu", "1"))),
			want: Placement{"b", "b"},
		},
		"each replica takes one of the node's pods": {
			nodes: []Node{
				cloudNode("a", "4", withAllocatable("pods", "2"), withUsed("cpu", "2", "pods", "1")),
				cloudNode("b", "4"),
			},
			job:  jobOf(task(learner, 2, cpu1)),
			want: Placement{"a", "b"},
		},
		"a node that does not list pods has no limit on them": {
			nodes: []Node{cloudNode("a", "4", withoutAllocatable("pods"), withUsed("cpu", "2", "pods", "200"))},
			job:   jobOf(task(learner, 1, cpu1)),
			want:  Placement{"a"},
		},
		"a replica that requests nothing packs by the share of pods": {
			nodes: []Node{cloudNode("a", "4", withUsed("pods", "5")), cloudNode("b", "4", withUsed("pods", "20"))},
			job:   jobOf(task(learner, 1, nil)),
			want:  Placement{"b"},
		},
	}
}

func TestAllocatePlacesEachReplica(t *testing.T) {
	tests := allocateCases()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := PackAndSpread{}.Allocate(tc.job, tc.nodes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestAllocateSaysWhatIsMissing(t *testing.T) {
	cpu1 := resources("cpu", "1")
	tests := map[string]struct {
		nodes   []Node
		job     Job
		wantErr string
	}{
		"a resource short on every node the replica may use": {
			nodes: []Node{
				cloudNode("cloud-1", "4", withUsed("cpu", "3800m")),
				cloudNode("cloud-2", "4", withUsed("cpu", "3500m")),
				cloudNode("cloud-3", "4", withUsed("cpu", "3900m")),
				edgeNode("edge-1", "16"),
			},
			job:     jobOf(task(learner, 1, resources("memory", "1Gi")), task(collector, 2, resources("cpu", "500m"))),
			wantErr: "replica 2 (collector, rank 1 of the task) needs cpu 500m: the most free on the 3 nodes it may use is 200m (cloud-1); 2 replicas of the job were placed before it",
		},
		"memory is said in the unit of the request": {
			nodes:   []Node{cloudNode("cloud-1", "4", withUsed("memory", "15Gi")), cloudNode("cloud-2", "4", withUsed("memory", "15616Mi"))},
			job:     jobOf(task(learner, 1, resources("memory", "2Gi"))),
			wantErr: "replica 0 (learner, rank 0 of the task) needs memory 2Gi: the most free on the 2 nodes it may use is 1Gi (cloud-1)",
		},
		"an extended resource no node has": {
			nodes:   []Node{cloudNode("cloud-1", "4"), cloudNode("cloud-2", "4")},
			job:     jobOf(task(learner, 1, resources("cpu", "1", "nvidia.com/gpu", "1"))),
			wantErr: "replica 0 (learner, rank 0 of the task) needs nvidia.com/gpu 1: none of the 2 nodes it may use has nvidia.com/gpu",
		},
		"an extended resource the one node it may use does not have": {
			nodes:   []Node{cloudNode("cloud-1", "4"), cloudNode("cloud-2", "4", cordoned)},
			job:     jobOf(task(learner, 1, resources("nvidia.com/gpu", "1"))),
			wantErr: "replica 0 (learner, rank 0 of the task) needs nvidia.com/gpu 1: the one node it may use has no nvidia.com/gpu",
		},
		"the job's own replicas took the room": {
			nodes:   []Node{cloudNode("cloud-1", "4")},
			job:     jobOf(task(learner, 3, resources("cpu", "2"))),
			wantErr: "replica 2 (learner, rank 2 of the task) needs cpu 2: the most free on the one node it may use is 0 (cloud-1); 2 replicas of the job were placed before it",
		},
		"no room for one more pod": {
			nodes:   []Node{cloudNode("cloud-1", "4", withAllocatable("pods", "3"), withUsed("pods", "3"))},
			job:     jobOf(task(learner, 1, cpu1)),
			wantErr: "replica 0 (learner, rank 0 of the task) needs pods 1: the most free on the one node it may use is 0 (cloud-1)",
		},
		"each node lacks something else": {
			nodes: []Node{
				cloudNode("cloud-1", "4", withUsed("memory", "14Gi")),
				cloudNode("cloud-2", "4", withUsed("cpu", "3")),
			},
			job:     jobOf(task(learner, 1, resources("cpu", "2", "memory", "4Gi"))),
			wantErr: "replica 0 (learner, rank 0 of the task) needs cpu 2 and memory 4Gi: none of the 2 nodes it may use has all of it free (cloud-1 has 2Gi memory free and cloud-2 has 1 cpu free)",
		},
		"no node it may use, for every reason": {
			nodes: []Node{
				cloudNode("cloud-1", "4", withLabels("zone", "a"), cordoned),
				cloudNode("cloud-2", "4", withLabels("zone", "b")),
				edgeNode("edge-1", "4", withLabels("zone", "a")),
				cloudNode("cloud-3", "4", withLabels("zone", "a"), withTaint("gpu", "true", corev1.TaintEffectNoSchedule)),
			},
			job: jobOf(task(learner, 1, cpu1, selecting("zone", "a"))),
			wantErr: "replica 0 (learner, rank 0 of the task) may use none of the 4 nodes: 1 is cordoned or not Ready (cloud-1); " +
				"1 does not match its nodeSelector or required node affinity (cloud-2); " +
				"1 is an edge node, for replicas that ask for node-role.kubernetes.io/edge only (edge-1); " +
				"1 has a taint it does not tolerate (cloud-3: gpu=true:NoSchedule)",
		},
		"many nodes ruled out for one reason": {
			nodes: []Node{cloudNode("a", "4"), cloudNode("b", "4"), cloudNode("c", "4"), cloudNode("d", "4"), cloudNode("e", "4")},
			job:   jobOf(task(learner, 1, cpu1, selecting("gpu", "true"))),
			wantErr: "replica 0 (learner, rank 0 of the task) may use none of the 5 nodes: " +
				"5 do not match its nodeSelector or required node affinity (a, b, c and 2 more)",
		},
		"an edge collector when there is no edge node": {
			nodes:   []Node{cloudNode("cloud-1", "4"), cloudNode("cloud-2", "4")},
			job:     jobOf(task(learner, 1, cpu1), task(collector, 1, cpu1, named("actor"), selecting(EdgeNodeLabel, ""))),
			wantErr: "replica 1 (actor, rank 0 of the task) may use none of the 2 nodes: 2 do not match its nodeSelector or required node affinity (cloud-1 and cloud-2)",
		},
		"the only node": {
			nodes:   []Node{cloudNode("cloud-1", "4", withTaint("gpu", "true", corev1.TaintEffectNoExecute))},
			job:     jobOf(task(learner, 1, cpu1)),
			wantErr: "replica 0 (learner, rank 0 of the task) may not use the only node, which has a taint it does not tolerate (cloud-1: gpu=true:NoExecute)",
		},
		"no nodes at all": {
			job:     jobOf(task(learner, 1, cpu1)),
			wantErr: "replica 0 (learner, rank 0 of the task) has no node to run on: the cluster has no nodes",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := PackAndSpread{}.Allocate(tc.job, tc.nodes)
			if got != nil {
				t.Errorf("placement %v, want none", got)
			}
			var notFit *NotFitError
			if !errors.As(err, &notFit) {
				t.Fatalf("error %v, want a *NotFitError", err)
			}
			if diff := cmp.Diff(tc.wantErr, err.Error()); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNotFitErrorNamesTheShortResource(t *testing.T) {
	nodes := []Node{cloudNode("cloud-1", "4", withUsed("cpu", "3800m")), cloudNode("cloud-2", "4", withUsed("cpu", "3500m"))}
	_, err := PackAndSpread{}.Allocate(jobOf(task(learner, 1, resources("cpu", "1"))), nodes)
	var got *NotFitError
	if !errors.As(err, &got) {
		t.Fatalf("error %v, want a *NotFitError", err)
	}
	want := struct {
		Job, Task, MostFreeNode, Requested, MostFree string
		Rank, Nodes                                  int
		Resource                                     corev1.ResourceName
	}{"ns/job", "learner", "cloud-2", "1", "500m", 0, 2, corev1.ResourceCPU}
	gotFields := want
	gotFields.Job, gotFields.Task, gotFields.MostFreeNode = got.Job, got.Replica.Task, got.MostFreeNode
	gotFields.Requested, gotFields.MostFree = got.Requested.String(), got.MostFree.String()
	gotFields.Rank, gotFields.Nodes, gotFields.Resource = got.Replica.Rank, got.Nodes, got.Resource
	if diff := cmp.Diff(want, gotFields); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestAllocateRefusesAnAffinityItCannotRead(t *testing.T) {
	job := jobOf(task(learner, 1, resources("cpu", "1"), requiring(expression("zone", "Near", "1"))))
	got, err := PackAndSpread{}.Allocate(job, []Node{cloudNode("cloud-1", "4", withLabels("zone", "1"))})
	var notFit *NotFitError
	if got != nil || err == nil || errors.As(err, &notFit) {
		t.Fatalf("Allocate = %v, %v; want no placement and an error that is no *NotFitError", got, err)
	}
	if want := "replica 0 (learner, rank 0 of the task): required node affinity: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
}

func TestAllocateIsDeterministic(t *testing.T) {
	random := rand.New(rand.NewPCG(1, 2))
	var nodes []Node
	for i := range 30 {
		opts := []nodeOption{withUsed("cpu", fmt.Sprintf("%dm", random.IntN(4000)), "memory", fmt.Sprintf("%dMi", random.IntN(8192)))}
		if i%3 == 0 {
			opts = append(opts, withAllocatable("nvidia.com/gpu", "4"))
		}
		if i%5 == 0 {
			nodes = append(nodes, edgeNode(fmt.Sprintf("edge-%02d", i), "8", opts...))
			continue
		}
		nodes = append(nodes, cloudNode(fmt.Sprintf("cloud-%02d", i), "8", opts...))
	}
	job := jobOf(
		task(learner, 4, resources("cpu", "2", "memory", "2Gi", "nvidia.com/gpu", "1")),
		task(collector, 8, resources("cpu", "500m", "memory", "512Mi")),
		task(collector, 4, resources("cpu", "250m"), named("edge-actor"), selecting(EdgeNodeLabel, "")),
		task(evaluator, 1, resources("cpu", "1")),
	)
	want, err := PackAndSpread{}.Allocate(job, nodes)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		shuffled := slices.Clone(nodes)
		random.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got, err := PackAndSpread{}.Allocate(job, shuffled)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("(-want,+got):\n%s", diff)
		}
	}
}

// TestAllocateIsNotFooledByQuantitiesPastAnInt64: whoever may create a pod
// chooses its requests, and a quantity's MilliValue wraps past 2^63
// thousandths. A node that such a pod fills is full, and a replica that asks
// for that much fits nowhere.
func TestAllocateIsNotFooledByQuantitiesPastAnInt64(t *testing.T) {
	for _, huge := range []string{"9223372036854776", "1e16", "100Ei", "1e30"} {
		t.Run(huge, func(t *testing.T) {
			// n1's one pod requests huge cpu: nothing else fits there.
			nodes := []Node{cloudNode("n1", "4", withUsed("cpu", huge, "pods", "1")), cloudNode("n2", "4", withUsed("cpu", "3", "pods", "1"))}
			placement, err := PackAndSpread{}.Allocate(jobOf(task(collector, 1, resources("cpu", "2"))), nodes)
			var notFit *NotFitError
			if !errors.As(err, &notFit) {
				t.Errorf("a replica of 2 cpu beside a pod of %s cpu: placed %v (%v); want it refused", huge, placement, err)
			}
			// A replica that asks for huge cpu does not fit a node of 4.
			placement, err = PackAndSpread{}.Allocate(jobOf(task(learner, 1, resources("cpu", huge))), []Node{cloudNode("n3", "4")})
			if !errors.As(err, &notFit) || notFit.Resource != corev1.ResourceCPU {
				t.Errorf("a replica of %s cpu on a node of 4: placed %v (%v); want it refused for cpu", huge, placement, err)
			}
			// Optimize gives back and takes what such pods hold without
			// wrapping: a job of huge cpu placed on n3 stays there.
			job := jobOf(task(learner, 1, resources("cpu", huge)))
			job.Preemptible = true
			moves, err := PackAndSpread{}.Optimize([]Job{job}, []Node{cloudNode("n3", "4"), cloudNode("n4", "4")}, map[string]Placement{job.Key: {"n3"}})
			if err != nil || len(moves) != 0 {
				t.Errorf("Optimize moved a job of %s cpu: %v, %v", huge, moves, err)
			}
		})
	}
}
