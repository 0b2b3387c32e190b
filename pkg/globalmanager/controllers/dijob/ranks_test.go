package dijob

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	div2 "github.com/nereid-ml/nereid/pkg/apis/diengine/v2alpha1"
)

// agree fails unless the pods' ranks are unique and every two DI_NODES name
// the same pod at each index both list, each pod at its own rank.
func agree(t *testing.T, pods []*corev1.Pod) {
	t.Helper()
	byRank := map[string]string{}
	for _, p := range pods {
		r := env(p, "DI_RANK")
		if other, ok := byRank[r]; ok {
			t.Errorf("%s and %s both have DI_RANK %s", other, p.Name, r)
		}
		byRank[r] = p.Name
		nodes := strings.Split(env(p, "DI_NODES"), ",")
		rank, _ := RankOf(p)
		if rank >= len(nodes) || !strings.HasPrefix(nodes[rank], p.Name+".") {
			t.Errorf("%s has rank %d, but its DI_NODES %v names another pod there", p.Name, rank, nodes)
		}
		for _, q := range pods {
			other := strings.Split(env(q, "DI_NODES"), ",")
			n := min(len(nodes), len(other))
			if !slices.Equal(nodes[:n], other[:n]) {
				t.Errorf("the DI_NODES of %s and %s disagree:\n%v\n%v", p.Name, q.Name, nodes, other)
			}
		}
	}
}

func TestScalingOneTaskKeepsEveryRankAndDINodesAgree(t *testing.T) {
	job := exampleJob(t) // learner, collector ×2, evaluator: ranks 0..3
	made, _ := newFixture(t, job).sync(t, job)
	running := withPhase(made, corev1.PodRunning)

	// The first task grows: the new learner comes after the evaluator, whose
	// rank stays 3.
	job.Spec.Tasks[0].Replicas = 2
	created, deleted := newFixture(t, job, running...).sync(t, job)
	if len(created) != 1 || created[0].Name != "cartpole-dqn-learner-1" || len(deleted) != 0 {
		t.Fatalf("learner 1→2: created %v deleted %v, want learner-1 only", names(created), deleted)
	}
	if got := env(created[0], "DI_RANK"); got != "4" {
		t.Errorf("the new learner's DI_RANK = %s, want 4 (after the 4 running pods)", got)
	}
	if got := env(created[0], "DI_LEARNER_NODES"); strings.Count(got, ",") != 1 || !strings.HasPrefix(got, "cartpole-dqn-learner-0.") {
		t.Errorf("the new learner's DI_LEARNER_NODES = %q, want learner-0 then learner-1", got)
	}
	if created[0].Annotations[AnnotationReplicas] != "5" {
		t.Errorf("the new learner's %s = %q, want 5 (names in its DI_NODES)", AnnotationReplicas, created[0].Annotations[AnnotationReplicas])
	}
	running = append(running, withPhase(created, corev1.PodRunning)...)
	agree(t, running)

	// A collector goes, and comes back at the rank the others know it by.
	job.Spec.Tasks[1].Replicas = 1
	_, deleted = newFixture(t, job, running...).sync(t, job)
	if !slices.Equal(deleted, []string{"cartpole-dqn-collector-1"}) {
		t.Fatalf("collectors 2→1 deleted %v, want collector-1", deleted)
	}
	left := slices.DeleteFunc(slices.Clone(running), func(p *corev1.Pod) bool { return p.Name == "cartpole-dqn-collector-1" })
	job.Spec.Tasks[1].Replicas = 3
	created, _ = newFixture(t, job, left...).sync(t, job)
	if got := names(created); !slices.Equal(got, []string{"cartpole-dqn-collector-1", "cartpole-dqn-collector-2"}) {
		t.Fatalf("collectors 1→3 created %v, want collector-1 and -2", got)
	}
	if r1, r2 := env(created[0], "DI_RANK"), env(created[1], "DI_RANK"); r1 != "2" || r2 != "5" {
		t.Errorf("collector-1 and -2 got DI_RANK %s and %s, want 2 (its own, free) and 5 (past the table)", r1, r2)
	}
	agree(t, append(left, withPhase(created, corev1.PodRunning)...))
}

func TestAJobOfNoPodsNumbersItsReplicasAfresh(t *testing.T) {
	job := exampleJob(t)
	job.Spec.Tasks[0].Replicas = 2
	created, _ := newFixture(t, job).sync(t, job)
	for i, p := range created {
		if r, _ := RankOf(p); r != i {
			t.Errorf("%s has rank %d, want %d: a new job's ranks are its spec order", p.Name, r, i)
		}
	}
	agree(t, created)
}

func TestNamesPastTheBoundMakeEveryPodAgainWithRanksAfresh(t *testing.T) {
	job := exampleJob(t)
	job.Spec.Tasks = job.Spec.Tasks[1:2] // collectors
	job.Spec.Tasks[0].Replicas = 600
	made, _ := newFixture(t, job).sync(t, job)
	running := withPhase(made, corev1.PodRunning)

	// Renamed, the task's 600 new replicas would follow the 600 names the
	// running pods know: past the 1024 a job's DI_NODES may list.
	job.Spec.Tasks[0].Name = "actor"
	f := newFixture(t, job, running...)
	created, deleted := f.sync(t, job)
	if len(created) != 0 || len(deleted) != 600 {
		t.Fatalf("renamed task of 600: created %d deleted %d, want none and all 600", len(created), len(deleted))
	}
	st := f.status(t, job)
	if st.Phase != div2.JobRestarting || st.Restarts != 0 || !strings.Contains(conditionMessage(&st, div2.JobRestarting), "1200 names") {
		t.Errorf("status %s restarts %d %q, want Restarting, not counted, saying 1200 names", st.Phase, st.Restarts, conditionMessage(&st, div2.JobRestarting))
	}
	// Once they are gone the job starts afresh.
	created, _ = newFixture(t, job).sync(t, job)
	if len(created) != 600 || env(created[0], "DI_RANK") != "0" {
		t.Fatalf("after the renumbering: created %d, first rank %s, want 600 from 0", len(created), env(created[0], "DI_RANK"))
	}
}
